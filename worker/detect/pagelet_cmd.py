"""`detemplate templates`: the templates of each host of a crawl, by pagelet shingles.

Runs the local or global template detection of Bar-Yossef and Rajagopalan
(worker.detect.pagelets) over the pages of the inputs, host by host, and prints each
host's templates: the shared pagelet shingle, on how many pages it occurs, a sample of
its text and the links in it. JSONL with --json, a table otherwise.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Iterator

from worker.detect.pagelets import PageletConfig, detect, read_pages
from worker.errors import ConfigError, DetemplateError
from worker.model import RawPage
from worker.params import SegmentParams
from worker.sources import iter_inputs


def _raw_pages(inputs: list[str], dead: list[int]) -> Iterator[RawPage]:
    for item in iter_inputs(inputs):
        if isinstance(item, RawPage):
            yield item
        else:
            dead[0] += 1


def cmd_templates(args: argparse.Namespace) -> int:
    try:
        config = PageletConfig(k=args.k, w=args.w, sketch_size=1)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    start = time.perf_counter()
    undecodable = [0]
    try:
        by_host, dead = read_pages(_raw_pages(args.inputs, undecodable), SegmentParams(), config)
    except DetemplateError as exc:
        print(f"detemplate templates: {exc}", file=sys.stderr)
        return 2
    result = detect(by_host, args.algorithm, args.min_pages)
    seconds = time.perf_counter() - start
    out = sys.stdout
    for host, templates in result.templates.items():
        shown = templates if args.limit <= 0 else templates[: args.limit]
        if args.json:
            for t in shown:
                out.write(json.dumps(t.as_dict(), ensure_ascii=False) + "\n")
            continue
        share = result.template_links[host] / result.links[host] if result.links[host] else 0.0
        out.write(
            f"{host}: {result.pages[host]} pages ({result.distinct_pages[host]} distinct), "
            f"{len(templates)} templates ({args.algorithm}), "
            f"{result.template_links[host]}/{result.links[host]} links in template pagelets ({share:.1%})\n"
        )
        out.write(f"  {'pages':>6}  {'shingle':16}  {'links':>5}  sample\n")
        for t in shown:
            sample = " ".join(t.sample.split())[:70]
            out.write(f"  {t.pages:>6}  {t.shingle}  {len(t.links):>5}  {sample}\n")
        if len(shown) < len(templates):
            out.write(f"  ... {len(templates) - len(shown)} more (--limit 0 shows all)\n")
    pages = sum(result.pages.values())
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{pages} pages, {len(result.templates)} hosts, {dead + undecodable[0]} unusable, "
        f"{seconds:.2f} s ({pages / seconds if seconds else 0:.0f} pages/s), peak RSS {rss_mb:.0f} MB",
        file=sys.stderr,
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "templates",
        help="list each host's templates found by pagelet shingles (Bar-Yossef and Rajagopalan)",
        description=(
            "Cut every page into pagelets (an element none of whose children holds k links), "
            "fingerprint each pagelet by a min-hash of its word shingles, and report per host the "
            "pagelet shingles shared by several pages (local), or by pages linked to each other (global)."
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC(.gz) or a folder of .html files")
    p.add_argument("--json", action="store_true", help="print one JSON object per template instead of a table")
    p.add_argument("--k", type=int, default=3, help="links that make a child its own pagelet (default 3)")
    p.add_argument("--w", type=int, default=4, help="tokens per shingle (default 4)")
    p.add_argument("--algorithm", choices=("local", "global"), default="local", help="detector (default local)")
    p.add_argument("--min-pages", type=int, default=2, help="pages a template must occur on (default 2)")
    p.add_argument("--limit", type=int, default=20, help="templates shown per host in the table (0: all)")
    p.set_defaults(func=cmd_templates)
