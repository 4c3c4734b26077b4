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
nobody chose anything on. A last line does the same for the hosts' first pages alone
(`page_no` 1: a crawl's home pages, which the page-level model judges alone), and counts
those more than 0.05 under the page whole; `--first` lists those pages (P, R and F1, the
page whole's F1, the generator and the URL), to be read page by page.

A diagnostic, not a gold: blog generators (Hugo, Hexo, Pelican, ...) have no such element and
are left out, and an element's extent is the generator's, not a reader's. Prints figures;
asserts nothing.
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


def element_text(html: str, selectors: tuple[str, ...]) -> str | None:
    tree = LexborHTMLParser(html)
    # MathML too: KaTeX and MathJax pages carry each formula three times, twice where a reader
    # does not see it (the MathML for screen readers and its TeX annotation): a gold that
    # counted those would count every symbol of a formula three times.
    for node in tree.css("script, style, noscript, math"):
        node.decompose()
    for selector in selectors:
        node = tree.css_first(selector)
        if node is not None:
            return node.text(separator=" ")
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crawl", type=Path, help="the crawl folder (pages.jsonl.gz and sources.json)")
    ap.add_argument("output", type=Path, help="`detemplate run`'s JSONL output on that crawl")
    ap.add_argument("--worst", type=int, default=10, help="print the hosts with the least margin (default 10)")
    ap.add_argument("--first", action="store_true",
                    help="list the first pages more than 0.05 under the page whole, worst first")
    args = ap.parse_args()
    sources = json.loads((args.crawl / "sources.json").read_text(encoding="utf-8"))["sources"]
    generator = {s["host"]: s["generator"] for s in sources}
    gold: dict[str, Counter[str]] = {}
    body: dict[str, Counter[str]] = {}  # all of the page's body text: keeping everything
    for page in read_jsonl(args.crawl / "pages.jsonl.gz"):
        selectors = SELECTORS.get(generator.get(page["host"], ""))
        if selectors is None:
            continue
        text = element_text(page["html"], selectors)
        if text is not None and (counts := tokens(text)):
            gold[page["url"]] = counts
            body[page["url"]] = tokens(fulltext(page["html"]))
    ours: dict[str, list[float]] = defaultdict(list)
    whole: dict[str, list[float]] = defaultdict(list)
    first: list[tuple[float, float]] = []  # (ours, whole) of each host's first page
    under_first: list[tuple[float, float, float, float, float, str, str]] = []  # margin, P, R, F1, whole, gen, url
    for record in read_jsonl(args.output):
        counts = gold.get(record.get("url", ""))
        if counts is None:
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
    if not ours:
        print("no page of a host with a known generator in the output", file=sys.stderr)
        return 1
    rows = sorted(
        (statistics.fmean(ours[h]) - statistics.fmean(whole[h]), statistics.fmean(ours[h]),
         statistics.fmean(whole[h]), len(ours[h]), generator[h], h)
        for h in ours
    )
    print(f"{'margin':>7} {'F1':>6} {'all':>6} {'pages':>5}  generator, host")
    for margin, ours_f1, whole_f1, n, gen, host in rows[: args.worst]:
        print(f"{margin:+7.3f} {ours_f1:6.3f} {whole_f1:6.3f} {n:5d}  {gen}, {host}")
    under = [r for r in rows if r[0] < -0.005]
    print(f"{len(rows)} hosts, {sum(r[3] for r in rows)} pages: macro F1 {statistics.fmean(r[1] for r in rows):.3f}, "
          f"keeping all {statistics.fmean(r[2] for r in rows):.3f}; under keeping all (by more than 0.005): "
          f"{len(under)} host(s)")
    if first:
        print(f"first pages: {len(first)}, F1 {statistics.fmean(k for k, _ in first):.3f}, the pages whole "
              f"{statistics.fmean(w for _, w in first):.3f}; more than 0.05 under the page whole: "
              f"{sum(k < w - 0.05 for k, w in first)}")
    if args.first and under_first:
        print(f"{'margin':>7} {'P':>5} {'R':>5} {'F1':>5} {'all':>5}  generator, first page")
        for margin, precision, recall, kept, everything, gen, url in sorted(under_first):
            print(f"{margin:+7.3f} {precision:5.2f} {recall:5.2f} {kept:5.2f} {everything:5.2f}  {gen}, {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
