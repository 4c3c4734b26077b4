"""`detemplate bench`: detector speed against a bare parse, and the size of the per-host state.

Speed. Pages are preloaded in memory. In each round the detector (`process_pages` over a
fresh MemoryStore per corpus, pages in stream order, the engine's caches of what it read on
pages emptied first: `pipeline.forget_caches`) and the floor (a bare lexbor parse
plus a Python walk of every text node, reading its text) run over the same pages, one
after the other, in alternating order (ABBA) so drift on a shared machine hits both
alike. One thread: the figures are pages per second of one core. Reported: the best and
the median round of each, their ratio, and the detector's per-page latency p50 / p99
(pooled over the rounds).

State. After a detector pass, per host: the serialised table (`HostTable.to_bytes()`)
against the bytes of the host's pages (UTF-8) and against the paper's comparison point,
a cache of 24-page batches (mean size of a 24-page batch of the host's pages, that is
24 times its mean page size). A separate pass with a real RocksStore gives the disk size.

Other extractors. Where they are installed (`pip install 'detemplate[bench]'`), resiliparse's
main-content extraction and trafilatura's `extract()` are timed on the same preloaded
pages, one thread, each in rounds alternating with the floor on the same pages, and
reported beside the detector with their ratio to the floor, and the detector's ratio over
theirs (`versus`: the speed of the two against each other, the machine's drift between the
passes cancelled by the floor each was timed beside). Trafilatura is slow (tens of
pages a second): it runs one round over every TRAFILATURA_EVERY-th page, as the output
says. One that is not installed is skipped with a note.

`--long-host N` feeds N pages of one host (the corpus pages of its largest host,
cycled, or a synthetic site from tests.factories with `--synthetic`) and prints the
table size every N/20 pages: the logistic expiry bounds it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from ..engine.errors import ConfigError
from ..engine.firstpages import process_pages
from ..engine.model import RawPage
from ..engine.page import status as walk_status
from ..engine.params import EngineParams, add_param_argument, with_overrides
from ..engine.pipeline import forget_caches, process_page
from ..state import MemoryStore
from ..state.rocks import RocksStore
from .evaluate import Corpus, load_corpus

BATCH_PAGES = 24  # the paper's comparison point: batch methods keep 24-page batches


def parse_and_walk(html: str) -> None:
    """The floor: a bare lexbor parse plus a walk of every text node, reading its text."""
    tree = LexborHTMLParser(html)
    root = tree.root
    if root is None:
        return
    for node in root.traverse(include_text=True):
        if node.tag == "-text":
            node.text_content  # noqa: B018  (reading the text is the work being measured)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in [0, 100])."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


# -- speed -----------------------------------------------------------------------------


@dataclass
class SpeedRow:
    """Per-round times of the detector and the floor on one set of pages."""

    name: str
    pages: int
    detector_s: list[float]
    floor_s: list[float]
    latencies_s: list[float]  # per-page detector times, all rounds pooled
    floor_latencies_s: list[float]

    def rate(self, seconds: float) -> float:
        return self.pages / seconds if seconds > 0 else float("inf")

    @property
    def detector_best(self) -> float:
        return self.rate(min(self.detector_s))

    @property
    def detector_median(self) -> float:
        return self.rate(statistics.median(self.detector_s))

    @property
    def floor_best(self) -> float:
        return self.rate(min(self.floor_s))

    @property
    def floor_median(self) -> float:
        return self.rate(statistics.median(self.floor_s))

    @property
    def ratio_best(self) -> float:
        return self.detector_best / self.floor_best

    @property
    def ratio_median(self) -> float:
        """Median over rounds of the per-round ratio (both ran back to back in a round)."""
        return statistics.median(f / d for d, f in zip(self.detector_s, self.floor_s, strict=True))

    def as_dict(self) -> dict[str, Any]:
        lat = sorted(self.latencies_s)
        flat = sorted(self.floor_latencies_s)
        return {
            "name": self.name,
            "pages": self.pages,
            "rounds": len(self.detector_s),
            "detector_pages_per_s_best": self.detector_best,
            "detector_pages_per_s_median": self.detector_median,
            "floor_pages_per_s_best": self.floor_best,
            "floor_pages_per_s_median": self.floor_median,
            "ratio_best": self.ratio_best,
            "ratio_median": self.ratio_median,
            "latency_ms_p50": 1000 * percentile(lat, 50),
            "latency_ms_p99": 1000 * percentile(lat, 99),
            "floor_latency_ms_p50": 1000 * percentile(flat, 50),
            "floor_latency_ms_p99": 1000 * percentile(flat, 99),
        }


def _detector_round(
    pages: Sequence[RawPage], params: EngineParams, latencies: list[float]
) -> tuple[float, MemoryStore]:
    store = MemoryStore()
    forget_caches(params)  # each round pays what a first pass over these pages pays
    clock = time.perf_counter
    start = t = clock()
    for _ in process_pages(pages, store, params):  # a held first page's time is in its second's
        now = clock()
        latencies.append(now - t)
        t = now
    return clock() - start, store


def _floor_round(pages: Sequence[RawPage], latencies: list[float]) -> float:
    clock = time.perf_counter
    start = clock()
    for page in pages:
        t = clock()
        parse_and_walk(page.html)
        latencies.append(clock() - t)
    return clock() - start


# -- other extractors, same pages -------------------------------------------------------

TRAFILATURA_EVERY = 8  # trafilatura runs on every 8th page, one round: ~35 pages/s


@dataclass(frozen=True, slots=True)
class Extractor:
    """Another main-content extractor timed beside the detector: a function of a page's HTML."""

    name: str
    extract: Callable[[str], object]
    every: int = 1  # run on every n-th page
    max_rounds: int = 0  # at most this many rounds (0: as many as the detector's)

    def note(self, pages: int, rounds: int) -> str:
        subset = f"every {self.every}th page, " if self.every > 1 else ""
        return f"{self.name}: {subset}{pages} pages, {rounds} round{'s' if rounds != 1 else ''}"


def other_extractors() -> tuple[list[Extractor], list[str]]:
    """Resiliparse's and trafilatura's main-content extraction where they are installed,
    and a note for each that is not."""
    found: list[Extractor] = []
    notes: list[str] = []
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree
    except ImportError:
        notes.append("resiliparse is not installed (pip install 'detemplate[bench]'): skipped")
    else:

        def resiliparse_main(html: str) -> object:
            return extract_plain_text(HTMLTree.parse(html), main_content=True)

        found.append(Extractor("resiliparse", resiliparse_main))
    try:
        import trafilatura
    except ImportError:
        notes.append("trafilatura is not installed (pip install 'detemplate[bench]'): skipped")
    else:
        found.append(Extractor("trafilatura", trafilatura.extract, every=TRAFILATURA_EVERY, max_rounds=1))
    return found, notes


def _extractor_round(htmls: Sequence[str], extract: Callable[[str], object], latencies: list[float]) -> float:
    clock = time.perf_counter
    start = clock()
    for html in htmls:
        t = clock()
        with contextlib.suppress(Exception):  # a page an extractor fails on costs what it cost: timed, not judged
            extract(html)
        latencies.append(clock() - t)
    return clock() - start


def measure_extractor(corpora: Sequence[Corpus], extractor: Extractor, repeat: int) -> tuple[SpeedRow, str]:
    """Time one extractor and the floor on the same pages (every `extractor.every`-th page
    of all corpora), in alternating rounds; a row like the detector's, and what ran."""
    pages = [page for corpus in corpora for page in corpus.pages][:: extractor.every]
    htmls = [page.html for page in pages]
    rounds = min(repeat, extractor.max_rounds) if extractor.max_rounds else repeat
    row = SpeedRow(extractor.name, len(pages), [], [], [], [])
    # Its package's warnings about pages (trafilatura logs one for many) would drown the output.
    logger = logging.getLogger(extractor.name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        for r in range(rounds):
            if r % 2 == 0:
                row.detector_s.append(_extractor_round(htmls, extractor.extract, row.latencies_s))
                row.floor_s.append(_floor_round(pages, row.floor_latencies_s))
            else:
                row.floor_s.append(_floor_round(pages, row.floor_latencies_s))
                row.detector_s.append(_extractor_round(htmls, extractor.extract, row.latencies_s))
    finally:
        logger.setLevel(level)
    return row, extractor.note(len(pages), rounds)


def versus(detector: SpeedRow, other: SpeedRow) -> tuple[float, float]:
    """The detector's speed against another extractor's, best and median: the ratio of their
    ratios to the floor. Each was timed in rounds alternating with the floor on its pages, so
    the machine's speed, which moves between the two passes on a shared machine, cancels out
    (on a subset of the pages for an extractor run on every n-th page: an estimate). Above 1:
    the detector is the faster."""
    return detector.ratio_best / other.ratio_best, detector.ratio_median / other.ratio_median


def measure_speed(
    corpora: Sequence[Corpus], params: EngineParams, repeat: int
) -> tuple[list[SpeedRow], dict[str, MemoryStore]]:
    """Time detector and floor on every corpus, `repeat` rounds in ABBA order.

    Returns a row per corpus plus an "all" row, and each corpus's store after its last
    detector round.
    """
    rows = [SpeedRow(c.name, len(c.pages), [], [], [], []) for c in corpora]
    stores: dict[str, MemoryStore] = {}
    for r in range(repeat):
        for corpus, row in zip(corpora, rows, strict=True):
            if r % 2 == 0:
                seconds, stores[corpus.name] = _detector_round(corpus.pages, params, row.latencies_s)
                row.detector_s.append(seconds)
                row.floor_s.append(_floor_round(corpus.pages, row.floor_latencies_s))
            else:
                row.floor_s.append(_floor_round(corpus.pages, row.floor_latencies_s))
                seconds, stores[corpus.name] = _detector_round(corpus.pages, params, row.latencies_s)
                row.detector_s.append(seconds)
    if len(rows) > 1:
        total = SpeedRow(
            "all",
            sum(r.pages for r in rows),
            [sum(t) for t in zip(*(r.detector_s for r in rows), strict=True)],
            [sum(t) for t in zip(*(r.floor_s for r in rows), strict=True)],
            [x for r in rows for x in r.latencies_s],
            [x for r in rows for x in r.floor_latencies_s],
        )
        rows.append(total)
    return rows, stores


def format_speed(rows: Sequence[SpeedRow], first: str = "corpus", timed: str = "detector p/s") -> str:
    header = (
        f"{first:<28} {'pages':>5} {timed:>13} {'floor p/s':>11} {'ratio':>11} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'floor p50':>9}"
    )
    sub = f"{'':<28} {'':>5} {'best / med':>13} {'best / med':>11} {'best / med':>11}"
    lines = [header, sub, "-" * len(header)]
    for row in rows:
        d = row.as_dict()
        lines.append(
            f"{row.name:<28} {row.pages:>5} "
            f"{d['detector_pages_per_s_best']:>6.0f} /{d['detector_pages_per_s_median']:>5.0f} "
            f"{d['floor_pages_per_s_best']:>5.0f} /{d['floor_pages_per_s_median']:>5.0f} "
            f"{d['ratio_best']:>5.2f} /{d['ratio_median']:>5.2f} "
            f"{d['latency_ms_p50']:>7.2f} {d['latency_ms_p99']:>7.2f} {d['floor_latency_ms_p50']:>9.2f}"
        )
    return "\n".join(lines)


# -- state -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostState:
    """One host's table after a run, against what a page cache would hold."""

    corpus: str
    host: str
    pages: int
    segments: int
    table_bytes: int  # len(HostTable.to_bytes())
    page_bytes: int  # UTF-8 bytes of all the host's pages

    @property
    def batch_bytes(self) -> float:
        """Mean size of a 24-page batch of this host's pages."""
        return BATCH_PAGES * self.page_bytes / self.pages if self.pages else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "host": self.host,
            "pages": self.pages,
            "segments": self.segments,
            "table_bytes": self.table_bytes,
            "page_bytes": self.page_bytes,
            "batch24_bytes": self.batch_bytes,
            "table_to_pages": self.table_bytes / self.page_bytes if self.page_bytes else None,
            "table_to_batch24": self.table_bytes / self.batch_bytes if self.batch_bytes else None,
        }


def host_states(corpus: Corpus, store: MemoryStore) -> list[HostState]:
    page_bytes: dict[str, int] = defaultdict(int)
    page_count: dict[str, int] = defaultdict(int)
    for page in corpus.pages:
        page_bytes[page.host] += len(page.html.encode("utf-8"))
        page_count[page.host] += 1
    states = []
    for host in sorted(page_count, key=lambda h: (-page_count[h], h)):
        table = store.get(host)
        size = len(table.to_bytes()) if table is not None else 0
        segments = len(table) - table.tagged_keys() if table is not None else 0
        states.append(HostState(corpus.name, host, page_count[host], segments, size, page_bytes[host]))
    return states


def rocks_pass(corpus: Corpus, params: EngineParams, folder: Path) -> tuple[float, int, int]:
    """Run the detector once with a RocksStore in `folder`; (seconds, data file bytes, all bytes)."""
    store = RocksStore(folder, params.table)
    clock = time.perf_counter
    start = clock()
    for _ in process_pages(corpus.pages, store, params):
        pass
    store.close()
    seconds = clock() - start
    files = [f for f in folder.rglob("*") if f.is_file()]
    data = sum(f.stat().st_size for f in files if f.suffix in (".sst", ".log") and f.name != "LOG")
    return seconds, data, sum(f.stat().st_size for f in files)


def _kb(n: float) -> str:
    return f"{n / 1024:,.1f}"


def format_state(states: Sequence[HostState], max_rows: int = 12) -> str:
    header = (
        f"{'corpus':<26} {'host':<30} {'pages':>5} {'segments':>8} {'table KB':>9} "
        f"{'pages KB':>9} {'table/pages':>11} {'24-batch KB':>11} {'table/batch':>11}"
    )
    lines = [header, "-" * len(header)]
    by_corpus: dict[str, list[HostState]] = defaultdict(list)
    for s in states:
        by_corpus[s.corpus].append(s)
    for corpus, rows in by_corpus.items():
        shown = rows if len(rows) <= max_rows else rows[: max_rows - 1]
        for s in shown:
            d = s.as_dict()
            lines.append(
                f"{corpus:<26} {s.host[:30]:<30} {s.pages:>5} {s.segments:>8} {_kb(s.table_bytes):>9} "
                f"{_kb(s.page_bytes):>9} {d['table_to_pages']:>11.1%} {_kb(s.batch_bytes):>11} "
                f"{d['table_to_batch24']:>11.1%}"
            )
        rest = rows[len(shown) :]
        if rest:
            t_bytes = sum(s.table_bytes for s in rest)
            p_bytes = sum(s.page_bytes for s in rest)
            b_bytes = sum(s.batch_bytes for s in rest)
            lines.append(
                f"{corpus:<26} {f'({len(rest)} more hosts, summed)':<30} {sum(s.pages for s in rest):>5} "
                f"{sum(s.segments for s in rest):>8} {_kb(t_bytes):>9} {_kb(p_bytes):>9} "
                f"{t_bytes / p_bytes:>11.1%} {_kb(b_bytes):>11} {t_bytes / b_bytes:>11.1%}"
            )
    return "\n".join(lines)


# -- long host -------------------------------------------------------------------------


def long_host_pages(corpora: Sequence[Corpus], host: str | None, synthetic: bool, n: int) -> Iterator[RawPage]:
    """N pages of one host: a synthetic site, or the corpus pages of one host cycled."""
    if synthetic:
        from .samples import make_site

        name = host or "long.example"
        chunk = 500
        for start in range(0, n, chunk):
            # Each chunk is a fresh seed, so content never repeats; the template does.
            for sp in make_site(name, min(chunk, n - start), seed=start // chunk + 1, layout="news"):
                yield RawPage(f"{sp.page.url}?c={start // chunk}", sp.page.html, name, sp.page.source)
        return
    pool: dict[str, list[RawPage]] = defaultdict(list)
    for corpus in corpora:
        for page in corpus.pages:
            pool[page.host].append(page)
    if not pool:
        raise ConfigError("--long-host needs a corpus folder or --synthetic")
    if host is None:
        host = max(pool, key=lambda h: len(pool[h]))
    elif host not in pool:
        raise ConfigError(f"host {host!r} is not in the corpora")
    pages = pool[host]
    for i in range(n):
        yield pages[i % len(pages)]


@dataclass(frozen=True, slots=True)
class LongHostPoint:
    pages: int
    segments: int
    template_segments: int
    table_bytes: int
    batch_bytes: float  # mean 24-page batch of the pages fed so far


@dataclass
class LongHostRun:
    """Table size samples of a long run, plus the max and mean over every page."""

    points: list[LongHostPoint]
    max_bytes: int = 0
    max_at: int = 0
    mean_bytes: float = 0.0


def long_host_run(pages: Iterator[RawPage], params: EngineParams, n: int) -> LongHostRun:
    """Feed the pages to one store; sample the host's table every n/20 pages."""
    store = MemoryStore()
    step = max(1, n // 20)
    run = LongHostRun([])
    fed_bytes = 0
    total_bytes = 0
    fed = 0
    for fed, page in enumerate(pages, 1):
        process_page(page, store, params)
        fed_bytes += len(page.html.encode("utf-8"))
        table = store.get(page.host)
        assert table is not None
        size = table.nbytes()
        total_bytes += size
        if size > run.max_bytes:
            run.max_bytes, run.max_at = size, fed
        if fed % step == 0 or fed == n:
            run.points.append(LongHostPoint(fed, len(table), table.template_count, size, BATCH_PAGES * fed_bytes / fed))
    run.mean_bytes = total_bytes / fed if fed else 0.0
    return run


def format_long_host(run: LongHostRun, host: str, source: str) -> str:
    points = run.points
    header = f"{'pages':>7} {'segments':>9} {'template':>9} {'table KB':>9} {'24-batch KB':>11} {'table/batch':>11}"
    lines = [f"long host {host} ({source})", header, "-" * len(header)]
    for p in points:
        lines.append(
            f"{p.pages:>7} {p.segments:>9} {p.template_segments:>9} {_kb(p.table_bytes):>9} "
            f"{_kb(p.batch_bytes):>11} {p.table_bytes / p.batch_bytes:>11.1%}"
        )
    if len(points) >= 4:
        half = points[len(points) // 2 :]
        lo = min(p.table_bytes for p in half)
        hi = max(p.table_bytes for p in half)
        lines.append(f"second half of the run: table between {_kb(lo)} and {_kb(hi)} KB at the samples")
    lines.append(
        f"over every page: max {_kb(run.max_bytes)} KB (after page {run.max_at}), mean {_kb(run.mean_bytes)} KB"
    )
    return "\n".join(lines)


# -- the command -----------------------------------------------------------------------


def _handle(args: argparse.Namespace) -> int:
    try:
        params = with_overrides(EngineParams(), args.param or [])
        corpora = [load_corpus(p, gold=False) for p in args.corpus_dirs]
        if args.repeat < 1:
            raise ConfigError("--repeat must be at least 1")
        if args.long_host is not None:
            return _long_host(args, corpora, params)
        if not corpora:
            raise ConfigError("give at least one corpus folder (or --long-host N --synthetic)")
    except ConfigError as exc:
        print(f"detemplate bench: {exc}", file=sys.stderr)
        return 2

    pinned = ""
    if args.cpu is not None:
        try:
            os.sched_setaffinity(0, {args.cpu})
        except (AttributeError, OSError) as exc:
            print(f"detemplate bench: cannot pin to CPU {args.cpu}: {exc}", file=sys.stderr)
            return 2
        pinned = f", pinned to CPU {args.cpu}"
    pages = sum(len(c.pages) for c in corpora)
    print(
        f"bench: {len(corpora)} corpora, {pages} pages preloaded, {args.repeat} rounds (ABBA), one thread{pinned}",
        file=sys.stderr,
    )
    rows, stores = measure_speed(corpora, params, args.repeat)
    others: list[tuple[SpeedRow, str]] = []
    other_notes: list[str] = []
    if not args.no_others:
        extractors, other_notes = other_extractors()
        others = [measure_extractor(corpora, e, args.repeat) for e in extractors]
    against = [versus(rows[-1], r) for r, _ in others]  # rows[-1]: every corpus's pages ("all" for several)
    states = [s for c in corpora for s in host_states(c, stores[c.name])]
    rocks = []
    with tempfile.TemporaryDirectory(prefix="detemplate-bench-") as tmp:
        for c in corpora:
            seconds, data, total = rocks_pass(c, params, Path(tmp) / c.name)
            table_bytes = sum(s.table_bytes for s in states if s.corpus == c.name)
            rocks.append((c.name, len(c.pages), seconds, table_bytes, data, total))

    if args.json:
        doc = {
            "page_walk": walk_status(),
            "speed": [r.as_dict() for r in rows],
            "others": [
                {**r.as_dict(), "ran": ran, "detector_vs_best": vs[0], "detector_vs_median": vs[1]}
                for (r, ran), vs in zip(others, against, strict=True)
            ],
            "others_skipped": other_notes,
            "state": [s.as_dict() for s in states],
            "rocks": [
                {
                    "corpus": name,
                    "pages": n,
                    "pages_per_s": n / sec,
                    "tables_bytes": tb,
                    "disk_data_bytes": data,
                    "disk_all_bytes": total,
                }
                for name, n, sec, tb, data, total in rocks
            ],
        }
        print(json.dumps(doc, indent=1))
        return 0

    print(f"Speed, one thread, pages preloaded (shared machine: figures are noisy); page walk: {walk_status()}")
    print("detector = process_pages over a MemoryStore in stream order; floor = lexbor parse + walk of every text node")
    print(format_speed(rows))
    if others or other_notes:
        print()
        print("Other extractors' main content, same pages, one thread, each against the floor on its pages")
        if others:
            print(format_speed([r for r, _ in others], "extractor", "p/s"))
        for line in [ran for _, ran in others] + other_notes:
            print(f"  {line}")
        for (r, _), (best, median) in zip(others, against, strict=True):
            print(f"  the detector against {r.name} (their ratios to the floor, best / median): "
                  f"{best:.2f}x / {median:.2f}x")
    print()
    print(f"State per host after the run (serialised table vs the host's pages and a {BATCH_PAGES}-page batch)")
    print(format_state(states))
    print()
    print("RocksStore: one more detector pass per corpus with tables in RocksDB, then closed")
    header = f"{'corpus':<28} {'pages':>5} {'pages/s':>8} {'tables KB':>10} {'disk data KB':>12} {'disk all KB':>11}"
    print(header)
    print("-" * len(header))
    for name, n, sec, tb, data, total in rocks:
        print(f"{name:<28} {n:>5} {n / sec:>8.0f} {_kb(tb):>10} {_kb(data):>12} {_kb(total):>11}")
    print("(disk data = SST files + write-ahead log; disk all adds RocksDB's LOG, MANIFEST and OPTIONS files)")
    return 0


def _long_host(args: argparse.Namespace, corpora: Sequence[Corpus], params: EngineParams) -> int:
    n = args.long_host
    if n < 1:
        raise ConfigError("--long-host must be at least 1")
    if not args.synthetic and not corpora:
        raise ConfigError("--long-host needs a corpus folder or --synthetic")
    pages = long_host_pages(corpora, args.host, args.synthetic, n)
    first = next(pages)
    host = first.host
    if args.synthetic:
        source = f"synthetic news site from detemplate.tools.samples, {n} pages, content never repeats"
    else:
        distinct = len({p.url for c in corpora for p in c.pages if p.host == host})
        source = f"its {distinct} corpus pages cycled to {n} pages"

    def chained() -> Iterator[RawPage]:
        yield first
        yield from pages

    t = params.table
    print(
        f"table params: template_df={t.template_df} tb={t.tb} n={t.n}: a segment lives "
        f"{t.lifetime(1)} pages unseen at df 1, up to {t.lifetime(64)} at high df",
        file=sys.stderr,
    )
    run = long_host_run(chained(), params, n)
    if args.json:
        doc = {
            "host": host,
            "source": source,
            "max_bytes": run.max_bytes,
            "max_at": run.max_at,
            "mean_bytes": run.mean_bytes,
            "points": [dataclasses.asdict(p) for p in run.points],
        }
        print(json.dumps(doc, indent=1))
    else:
        print(format_long_host(run, host, source))
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="detector speed against a bare lexbor parse, and per-host state size",
        description=(
            "Time the detector (process_pages over an in-memory store, stream order) and a bare lexbor "
            "parse plus text-node walk on the same preloaded pages, one thread, interleaved rounds; "
            "report pages/s (best and median), their ratio, per-page latency p50/p99, the serialised "
            "table size per host against the host's pages and a 24-page batch cache, and the RocksDB "
            "disk size. --long-host N shows the table size over a long run of one host."
        ),
    )
    parser.add_argument("corpus_dirs", nargs="*", metavar="CORPUS_DIR",
                        help="a folder with pages.jsonl.gz (a corpus, or a crawl without gold)")
    parser.add_argument("--repeat", type=int, default=5, metavar="N", help="rounds of each (default 5)")
    parser.add_argument("--long-host", type=int, metavar="N", help="feed N pages of one host; print its table size")
    parser.add_argument("--host", help="the host for --long-host (default: the corpora's largest)")
    parser.add_argument("--synthetic", action="store_true", help="--long-host on a generated site (tools.samples)")
    parser.add_argument("--cpu", type=int, metavar="N", help="pin the process to CPU N (Linux) before timing")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--no-others", action="store_true", help="do not time resiliparse and trafilatura (timed where installed)"
    )
    add_param_argument(
        parser,
        "override an engine parameter, e.g. table.tb=50 (repeatable)",
    )
    parser.set_defaults(func=_handle)
