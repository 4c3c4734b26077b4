"""A JSONL crawl in another order: sorted by URL, or shuffled, as `detemplate eval --order`
reorders a corpus.

    python scripts/reorder_pages.py ../shared/crawl/pages.jsonl.gz by-url.jsonl.gz --order url
    python scripts/reorder_pages.py ../shared/crawl/pages.jsonl.gz shuffled.jsonl.gz --order shuffled --seed 3
    detemplate run by-url.jsonl.gz -o out.jsonl
    python scripts/crawl_generators.py ../shared/crawl out.jsonl --removed 25

`detemplate run` decides the pages in the order they come, each with only what came before
it, and a user's crawl need not come in crawl order: a dump sorted by URL, a sitemap's order,
several crawls mixed. A host's run of pages of one type (an API's classes one after another)
is what a sorted order gives and a crawl's order hides (docs/measurements.md, "Repetition
inside the region bounded by the region's share").

The order is `detemplate.tools.evaluate.reorder`'s, which orders the lines: a stable sort by
the records' "url", or `random.Random(seed).shuffle` of the records. The lines are written as
they were read (only their "url" is decoded, for the sort); a line without one is an error
that names it. The output is gzip
compressed when its name ends in .gz. Prints what it wrote; asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import IO, NamedTuple

from detemplate.tools.evaluate import reorder


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8", compresslevel=1 if mode == "w" else 9)
    return open(path, mode, encoding="utf-8")


class Line(NamedTuple):
    """A record's line, with its "url" where the order needs it ("" for a shuffle)."""

    url: str
    line: str


def _url(line: str, number: int, source: str) -> str:
    try:
        return str(json.loads(line)["url"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{source}:{number}: not a JSON record with a \"url\" ({exc!r})") from None


def reordered(lines: list[str], order: str, seed: int, source: str = "input") -> list[str]:
    """The JSONL lines in `order` ("url" or "shuffled"), by `reorder`."""
    if order == "url":
        records = [Line(_url(line, number, source), line) for number, line in enumerate(lines, 1)]
    else:
        records = [Line("", line) for line in lines]
    return [record.line for record in reorder(records, order, seed)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("input", type=Path, help="JSONL or JSONL.gz raw pages, one {\"url\", ...} record a line")
    ap.add_argument("output", type=Path, help="where the reordered lines go (.gz compresses)")
    ap.add_argument("--order", choices=("url", "shuffled"), required=True,
                    help="url: a stable sort by URL; shuffled: a random order drawn from --seed")
    ap.add_argument("--seed", type=int, default=0, help="the shuffle's seed (default 0)")
    args = ap.parse_args()
    with _open(args.input, "r") as fh:
        lines = [line if line.endswith("\n") else line + "\n" for line in fh if line.strip()]
    out = reordered(lines, args.order, args.seed, str(args.input))
    with _open(args.output, "w") as fh:
        fh.writelines(out)
    seed = f", seed {args.seed}" if args.order == "shuffled" else ""
    print(f"{args.output}: {len(out)} records, order {args.order}{seed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
