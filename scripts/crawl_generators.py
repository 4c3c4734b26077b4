"""Approximate gold on an unlabelled crawl: each generator's content element, host by host.

    detemplate run ../shared/crawl/pages.jsonl.gz -o out.jsonl
    python scripts/crawl_generators.py ../shared/crawl out.jsonl [--worst 10] [--first] [--lost]
        [--removed N] [--others]

The crawl has no gold, but a documentation generator puts a page's own content in an element
of its own (Sphinx's `div[role=main]`, rustdoc's `#main-content`, Doxygen's `div.contents`,
...): its text (without scripts, styles and MathML) is an approximate gold, which counts
what the element holds (a local table of contents, a breadcrumb inside it) as content and
what lies outside it as template. For every page of a host whose generator (`sources.json`)
is in `SELECTORS` and that has the element, the script scores the output's `text` and all of
the page's body text (keeping everything: `detemplate eval`'s fulltext baseline, from the
page's HTML) against that element's text, with the corpora's metric (tokens, P/R/F1 per
page, mean over the host's pages), and prints each host's F1 beside keeping all, and the
hosts where the output is under keeping all: a run that removes real content on sites
nobody chose anything on. A line does the same for the hosts' first pages alone (each host's
first page in the crawl's order: its home page, which the page-level model judges alone), and
counts those more than 0.05 under the page whole; `--first` lists those pages (P, R and F1, the
page whole's F1, the generator and the URL), to be read page by page. `--removed N` lists the
N later pages with the least recall among those whose element is most of the page (the page
whole scores at least 0.6): content removed on a warm host.

Blog generators (Hugo, Hexo, Pelican, ...) have no such element. On their pages with one
`<article>`, the article's paragraphs (its `p` elements, leaving out the article's own header,
footer, aside and nav: bylines, tags, post navigation) are text a reader would call content
whatever else the page holds; a line gives the share of them the output kept (recall, macro
over hosts), and `--lost` lists the pages that kept less than 90% of them. That measures what
was removed, not what was kept: precision needs a gold these pages do not have.

`--others` scores resiliparse's and trafilatura's main content (where installed: `pip install
'detemplate[bench]'`) on the same pages against the same gold, and prints a table of the
figures above (the documentation hosts' macro F1 and the hosts under keeping all, the first
pages' F1 and those more than 0.05 under the page whole, the blog paragraphs kept and the
pages under 90%) for the output, keeping all and each extractor. trafilatura takes about
four minutes on the crawl.

A diagnostic, not a gold: an element's extent is the generator's, not a reader's. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detemplate.tools.evaluate import fulltext, page_prf, read_jsonl, tokens
from selectolax.lexbor import LexborHTMLParser

MIN_PARAGRAPH_TOKENS = 50  # a blog page's article paragraphs scored from this many tokens on (not a list page's)

# generator (as sources.json names it) -> its content element, the first selector that matches
SELECTORS: dict[str, tuple[str, ...]] = {
    "Sphinx": ("div[role=main]", "article[role=main]", "div.body", "main"),
    "MkDocs": ("div[role=main]", "article.md-content__inner", "div.md-content", "main"),
    "HonKit/GitBook": ("section.markdown-section", "div.page-inner"),
    "crystal docs + GitBook": ("section.markdown-section", "div.page-inner", "div.main-content"),
    "Doxygen": ("div.contents",),
    "Quarto": ("main#quarto-document-content", "main"),
    "VitePress": ("div.vp-doc", "main"),
    "Javadoc": ("div.contentContainer", "main", "div.content-container"),
    "bookdown": ("div.page-inner section", "div.page-inner", "main"),
    "rustdoc": ("#main-content", "section#main"),
    "Jupyter Book": ("main#main-content", "article.bd-article", "main"),
    "pkgdown": ("main", "div.contents"),
    "TypeDoc": ("div.col-content", "div.col-8"),
    "dox (Haxe API docs)": ("div.span9", "div.content"),
    # Generators of scripts/debian_docs.py's crawl: gtk-doc's DocBook page is the body's
    # navigation table, one div of content (a refentry, chapter, section, index...), a footer.
    "Haddock": ("div#content",),
    "gi-docgen": ("section#main",),
    "gtk-doc": ("body > div:not(.footer)",),
}


# What a reader does not see. MathML too: KaTeX and MathJax pages carry each formula three
# times, twice where a reader does not see it (the MathML for screen readers and its TeX
# annotation): a gold that counted those would count every symbol of a formula three times.
UNSEEN = "script, style, noscript, math"


def element_text(html: str, selectors: tuple[str, ...]) -> str | None:
    tree = LexborHTMLParser(html)
    for node in tree.css(UNSEEN):
        node.decompose()
    for selector in selectors:
        node = tree.css_first(selector)
        if node is not None:
            return node.text(separator=" ")
    return None


def article_paragraphs(html: str) -> str | None:
    """The text of the `p` elements of a page's one `<article>` (None for none or several),
    without its header, footer, aside and nav, scripts, styles and MathML."""
    tree = LexborHTMLParser(html)
    articles = tree.css("article")
    if len(articles) != 1:
        return None
    for node in articles[0].css(f"{UNSEEN}, header, footer, aside, nav"):
        node.decompose()
    return " ".join(p.text(separator=" ") for p in articles[0].css("p"))


@dataclass
class Scores:
    """One output's figures: each documentation host's pages (F1 against the element, and the
    page whole's), the first pages', the blog pages' article paragraphs kept."""

    hosts: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    first: list[tuple[float, float]] = field(default_factory=list)  # (F1, the page whole's) of each first page
    under_first: list[tuple[float, float, float, float, float, str, str]] = field(default_factory=list)
    paragraphs: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lost: list[tuple[float, str, str]] = field(default_factory=list)  # recall, generator, url
    # a documentation host's later pages: recall, precision, F1, the page whole's F1, generator, url
    later: list[tuple[float, float, float, float, str, str]] = field(default_factory=list)

    def host_means(self) -> list[tuple[str, float, float, int]]:
        """Each host's mean F1, keeping all's, and its pages scored."""
        return [(h, statistics.fmean(k for k, _ in v), statistics.fmean(w for _, w in v), len(v))
                for h, v in self.hosts.items()]

    def macro(self) -> tuple[float, float, int]:
        """Macro F1 over the hosts, keeping all's, and the hosts more than 0.005 under keeping all."""
        rows = self.host_means()
        if not rows:
            return float("nan"), float("nan"), 0
        return (statistics.fmean(r[1] for r in rows), statistics.fmean(r[2] for r in rows),
                sum(r[1] < r[2] - 0.005 for r in rows))

    def first_means(self) -> tuple[float, float]:
        """The first pages' mean F1, and the pages whole's."""
        if not self.first:
            return float("nan"), float("nan")
        return statistics.fmean(k for k, _ in self.first), statistics.fmean(w for _, w in self.first)

    def kept_paragraphs(self) -> float:
        values = [statistics.fmean(v) for v in self.paragraphs.values()]
        return statistics.fmean(values) if values else float("nan")


@dataclass
class Gold:
    """The crawl's approximate gold: each scored page's element text or article paragraphs."""

    generator: dict[str, str]
    element: dict[str, Counter[str]] = field(default_factory=dict)  # url -> the content element's tokens
    body: dict[str, Counter[str]] = field(default_factory=dict)  # url -> all of the page's body text
    paragraphs: dict[str, Counter[str]] = field(default_factory=dict)  # url -> a blog page's article paragraphs
    first_urls: set[str] = field(default_factory=set)  # each host's first page in crawl order
    pages: list[dict[str, Any]] = field(default_factory=list)  # the scored pages (with `keep_pages`)

    @classmethod
    def read(cls, crawl: Path, keep_pages: bool = False) -> Gold:
        sources = json.loads((crawl / "sources.json").read_text(encoding="utf-8"))["sources"]
        gold = cls({s["host"]: s["generator"] for s in sources})
        seen: set[str] = set()
        for page in read_jsonl(crawl / "pages.jsonl.gz"):
            if page["host"] not in seen:
                seen.add(page["host"])
                gold.first_urls.add(page["url"])
            selectors = SELECTORS.get(gold.generator.get(page["host"], ""))
            if selectors is None:
                text = article_paragraphs(page["html"])
                if text is None or sum((counts := tokens(text)).values()) < MIN_PARAGRAPH_TOKENS:
                    continue
                gold.paragraphs[page["url"]] = counts
            else:
                text = element_text(page["html"], selectors)
                if text is None or not (counts := tokens(text)):
                    continue
                gold.element[page["url"]] = counts
                gold.body[page["url"]] = tokens(fulltext(page["html"]))
            if keep_pages:
                gold.pages.append(page)
        return gold

    def score(self, texts: Iterable[tuple[str, str, str | None]]) -> Scores:
        """Scores of an output given as (url, host, kept text) of its pages."""
        out = Scores()
        for url, host, text in texts:
            counts = self.element.get(url)
            if counts is None:
                if (wanted := self.paragraphs.get(url)) is not None:
                    recall = page_prf(tokens(text), wanted)[1]
                    out.paragraphs[host].append(recall)
                    if recall < 0.9:
                        out.lost.append((recall, self.generator.get(host, ""), url))
                continue
            precision, recall, kept = page_prf(tokens(text), counts)
            everything = page_prf(self.body[url], counts)[2]
            out.hosts[host].append((kept, everything))
            if url not in self.first_urls:
                out.later.append((recall, precision, kept, everything, self.generator[host], url))
            else:
                out.first.append((kept, everything))
                if kept < everything - 0.05:
                    out.under_first.append((kept - everything, precision, recall, kept, everything,
                                            self.generator[host], url))
        return out


def extracted(gold: Gold, extract: Callable[[str], object]) -> Iterator[tuple[str, str, str | None]]:
    """(url, host, text) of another extractor on the scored pages (a page it fails on keeps nothing)."""
    for page in gold.pages:
        try:
            text = extract(page["html"])
        except Exception:  # its failure is its empty output, scored as such
            text = None
        yield page["url"], page["host"], text if isinstance(text, str) else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crawl", type=Path, help="the crawl folder (pages.jsonl.gz and sources.json)")
    ap.add_argument("output", type=Path, help="`detemplate run`'s JSONL output on that crawl")
    ap.add_argument("--worst", type=int, default=10, help="print the hosts with the least margin (default 10)")
    ap.add_argument("--first", action="store_true",
                    help="list the first pages more than 0.05 under the page whole, worst first")
    ap.add_argument("--lost", action="store_true",
                    help="list the blog pages that kept less than 90%% of their article's paragraphs")
    ap.add_argument("--removed", type=int, default=0, metavar="N",
                    help="list the N later pages (not a host's first) of documentation hosts with the least recall "
                         "where the page whole scores at least 0.6 (the element is most of the page: content removed)")
    ap.add_argument("--others", action="store_true",
                    help="score resiliparse's and trafilatura's main content on the same pages, where installed "
                         "(trafilatura takes minutes)")
    args = ap.parse_args()
    gold = Gold.read(args.crawl, keep_pages=args.others)
    ours = gold.score((r.get("url", ""), r.get("host", ""), r.get("text")) for r in read_jsonl(args.output))
    if not ours.hosts and not ours.paragraphs:
        print("no page of a host with a known generator or one article in the output", file=sys.stderr)
        return 1
    rows = sorted((f1 - whole, f1, whole, n, gold.generator[h], h) for h, f1, whole, n in ours.host_means())
    if rows:
        print(f"{'margin':>7} {'F1':>6} {'all':>6} {'pages':>5}  generator, host")
        for margin, ours_f1, whole_f1, n, gen, host in rows[: args.worst]:
            print(f"{margin:+7.3f} {ours_f1:6.3f} {whole_f1:6.3f} {n:5d}  {gen}, {host}")
        macro, whole, under = ours.macro()
        print(f"{len(rows)} hosts, {sum(r[3] for r in rows)} pages: macro F1 {macro:.3f}, keeping all {whole:.3f}; "
              f"under keeping all (by more than 0.005): {under} host(s)")
    if ours.first:
        first_f1, first_whole = ours.first_means()
        print(f"first pages: {len(ours.first)}, F1 {first_f1:.3f}, the pages whole {first_whole:.3f}; more than "
              f"0.05 under the page whole: {len(ours.under_first)}")
    if ours.paragraphs:
        print(f"blog hosts (no content element; pages with one article): {len(ours.paragraphs)} hosts, "
              f"{sum(map(len, ours.paragraphs.values()))} pages: the article's paragraphs kept "
              f"{ours.kept_paragraphs():.4f} (macro recall); pages keeping less than 90% of them: {len(ours.lost)}")
    if args.lost and ours.lost:
        print(f"{'kept':>5}  generator, page")
        for recall, gen, url in sorted(ours.lost):
            print(f"{recall:5.3f}  {gen}, {url}")
    if args.first and ours.under_first:
        print(f"{'margin':>7} {'P':>5} {'R':>5} {'F1':>5} {'all':>5}  generator, first page")
        for margin, precision, recall, kept, everything, gen, url in sorted(ours.under_first):
            print(f"{margin:+7.3f} {precision:5.2f} {recall:5.2f} {kept:5.2f} {everything:5.2f}  {gen}, {url}")
    if args.removed:
        print(f"{'R':>5} {'P':>5} {'F1':>5} {'all':>5}  generator, later page (least recall, the page whole >= 0.6)")
        removed = sorted(r for r in ours.later if r[3] >= 0.6)[: args.removed]
        for recall, precision, kept, everything, gen, url in removed:
            print(f"{recall:5.2f} {precision:5.2f} {kept:5.2f} {everything:5.2f}  {gen}, {url}")
    if args.others:
        compare(gold, ours)
    return 0


Row = tuple[str, float, int | None, float, int | None, float | None, int | None]


def compare(gold: Gold, ours: Scores) -> None:
    """The same figures for the other extractors installed, beside the output's, on the same pages."""
    from detemplate.tools.bench import other_extractors

    found, notes = other_extractors()
    for note in notes:
        print(note)
    keeping_all: Row = ("keeping all", ours.macro()[1], None, ours.first_means()[1], None, None, None)
    table = [_row("output", ours), keeping_all]
    for extractor in found:
        logging.getLogger(extractor.name).setLevel(logging.CRITICAL)  # its warnings about pages
        table.append(_row(extractor.name, gold.score(extracted(gold, extractor.extract))))
    print("the same pages, other extractors (documentation hosts: macro F1, hosts under keeping all; first pages: "
          "F1, more than 0.05 under the page whole; blog pages: article paragraphs kept, pages under 90%)")
    print(f"{'':12} {'F1':>6} {'under':>5} {'first':>6} {'under':>5} {'blogs':>7} {'under':>5}")
    for name, f1, under, first, under_first, kept, lost in table:
        print(f"{name:12} {f1:6.3f} {_cell(under, 'd', 5)} {first:6.3f} {_cell(under_first, 'd', 5)} "
              f"{_cell(kept, '.4f', 7)} {_cell(lost, 'd', 5)}")


def _row(name: str, scores: Scores) -> Row:
    """One line of the table: macro F1 and hosts under keeping all, first pages' F1 and those under the
    page whole, blog paragraphs kept and the pages under 90% (None where the output has no blog page)."""
    macro, _, under = scores.macro()
    blogs = (scores.kept_paragraphs(), len(scores.lost)) if scores.paragraphs else (None, None)
    return name, macro, under, scores.first_means()[0], len(scores.under_first), *blogs


def _cell(value: float | int | None, spec: str, width: int) -> str:
    """A figure of the table, or "-" where it does not apply."""
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


if __name__ == "__main__":
    sys.exit(main())
