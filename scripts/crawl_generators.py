"""Approximate gold on an unlabelled crawl: each generator's content element, host by host.

    detemplate run ../shared/crawl/pages.jsonl.gz -o out.jsonl
    python scripts/crawl_generators.py ../shared/crawl out.jsonl [--worst 10] [--first]

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
nobody chose anything on. A line does the same for the hosts' first pages alone
(`page_no` 1: a crawl's home pages, which the page-level model judges alone), and counts
those more than 0.05 under the page whole; `--first` lists those pages (P, R and F1, the
page whole's F1, the generator and the URL), to be read page by page.

Blog generators (Hugo, Hexo, Pelican, ...) have no such element. On their pages with one
`<article>`, the article's paragraphs (its `p` elements, leaving out the article's own header,
footer, aside and nav: bylines, tags, post navigation) are text a reader would call content
whatever else the page holds; a line gives the share of them the output kept (recall, macro
over hosts), and `--lost` lists the pages that kept less than 90% of them. That measures what
was removed, not what was kept: precision needs a gold these pages do not have.

A diagnostic, not a gold: an element's extent is the generator's, not a reader's. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crawl", type=Path, help="the crawl folder (pages.jsonl.gz and sources.json)")
    ap.add_argument("output", type=Path, help="`detemplate run`'s JSONL output on that crawl")
    ap.add_argument("--worst", type=int, default=10, help="print the hosts with the least margin (default 10)")
    ap.add_argument("--first", action="store_true",
                    help="list the first pages more than 0.05 under the page whole, worst first")
    ap.add_argument("--lost", action="store_true",
                    help="list the blog pages that kept less than 90%% of their article's paragraphs")
    args = ap.parse_args()
    sources = json.loads((args.crawl / "sources.json").read_text(encoding="utf-8"))["sources"]
    generator = {s["host"]: s["generator"] for s in sources}
    gold: dict[str, Counter[str]] = {}
    body: dict[str, Counter[str]] = {}  # all of the page's body text: keeping everything
    paragraphs: dict[str, Counter[str]] = {}  # a blog page's article paragraphs
    for page in read_jsonl(args.crawl / "pages.jsonl.gz"):
        selectors = SELECTORS.get(generator.get(page["host"], ""))
        if selectors is None:
            text = article_paragraphs(page["html"])
            if text is not None and sum((counts := tokens(text)).values()) >= MIN_PARAGRAPH_TOKENS:
                paragraphs[page["url"]] = counts
            continue
        text = element_text(page["html"], selectors)
        if text is not None and (counts := tokens(text)):
            gold[page["url"]] = counts
            body[page["url"]] = tokens(fulltext(page["html"]))
    ours: dict[str, list[float]] = defaultdict(list)
    whole: dict[str, list[float]] = defaultdict(list)
    first: list[tuple[float, float]] = []  # (ours, whole) of each host's first page
    under_first: list[tuple[float, float, float, float, float, str, str]] = []  # margin, P, R, F1, whole, gen, url
    kept_paragraphs: dict[str, list[float]] = defaultdict(list)
    lost: list[tuple[float, str, str]] = []  # recall, generator, url
    for record in read_jsonl(args.output):
        counts = gold.get(record.get("url", ""))
        if counts is None:
            if (wanted := paragraphs.get(record.get("url", ""))) is not None:
                recall = page_prf(tokens(record["text"]), wanted)[1]
                kept_paragraphs[record["host"]].append(recall)
                if recall < 0.9:
                    lost.append((recall, generator.get(record["host"], ""), record["url"]))
            continue
        precision, recall, kept = page_prf(tokens(record["text"]), counts)
        everything = page_prf(body[record["url"]], counts)[2]
        ours[record["host"]].append(kept)
        whole[record["host"]].append(everything)
        if record.get("page_no") == 1:
            first.append((kept, everything))
            if kept < everything - 0.05:
                under_first.append((kept - everything, precision, recall, kept, everything,
                                    generator[record["host"]], record["url"]))
    if not ours and not kept_paragraphs:
        print("no page of a host with a known generator or one article in the output", file=sys.stderr)
        return 1
    rows = sorted(
        (statistics.fmean(ours[h]) - statistics.fmean(whole[h]), statistics.fmean(ours[h]),
         statistics.fmean(whole[h]), len(ours[h]), generator[h], h)
        for h in ours
    )
    if rows:
        print(f"{'margin':>7} {'F1':>6} {'all':>6} {'pages':>5}  generator, host")
        for margin, ours_f1, whole_f1, n, gen, host in rows[: args.worst]:
            print(f"{margin:+7.3f} {ours_f1:6.3f} {whole_f1:6.3f} {n:5d}  {gen}, {host}")
        under = [r for r in rows if r[0] < -0.005]
        print(f"{len(rows)} hosts, {sum(r[3] for r in rows)} pages: macro F1 "
              f"{statistics.fmean(r[1] for r in rows):.3f}, keeping all {statistics.fmean(r[2] for r in rows):.3f}; "
              f"under keeping all (by more than 0.005): {len(under)} host(s)")
    if first:
        print(f"first pages: {len(first)}, F1 {statistics.fmean(k for k, _ in first):.3f}, the pages whole "
              f"{statistics.fmean(w for _, w in first):.3f}; more than 0.05 under the page whole: "
              f"{sum(k < w - 0.05 for k, w in first)}")
    if kept_paragraphs:
        print(f"blog hosts (no content element; pages with one article): {len(kept_paragraphs)} hosts, "
              f"{sum(map(len, kept_paragraphs.values()))} pages: the article's paragraphs kept "
              f"{statistics.fmean(statistics.fmean(v) for v in kept_paragraphs.values()):.4f} (macro recall); "
              f"pages keeping less than 90% of them: {len(lost)}")
    if args.lost and lost:
        print(f"{'kept':>5}  generator, page")
        for recall, gen, url in sorted(lost):
            print(f"{recall:5.3f}  {gen}, {url}")
    if args.first and under_first:
        print(f"{'margin':>7} {'P':>5} {'R':>5} {'F1':>5} {'all':>5}  generator, first page")
        for margin, precision, recall, kept, everything, gen, url in sorted(under_first):
            print(f"{margin:+7.3f} {precision:5.2f} {recall:5.2f} {kept:5.2f} {everything:5.2f}  {gen}, {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
