"""`detemplate run` in every output format over the same pages: pages/s beside JSONL, sizes,
and each output opened by the library its users read it with.

    python scripts/measure_formats.py INPUT... [--rounds 3] [--out DIR]

The pages are read once (iter_inputs, as `run` reads them) and then decided in each format
in turn, each round with a fresh in-memory state, so the figures differ only by the writer;
the best round of each is printed. Then each output is opened: JSONL with json, Markdown and
text split at their front matter and read with PyYAML and markdown-it-py, WET with warcio
(and FastWARC's digest check), Parquet with pyarrow; for WARC and ARC inputs, warcio's count
of HTML response records is printed beside detemplate's. docs/formats.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from detemplate.engine.errors import BadInputError
from detemplate.engine.model import RawPage
from detemplate.engine.page import parse
from detemplate.engine.page.meta import page_lang, page_title
from detemplate.engine.params import EngineParams
from detemplate.io.formats import OutputOptions, make_writer
from detemplate.io.sources import iter_inputs
from detemplate.offline import RunSummary, run_pages
from detemplate.state.memory import MemoryStore

RUNS = [
    ("jsonl", "out.jsonl", True),
    ("jsonl --no-blocks", "lean.jsonl", False),
    ("markdown", "out.md", True),
    ("text", "out.txt", True),
    ("wet", "out.wet.gz", True),
    ("parquet", "out.parquet", True),
]


def decide_all(items: list[Any], fmt: str, path: Path, blocks: bool, params: EngineParams) -> RunSummary:
    options = OutputOptions(blocks=blocks, segment=params.segment, gz=path.name.endswith(".gz"))
    with open(path, "wb") as fh:
        writer = make_writer(fmt.split()[0], fh, options)
        try:
            return run_pages(items, MemoryStore(), params, writer=writer)
        finally:
            writer.close()


def open_outputs(folder: Path) -> dict[str, str]:
    """Each output read back by its users' library: what it holds."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]
    import yaml  # type: ignore[import-untyped]
    from fastwarc.warc import ArchiveIterator as FastIterator
    from markdown_it import MarkdownIt
    from warcio.archiveiterator import ArchiveIterator

    out: dict[str, str] = {}
    for name in ("out.jsonl", "lean.jsonl"):
        recs = [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()]
        clean = [r for r in recs if "error" not in r]
        out[name] = (f"json: {len(recs)} records, {len(clean)} clean pages, {len(recs) - len(clean)} errors; "
                     f"{sum('title' in r for r in clean)} with a title, {sum('lang' in r for r in clean)} a lang, "
                     f"{sum('date' in r for r in clean)} a date, {sum('warc' in r for r in clean)} a WARC record")
    md = MarkdownIt("commonmark").enable("table")
    for name in ("out.md", "out.txt"):
        parts = re.split(r"(?m)^---\n", (folder / name).read_text(encoding="utf-8"))
        fronts = [yaml.safe_load(parts[i]) for i in range(1, len(parts), 2)]
        bodies = [parts[i + 1] for i in range(1, len(parts), 2)]
        errors = sum("error" in f for f in fronts)
        line = f"PyYAML: {len(fronts)} front matters ({len(fronts) - errors} pages, {errors} errors)"
        if name == "out.md":
            kinds: Counter[str] = Counter()
            for body in bodies:
                for t in md.parse(body):
                    kinds[t.type] += 1
                    for child in t.children or []:
                        kinds[child.type] += 1
            line += (f"; markdown-it-py: {kinds['heading_open']} headings, "
                     f"{kinds['bullet_list_open'] + kinds['ordered_list_open']} lists, {kinds['table_open']} tables, "
                     f"{kinds['fence']} code blocks, {kinds['link_open']} links")
        out[name] = line
    with open(folder / "out.wet.gz", "rb") as fh:
        types = Counter(r.rec_type for r in ArchiveIterator(fh))
    with open(folder / "out.wet.gz", "rb") as fh:
        digests = sum(r.verify_block_digest() for r in FastIterator(fh, parse_http=False))
    out["out.wet.gz"] = (f"warcio: {types['conversion']} conversion, {types['metadata']} metadata (errors), "
                         f"{types['warcinfo']} warcinfo records; FastWARC: {digests} block digests verified")
    table = pq.read_table(folder / "out.parquet")
    errors = table.column("error").null_count
    out["out.parquet"] = (f"pyarrow: {table.num_rows} rows, {len(table.column_names)} columns, "
                          f"{table.num_rows - errors} errors")
    return out


def warcio_pages(paths: list[str]) -> int | None:
    """HTML 2xx response (and HTML resource) records of the WARC/ARC inputs, as warcio counts them."""
    from warcio.archiveiterator import ArchiveIterator

    total = 0
    for p in paths:
        if not re.search(r"\.(w?arc)(\.gz)?$", p):
            return None
        with open(p, "rb") as fh:
            try:
                for r in ArchiveIterator(fh, arc2warc=True):
                    if r.rec_type == "response" and r.http_headers is not None:
                        status = r.http_headers.get_statuscode()
                        ctype = (r.http_headers.get_header("Content-Type") or "text/html").split(";")[0].strip().lower()
                        total += status.startswith("2") and ctype in ("text/html", "application/xhtml+xml")
                    elif r.rec_type == "resource":
                        ctype = (r.rec_headers.get_header("Content-Type") or "").split(";")[0].strip().lower()
                        total += ctype in ("text/html", "application/xhtml+xml")
            except Exception as exc:  # a reader's failure is a figure here
                print(f"  warcio stops in {p}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return total


def meta_cost(items: list[Any], params: EngineParams, rounds: int) -> tuple[float, float]:
    """Microseconds a page (best round): lexbor's parse, and title + lang on the parsed tree."""
    pages = [p for p in items if isinstance(p, RawPage)]
    best_parse = best_meta = float("inf")
    for _ in range(rounds):
        trees = []
        t0 = time.perf_counter()
        for p in pages:
            try:
                trees.append(parse(p.html, params.segment))
            except BadInputError:  # a page the guards refuse has no tree
                continue
        t1 = time.perf_counter()
        for tree in trees:
            page_title(tree)
            page_lang(tree)
        t2 = time.perf_counter()
        n = max(len(trees), 1)
        best_parse = min(best_parse, (t1 - t0) / n * 1e6)
        best_meta = min(best_meta, (t2 - t1) / n * 1e6)
    return best_parse, best_meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="keep the outputs here (default: a temporary folder)")
    args = ap.parse_args()
    params = EngineParams()
    items = list(iter_inputs(args.inputs, params.segment.max_page_bytes))
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="detemplate-formats-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{len(items)} records from {', '.join(args.inputs)}; outputs in {folder}")
    best: dict[str, float] = {}
    summary = RunSummary()
    for _ in range(args.rounds):
        for fmt, name, blocks in RUNS:
            summary = decide_all(items, fmt, folder / name, blocks, params)
            rate = summary.pages / summary.seconds if summary.seconds else 0.0
            best[fmt] = max(best.get(fmt, 0.0), rate)
    base = best["jsonl"]
    size0 = (folder / "out.jsonl").stat().st_size
    print(f"\n{'format':<20} {'pages/s':>9} {'vs jsonl':>9} {'bytes':>12} {'vs jsonl':>9}")
    for fmt, name, _ in RUNS:
        size = (folder / name).stat().st_size
        print(f"{fmt:<20} {best[fmt]:>9,.0f} {best[fmt] / base:>9.2f} {size:>12,} {size / size0:>9.2f}")
    print(f"\n({summary.pages} pages, {summary.clean} clean, {sum(summary.errors.values())} errors "
          f"{dict(summary.errors)}; best of {args.rounds} rounds, a fresh state each)")
    parse_us, meta_us = meta_cost(items, params, args.rounds)
    print(f"title + lang (engine/page/meta.py): {meta_us:.1f} us a page; lexbor's parse of the same pages: "
          f"{parse_us:.0f} us")
    print("\nopened by their users' libraries:")
    for name, line in open_outputs(folder).items():
        print(f"  {name:<12} {line}")
    counted = warcio_pages(args.inputs)
    if counted is not None:
        print(f"\nwarcio counts {counted} HTML 2xx response/resource records in the inputs; detemplate read "
              f"{sum(isinstance(p, RawPage) for p in items)} pages from them")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
