"""`detemplate run`: the embedded default, over WARC, JSONL or folders of HTML, no Kafka.

Pages are decided in input order, one pass, each with only what came before it, by the
same engine the stream worker calls (each host's first page held until its second is
decided: engine/firstpages.py); JSONL output records are encoded by
`detemplate.io.codec`, so they are byte-identical to what the worker publishes. Other
formats (Markdown, plain text, WET, Parquet: `detemplate.io.formats`) carry the same
fields.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import math
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from xxhash import xxh3_64_intdigest

from . import interrupts, parallel
from .engine import page
from .engine.errors import BadInputError, ConfigError, DetemplateError
from .engine.firstpages import Decided, FirstPages
from .engine.model import DeadPage, RawPage, TemplateEvent
from .engine.params import EngineParams, add_param_argument, with_overrides
from .engine.pipeline import process_decision
from .io import codec
from .io.formats import FORMATS, JsonlWriter, OutputOptions, Writer, format_for, make_writer
from .state import expiry
from .state.base import SegmentStore
from .state.memory import MemoryStore

logger = logging.getLogger(__name__)

FLUSH_EVERY_PAGES = 10_000  # a long run makes its RocksDB state durable this often
_END = 1 << 62  # where a job of `run --jobs` places the events of the sweep at the end of the input


class HostCount:
    """The number of distinct hosts a run saw, in bounded memory: exact up to `exact_limit`
    hosts (their names in a set), then a HyperLogLog estimate (2^`bits` one-byte registers,
    16 KB: a standard error of 1.04 / sqrt(2^14), 0.8%), so that a crawl of a hundred million
    hosts does not hold a hundred million names to print one number."""

    __slots__ = ("_bits", "_exact", "_limit", "_registers")

    def __init__(self, exact_limit: int = 100_000, bits: int = 14) -> None:
        self._limit = exact_limit
        self._bits = bits
        self._exact: set[str] | None = set()
        self._registers: bytearray | None = None

    @property
    def exact(self) -> bool:
        return self._exact is not None

    def add(self, host: str) -> None:
        exact = self._exact
        if exact is not None:
            exact.add(host)
            if len(exact) > self._limit:
                self._estimate_from_now()
        else:
            self._count(host)

    def update(self, other: HostCount) -> None:
        """Count `other`'s hosts too (a union: a host both saw counts once)."""
        if self._exact is not None and other._exact is not None:
            for host in other._exact:
                self.add(host)
            return
        if self._exact is not None:
            self._estimate_from_now()
        assert self._registers is not None
        if other._exact is not None:
            for host in other._exact:
                self._count(host)
        else:
            assert other._registers is not None and other._bits == self._bits
            self._registers = bytearray(map(max, self._registers, other._registers))

    def __len__(self) -> int:
        if self._exact is not None:
            return len(self._exact)
        registers = self._registers
        assert registers is not None
        m = len(registers)
        harmonic = sum([2.0 ** -r for r in registers])
        estimate = 0.7213 / (1.0 + 1.079 / m) * m * m / harmonic
        zeros = registers.count(0)
        if estimate <= 2.5 * m and zeros:  # few hosts for the registers: linear counting
            estimate = m * math.log(m / zeros)
        return round(estimate)

    def _estimate_from_now(self) -> None:
        self._registers = bytearray(1 << self._bits)
        for host in self._exact or ():
            self._count(host)
        self._exact = None

    def _count(self, host: str) -> None:
        registers = self._registers
        assert registers is not None
        h = xxh3_64_intdigest(host.encode("utf-8", "surrogatepass"))
        rest_bits = 64 - self._bits
        rest = h & ((1 << rest_bits) - 1)
        rank = rest_bits - rest.bit_length() + 1  # leading zeros of the rest, plus one
        index = h >> rest_bits
        if rank > registers[index]:
            registers[index] = rank


@dataclass
class RunSummary:
    """What a run did: the figures printed at its end."""

    pages: int = 0
    clean: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    hosts: HostCount = field(default_factory=HostCount)
    chars: int = 0
    template_chars: int = 0
    events: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    markdown_fallbacks: int = 0  # pages written as plain text in Markdown output (io/markdown.py)

    @property
    def template_share(self) -> float:
        return self.template_chars / self.chars if self.chars else 0.0

    def lines(self) -> list[str]:
        rate = self.pages / self.seconds if self.seconds else 0.0
        errors = sum(self.errors.values())
        out = [
            f"pages        {self.pages:,} ({self.clean:,} clean, {errors:,} errors)",
            f"hosts        {len(self.hosts):,}"
            + ("" if self.hosts.exact else " (estimated, to about 1%: more hosts than a run counts by name)"),
            f"template     {self.template_share:.1%} of page text removed as template",
            f"events       {sum(self.events.values()):,}"
            + (f" ({', '.join(f'{k} {v}' for k, v in sorted(self.events.items()))})" if self.events else ""),
            f"speed        {rate:,.0f} pages/s ({self.seconds:.1f} s; page walk {page.status()})",
        ]
        if errors:
            out.append("errors       " + ", ".join(f"{k} {v}" for k, v in self.errors.most_common()))
        if self.markdown_fallbacks:
            out.append(f"markdown     {self.markdown_fallbacks:,} pages written as plain text (structure not matched)")
        return out


def open_output(path: str, stack: ExitStack, compress: bool = True) -> IO[bytes]:
    """A binary writer for PATH, '-' for standard output, gzip when PATH ends in .gz (and `compress`)."""
    if path == "-":
        return sys.stdout.buffer
    p = Path(path)
    try:
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True)
        if p.suffix == ".gz" and compress:
            return stack.enter_context(gzip.open(p, "wb"))  # type: ignore[arg-type]  # GzipFile is an IO[bytes]
        return stack.enter_context(open(p, "wb"))
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from exc


class Placement(Protocol):
    """Where a run's outputs go in the input's order, for a job of `run --jobs` (parallel.py):
    the item being decided, and a held first page published by its bound at another place."""

    def position(self) -> int:
        """The position in the input of the item being decided."""
        ...

    def place(self, at: int | None) -> None:
        """Outputs from now on go just after position `at`'s (None: the item's own place again)."""
        ...

    def sweep_at(self, at: int | None) -> None:
        """Events from now on are a sweep's after position `at` (after its own records and
        before a held page placed there; the jobs' sweep events there in their bytes' order);
        None: back to where they went before."""
        ...

    def records(self) -> int:
        """The records of the whole input (once this job's items have all come)."""
        ...


def run_pages(
    pages: Iterable[RawPage | DeadPage],
    store: SegmentStore,
    params: EngineParams,
    out: IO[bytes] | None = None,
    events_out: IO[bytes] | None = None,
    with_html: bool = False,
    summary: RunSummary | None = None,
    writer: Writer | None = None,
    placement: Placement | None = None,
) -> RunSummary:
    """Decide every page in order, writing clean pages and error records to `writer` (JSONL to
    `out` when None). A host's first page goes out once its second is decided
    (engine/firstpages.py), just before it."""
    summary = summary or RunSummary()
    if writer is None:
        assert out is not None, "run_pages writes to `writer` or, as JSONL, to `out`"
        writer = JsonlWriter(out, OutputOptions())
    started = time.perf_counter()
    first_pages = FirstPages(params, with_html)

    def write_events(events: Iterable[TemplateEvent]) -> None:
        for event in events:
            summary.events[event.type] += 1
            if events_out is not None:
                events_out.write(codec.encode_event(event) + b"\n")

    def publish(decided: Iterable[Decided]) -> None:
        for item in decided:
            page_in, outcome, at = item.page, item.outcome, item.at
            if at is not None and placement is not None:
                placement.place(at)
            if outcome.dead is not None:
                summary.errors[outcome.dead.reason] += 1
                writer.dead(outcome.dead)
                continue
            clean = outcome.clean
            assert clean is not None  # an Outcome holds a clean page or a dead one
            try:
                writer.clean(clean, page_in)
            except BadInputError as exc:
                # A field no output can carry (a lone surrogate from an API caller's page): an
                # error line in its place, and the run goes on.
                summary.errors[exc.reason] += 1
                writer.dead(DeadPage(clean.url, clean.host, exc.reason, exc.detail, page_in.source))
                continue
            summary.clean += 1
            summary.hosts.add(clean.host)
            for block in clean.blocks:
                summary.chars += block.chars
                if block.verdict == "template":
                    summary.template_chars += block.chars
            write_events(outcome.events)

    def boundary(records: int, force: bool = False) -> None:
        """The state made durable and, when a sweep is due (or `force`: the end of the input),
        whole hosts expired, once the input's first `records` records are decided: the same
        records whatever the jobs (a job sweeps its own hosts where one job sweeps all, its
        events placed where one job writes them, each sweep's in their bytes' order)."""
        store.advance(records)
        if placement is not None:
            placement.sweep_at(_END if force else records - 1)
        store.flush()
        store.expire(force=force)  # whole hosts unseen too long, or over the budget (state/expiry.py)
        write_events(sorted(store.take_events(), key=codec.encode_event))
        if placement is not None:
            placement.sweep_at(None)

    def boundaries_up_to(records: int) -> None:
        """The boundaries among the records other jobs decided since this job's last one (none
        where the records follow on, as in one job)."""
        if records > done:
            for at in range((done // FLUSH_EVERY_PAGES + 1) * FLUSH_EVERY_PAGES, records + 1, FLUSH_EVERY_PAGES):
                boundary(at)

    done = 0  # the input's records decided up to this one (by this job and, before it, the others)
    held_back = interrupts.HELD_BACK  # an interrupt (`run`'s Ctrl-C, SIGTERM) waits for the page
    try:
        for item in pages:
            held_back.held = True
            try:
                at = summary.pages if placement is None else placement.position()
                summary.pages += 1
                boundaries_up_to(at)
                done = at + 1
                store.advance(done)
                due = first_pages.due(at)
                if due:  # held first pages whose second page did not come in time: as decided alone
                    publish(due)
                    if placement is not None:
                        placement.place(None)
                if isinstance(item, DeadPage):
                    summary.errors[item.reason] += 1
                    writer.dead(item)
                else:
                    outcome, _ballot, walked = process_decision(item, store, params, with_html)
                    publish(first_pages.decided(item, outcome, None, at, walked=walked))
                    write_events(store.take_events())  # a bounded table's event after the page's
                if done % FLUSH_EVERY_PAGES == 0:
                    boundary(done)
            finally:
                held_back.held = False
            if held_back.pending is not None:
                held_back.raise_pending()
        end = summary.pages if placement is None else placement.records()
        boundaries_up_to(end)
        done = end
        publish(first_pages.flush())  # the end of the input: what is still held, in input order
    except KeyboardInterrupt:  # stopped between two pages: what is held goes out, as at the input's end
        publish(first_pages.flush())
        raise
    finally:
        summary.seconds += time.perf_counter() - started
        summary.markdown_fallbacks = writer.fallbacks
        boundary(done, force=True)
        store.flush()
    return summary


def _progress(items: Iterable[RawPage | DeadPage], total: int | None) -> Iterator[RawPage | DeadPage]:
    if not sys.stderr.isatty():
        yield from items
        return
    from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type stubs

    with tqdm(items, total=total, unit="page", dynamic_ncols=True, file=sys.stderr) as bar:
        yield from bar


def _closing(store: SegmentStore) -> Callable[..., bool]:
    """The store's close for a run's ExitStack: where the run failed already, a close that fails
    too (the disk full under the state as well) does not hide the run's own reason."""

    def close(exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        try:
            store.close()
        except DetemplateError:
            if exc is None:
                raise
        return False

    return close


def cmd_run(args: argparse.Namespace) -> int:
    from .io.sources import estimate_total, iter_inputs

    try:
        params = with_overrides(EngineParams(), args.param)
        fmt = format_for(args.output, args.format)
        policy = expiry.policy_from_args(args)
        pages = iter_inputs(args.inputs, params.segment.max_page_bytes)
        total = None if "-" in args.inputs else estimate_total(args.inputs)
        jobs = parallel.resolve_jobs(args.jobs, args.inputs)
        for work in parallel.remove_abandoned(args.state):
            print(f"detemplate run: removed {work}, the jobs' folder of an earlier run that was killed",
                  file=sys.stderr)
    except ConfigError as exc:
        print(f"detemplate run: {exc}", file=sys.stderr)
        return 2
    summary = RunSummary()
    # WET writes a gzip member a record itself; Parquet compresses itself.
    own_gzip = fmt == "wet" and args.output.lower().endswith(".gz")
    options = OutputOptions(blocks=not args.no_blocks, segment=params.segment, gz=own_gzip)
    started: parallel.Jobs | None = None
    # Ctrl-C and SIGTERM stop the run between two pages (run_pages holds them back within one).
    # The file's and the jobs' clean-up (the ExitStack) runs before the reasons are told: a
    # write that fails may fail again when its file is closed.
    with interrupts.interrupts((signal.SIGINT, signal.SIGTERM)):
        try:
            with ExitStack() as stack:
                if jobs > 1:  # the hosts split over processes, the same bytes (parallel.py)
                    spec = parallel.JobSpec(tuple(args.inputs), jobs, params, fmt, options, run_pages, args.html,
                                            bool(args.events), args.state, policy)
                    # Started before the state and the output are opened: forked, they share neither.
                    started = stack.enter_context(parallel.start_jobs(spec))
                if args.state:
                    from .state.rocks import RocksStore

                    store: SegmentStore = RocksStore(args.state, params.table, policy=policy)
                else:
                    store = MemoryStore(policy)
                stack.push(_closing(store))
                out = open_output(args.output, stack, compress=fmt not in ("wet", "parquet"))
                writer = make_writer(fmt, out, options)
                events_out = open_output(args.events, stack) if args.events else None
                try:
                    if started is not None:
                        parallel.run_jobs(started.spec, store, writer, events_out, summary, total, started)
                    else:
                        run_pages(_progress(pages, total), store, params, None, events_out, args.html, summary, writer)
                finally:
                    writer.close()
        except parallel.JobFailedError as exc:
            print(f"detemplate run: {exc}", file=sys.stderr)
            return 1
        except DetemplateError as exc:
            print(f"detemplate run: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            raise  # (standard output's reader went away: cli.main ends quietly)
        except OSError as exc:  # a write of the output or the events (the disk full, a device gone)
            print(f"detemplate run: a write failed: {exc.strerror or exc}; the output holds what was written "
                  "before it", file=sys.stderr)
            return 1
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (interrupts.Terminated)
            word, code = interrupts.outcome(exc)
            if jobs == 1:  # (stopped between two pages: run_pages)
                done = (f"the output, events and state hold the input's first {summary.pages:,} records, "
                        "as a run of those alone would write them")
            elif started is not None and started.copy == "copied":  # (after the run's last step)
                done = "after the run's last step: the output, events and state are whole"
            elif started is not None and started.copy == "copying":  # (a second interrupt cut the copy)
                done = ("in the run's last step: every record is out; the state holds this run's tables "
                        "of the hosts copied before the interrupt")
            else:  # (the summary is the jobs', which a stopped job does not send: nothing to print)
                merged = started.merges[0].records if started is not None and started.merges else 0
                done = (f"the jobs stopped; the output holds the first {merged:,} records, those merged so far; "
                        "the state is as it was")
            print(f"{word}: {done}", file=sys.stderr)
            if jobs == 1:
                for line in summary.lines():
                    print(line, file=sys.stderr)
            return code
    for line in summary.lines():
        print(line, file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="clean pages from WARC, JSONL or folders of HTML (no Kafka)",
        description=(
            "Decide every page of the inputs in order, one pass, each page with only what came before "
            "it, and write a record per page: the clean page (url, host, page_no, title, lang, date, the "
            "WARC record it came from, its text, blocks with their verdicts) or an error record with the "
            "reason. Template events go to --events."
        ),
        epilog=(
            "INPUT may be JSONL or JSONL.gz raw pages ({\"url\", \"host\"?, \"html\"}), WARC or ARC files "
            "(.gz or not; HTML response records), folders of .html files, in any mix, or - for standard input. "
            "Formats (docs/formats.md): jsonl (default), markdown, text, wet (WARC conversion records, as "
            "Common Crawl's), parquet (pip install 'detemplate[parquet]'); chosen by --format or by the "
            "output's name (.jsonl, .md, .txt, .wet/.warc, .parquet; .gz compresses). "
            "Example: detemplate run crawl.warc.gz --output clean.jsonl --events events.jsonl --state state/"
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC/ARC(.gz), a folder of .html files, -")
    p.add_argument(
        "-o", "--output", required=True, help="where the clean pages go ('-' for stdout, .gz to compress)"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: by the output's name, else jsonl)",
    )
    p.add_argument(
        "--no-blocks",
        action="store_true",
        help="leave out each page's blocks (the lean form: a third of the size, or less)",
    )
    p.add_argument("--events", help="write template events as JSONL here")
    p.add_argument(
        "--state",
        metavar="DIR",
        help="keep per-host tables in RocksDB in DIR, so a later run goes on learning (default: in memory)",
    )
    p.add_argument("--html", action="store_true", help="add each page's HTML with template text removed")
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="processes, the hosts split over them, the same output as one (docs/parallel.md; with "
        "--state-budget-mb each keeps its hosts under budget / N; default: the cores; one for input under 8 MB "
        "(16 off Linux), where starting the jobs costs more than they save; one for standard input, which refuses "
        "more)",
    )
    expiry.add_arguments(p)
    add_param_argument(
        p,
        "override an algorithm parameter, e.g. table.tb=50 or segment.path_mode=tag_class (repeatable)",
    )
    p.set_defaults(func=cmd_run)
