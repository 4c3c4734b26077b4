"""`detemplate run`: the embedded default, over WARC, JSONL or folders of HTML, no Kafka.

Pages are decided in input order, one pass, each with only what came before it, by the
same `process_page` the stream worker calls; output records are encoded by
`detemplate.io.codec`, so they are byte-identical to what the worker publishes.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .engine import page
from .engine.errors import ConfigError, DetemplateError
from .engine.model import DeadPage, RawPage, TemplateEvent
from .engine.params import EngineParams, add_param_argument, with_overrides
from .engine.pipeline import process_page
from .io import codec
from .state import expiry
from .state.base import SegmentStore
from .state.memory import MemoryStore

logger = logging.getLogger(__name__)

FLUSH_EVERY_PAGES = 10_000  # a long run makes its RocksDB state durable this often


@dataclass
class RunSummary:
    """What a run did: the figures printed at its end."""

    pages: int = 0
    clean: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    hosts: set[str] = field(default_factory=set)
    chars: int = 0
    template_chars: int = 0
    events: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def template_share(self) -> float:
        return self.template_chars / self.chars if self.chars else 0.0

    def lines(self) -> list[str]:
        rate = self.pages / self.seconds if self.seconds else 0.0
        errors = sum(self.errors.values())
        out = [
            f"pages        {self.pages:,} ({self.clean:,} clean, {errors:,} errors)",
            f"hosts        {len(self.hosts):,}",
            f"template     {self.template_share:.1%} of page text removed as template",
            f"events       {sum(self.events.values()):,}"
            + (f" ({', '.join(f'{k} {v}' for k, v in sorted(self.events.items()))})" if self.events else ""),
            f"speed        {rate:,.0f} pages/s ({self.seconds:.1f} s; page walk {page.status()})",
        ]
        if errors:
            out.append("errors       " + ", ".join(f"{k} {v}" for k, v in self.errors.most_common()))
        return out


def open_output(path: str, stack: ExitStack) -> IO[bytes]:
    """A binary writer for PATH, '-' for standard output, gzip when PATH ends in .gz."""
    if path == "-":
        return sys.stdout.buffer
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True)
    if p.suffix == ".gz":
        return stack.enter_context(gzip.open(p, "wb"))  # type: ignore[arg-type]  # GzipFile is an IO[bytes]
    return stack.enter_context(open(p, "wb"))


def run_pages(
    pages: Iterable[RawPage | DeadPage],
    store: SegmentStore,
    params: EngineParams,
    out: IO[bytes],
    events_out: IO[bytes] | None = None,
    with_html: bool = False,
    summary: RunSummary | None = None,
) -> RunSummary:
    """Decide every page in order, writing clean pages and error records to `out`."""
    summary = summary or RunSummary()
    started = time.perf_counter()
    write = out.write

    def write_events(events: Iterable[TemplateEvent]) -> None:
        for event in events:
            summary.events[event.type] += 1
            if events_out is not None:
                events_out.write(codec.encode_event(event) + b"\n")

    try:
        for item in pages:
            summary.pages += 1
            if isinstance(item, DeadPage):
                summary.errors[item.reason] += 1
                write(codec.encode_dead(item) + b"\n")
                continue
            outcome = process_page(item, store, params, with_html)
            if outcome.dead is not None:
                summary.errors[outcome.dead.reason] += 1
                write(codec.encode_dead(outcome.dead) + b"\n")
                continue
            clean = outcome.clean
            assert clean is not None  # an Outcome holds a clean page or a dead one
            summary.clean += 1
            summary.hosts.add(clean.host)
            for block in clean.blocks:
                summary.chars += block.chars
                if block.verdict == "template":
                    summary.template_chars += block.chars
            write(codec.encode_clean(clean) + b"\n")
            write_events((*outcome.events, *store.take_events()))  # a bounded table's event after the page's
            if summary.pages % FLUSH_EVERY_PAGES == 0:
                store.flush()
                store.expire()  # whole hosts unseen too long, or over the budget (state/expiry.py)
                write_events(store.take_events())
    finally:
        summary.seconds += time.perf_counter() - started
        store.expire(force=True)
        write_events(store.take_events())
        store.flush()
    return summary


def _progress(items: Iterable[RawPage | DeadPage], total: int | None) -> Iterator[RawPage | DeadPage]:
    if not sys.stderr.isatty():
        yield from items
        return
    from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type stubs

    with tqdm(items, total=total, unit="page", dynamic_ncols=True, file=sys.stderr) as bar:
        yield from bar


def cmd_run(args: argparse.Namespace) -> int:
    from .io.sources import estimate_total, iter_inputs

    try:
        params = with_overrides(EngineParams(), args.param)
        policy = expiry.policy_from_args(args)
        pages = iter_inputs(args.inputs)
        total = estimate_total(args.inputs)
    except ConfigError as exc:
        print(f"detemplate run: {exc}", file=sys.stderr)
        return 2
    summary = RunSummary()
    with ExitStack() as stack:
        try:
            if args.state:
                from .state.rocks import RocksStore

                store: SegmentStore = RocksStore(args.state, params.table, policy=policy)
            else:
                store = MemoryStore(policy)
            stack.callback(store.close)
            out = open_output(args.output, stack)
            events_out = open_output(args.events, stack) if args.events else None
            run_pages(_progress(pages, total), store, params, out, events_out, args.html, summary)
        except DetemplateError as exc:
            print(f"detemplate run: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted: state and output written up to the last page", file=sys.stderr)
            for line in summary.lines():
                print(line, file=sys.stderr)
            return 130
    for line in summary.lines():
        print(line, file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="clean pages from WARC, JSONL or folders of HTML (no Kafka)",
        description=(
            "Decide every page of the inputs in order, one pass, each page with only what came before "
            "it, and write one JSON line per page: the clean page (url, host, page_no, text, blocks "
            "with their verdicts) or an error record with the reason. Template events go to --events."
        ),
        epilog=(
            "INPUT may be JSONL or JSONL.gz raw pages ({\"url\", \"host\"?, \"html\"}), WARC or WARC.gz "
            "files (HTML response records), or folders of .html files, in any mix. "
            "Example: detemplate run crawl.warc.gz --output clean.jsonl --events events.jsonl --state state/"
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC(.gz) or a folder of .html files")
    p.add_argument("-o", "--output", required=True, help="clean pages as JSONL ('-' for stdout, .gz to compress)")
    p.add_argument("--events", help="write template events as JSONL here")
    p.add_argument(
        "--state",
        metavar="DIR",
        help="keep per-host tables in RocksDB in DIR, so a later run goes on learning (default: in memory)",
    )
    p.add_argument("--html", action="store_true", help="add each page's HTML with template text removed")
    expiry.add_arguments(p)
    add_param_argument(
        p,
        "override an algorithm parameter, e.g. table.tb=50 or segment.path_mode=tag_class (repeatable)",
    )
    p.set_defaults(func=cmd_run)
