"""`detemplate run --jobs N`: the hosts of a run split over N processes, one output.

Every page is decided with its own host's table only, so hosts are independent. The parent
reads the input once with the run's reader, numbers every item (its `seq`, the position in
the input) and hands each of N jobs, in batches, the items whose
host hashes to it (xxh3_64 of the host's UTF-8, modulo N; a dead item of the reader, which
has no reliable host, goes to job 0). A JSONL line that starts with its "url" and "host"
is handed over undecoded (io/sources.py `Undecoded`), routed by the host those fields
name, and decoded by its job: the parent, a process beside the N, only inflates, splits
and routes such input. A batch goes through the job's own pipe (`_Inbox`: at most
_QUEUE_BATCHES wait), its lines out of band of the batch's pickle: written from their own
bytes and decoded by the job where they landed in its buffer (`_frame`, `_get`). A job
decides its items in input order with the same `run_pages` one job runs (handed in:
`JobSpec.decide`). `JobSpec.feed=False` has every job read the whole input itself instead,
routing its lines as the parent does and decoding only its own (as fast on 2 cores, but
the input inflated once a job: docs/parallel.md measures both).

- Tables: a host's table comes from the run's state directory, opened READ-ONLY by every
  worker (RocksDB allows readers beside the parent's handle, which writes nothing until
  the end), the first time the worker sees the host; from then on it lives in the
  worker's own store (a RocksStore in a temporary folder beside the state, or a
  MemoryStore without --state). When every worker has finished, the parent `put`s every
  table a worker holds into the run's store and flushes it: the state directory is one
  RocksDB that a later run, with any N, continues. A failed run copies nothing.
- Processes: `run` starts the jobs first thing (`start_jobs`), before it opens its state
  or output: on Linux they are forked from it then (milliseconds; the engine is imported),
  unless a RocksDB or another Python thread runs in the process already (`_can_fork`);
  otherwise, and for `run_jobs` called without them, from multiprocessing's fork server,
  which imported this module and opened nothing (0.3 s later). Either way the parent's open
  state never crosses into a job; a job opens the run's state only after the parent's first
  message, sent once the parent has opened it. A job takes the parent's garbage-collector
  thresholds (the command line raises the first one) and BLAS threads.
- Output: a worker gives the format's Writer a sink that files every write as a record
  (seq, index, bytes) in the worker's temporary file, in its own input order; events
  likewise. A host's first page goes out with its second (under the second's seq) or, let
  out by `pagelevel.hold_first`, under the seq it goes after, at an index past that seq's
  own records (`_RecordSink.place`). The parent's own Writer wrote the file's header (WET's
  warcinfo record), and the parent merges the N files by (seq, index) into the one output:
  the bytes of `--jobs 1`. It merges while the jobs run, each time it looks at them, every
  record the jobs have made final (`_Merge`, `_Published`), and the rest at the end; the disk
  blocks of what it has merged go back to the file system (`_punch`), so the jobs' files hold
  what is not merged yet, not the run's output once more. Parquet's
  jobs write each row as a record; the parent's ParquetWriter makes the row groups from them
  in input order, as one job does.
- A worker that fails (an exception, a kill) fails the run (JobFailedError: exit 1); the
  others are stopped, the output holds what was merged before, the state is left as it was.
  The run stopped (Ctrl-C, SIGTERM) stops its jobs likewise; killed, it takes them with it
  (`_end_with_parent`), and the next run removes the folder they left (`remove_abandoned`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import heapq
import io
import logging
import mmap
import multiprocessing
import os
import pickle
import queue as queue_module
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from xxhash import xxh3_64_intdigest

from . import blas, interrupts
from .engine.errors import ConfigError, DetemplateError, StateError
from .engine.model import DeadPage, RawPage, TemplateEvent
from .engine.params import EngineParams
from .engine.table import HostTable
from .io.formats import OutputOptions, ParquetWriter, Writer, make_writer
from .io.sources import Undecoded, decode_record, html_files, iter_inputs
from .state.base import SegmentStore
from .state.expiry import ExpiryPolicy, IndexEntry
from .state.memory import MemoryStore
from .state.rocks import ReadOnlyTables, RocksStore

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

logger = logging.getLogger(__name__)

STDIN = "-"
# A record of a worker's temporary file: seq, index of the write within that seq, length;
# then the bytes. Little-endian, fixed size, so the merge reads without parsing.
_RECORD = struct.Struct("<QII")
_AFTER = 1 << 31  # the index of a record placed after a position's own (see _RecordSink.place)
_SWEEP = 1 << 30  # the index of a sweep's events: after a position's own, before those placed after it
_POLL_SECONDS = 0.2  # how often the parent looks at the workers' counters and exits
_MERGE_POLL_SECONDS = 0.02  # ...once a job has ended (`Jobs.wait`)
_STOP_SECONDS = 10.0  # how long a stopped worker gets before it is killed
_BATCH_ITEMS = 32  # items handed to a job at once (one pickle, one pipe write)...
_BATCH_CHARS = 1 << 20  # ...or fewer, when their HTML reaches this many characters
# A job's first batches are smaller: its first holds _FIRST_BATCH_ITEMS items (or
# _BATCH_CHARS >> _FIRST_BATCH_SHIFT characters), each next one twice its last, up to the
# sizes above, so that a job starts deciding as soon as the parent has read a few of its
# pages rather than a whole batch of them (docs/parallel.md, "The merge mapped, a job's first pages sooner").
_FIRST_BATCH_ITEMS = 2
_FIRST_BATCH_SHIFT = 4
# Batches waiting for a job at most: how far the parent reads ahead of a job (about 64 MB of
# HTML), so that a long run of one job's hosts in the input does not leave the others idle.
_QUEUE_BATCHES = 64
# A job flushes its files and tells the parent how far they are final (`_Published`) every
# this many bytes of records, about its files' buffers' size: the parent merges up to there.
_PUBLISH_BYTES = 1 << 20


Batch = list[tuple[int, RawPage | DeadPage | Undecoded]]  # items of one job with their place in the input
# What the parent sends a job: a batch, or once the input has ended, the records it held (an int).
Message = Batch | int


class JobFailedError(DetemplateError):
    """A worker process of `run --jobs` failed or was killed; the run wrote nothing."""


def default_jobs() -> int:
    """The cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


_LINUX = sys.platform.startswith("linux")  # where jobs may be forked (_can_fork)

# Without --jobs, inputs smaller than this (gzip counted as _INFLATE times its size) run in
# one job: starting the jobs and handing them their pages costs more than they save there.
# Measured on ../shared/crawl's first pages, 2 cores, medians of 3 (docs/parallel.md): forked
# jobs (Linux), 100 pages (5.3 MB) 0.59 s in one job and in two, 200 (11 MB) 0.91 against
# 0.75; from the fork server (its interpreter and its import of the engine, 0.3-0.5 s), 200
# pages 1.42 s against 1.76, 400 (19 MB) 2.11 against 2.26, 800 (37 MB) 3.56 against 3.04.
SMALL_INPUT_BYTES = (8 if _LINUX else 16) << 20
_INFLATE = 5  # the crawl's pages.jsonl.gz: 40 MB of gzip, 212 MB of JSONL


def input_bytes(inputs: Sequence[str], limit: int) -> int:
    """The inputs' size, gzip files at _INFLATE times theirs, counted up to `limit` (a
    folder's HTML files, the ones read, are summed only until it is reached); what cannot
    be read counts 0 (the reader says why)."""
    total = 0

    def add(path: str) -> None:
        nonlocal total
        try:
            size = os.path.getsize(path)
        except OSError:
            return
        total += size * _INFLATE if path.endswith(".gz") else size

    for name in inputs:
        if os.path.isdir(name):
            for file in html_files(Path(name)):
                add(str(file))
                if total >= limit:
                    return total
        else:
            add(name)
        if total >= limit:
            break
    return total


def resolve_jobs(asked: int | None, inputs: Sequence[str]) -> int:
    """The number of processes for a run: `asked`, else the cores (one where only one can
    work, or where the input is small: SMALL_INPUT_BYTES)."""
    one_reason = None
    if STDIN in inputs:
        one_reason = "standard input (-) can be read only once, not by every job"
    if asked is None:
        cores = default_jobs()
        if one_reason or cores == 1 or input_bytes(inputs, SMALL_INPUT_BYTES) < SMALL_INPUT_BYTES:
            return 1
        return cores
    if asked < 1:
        raise ConfigError(f"--jobs must be at least 1, not {asked}")
    if asked > 1 and one_reason:
        raise ConfigError(f"--jobs {asked}: {one_reason}; use --jobs 1")
    return asked


def job_of(host: str, jobs: int) -> int:
    """The worker that decides HOST's pages: stable across runs and machines."""
    return xxh3_64_intdigest(host.encode("utf-8", "surrogatepass")) % jobs


# offline.run_pages, handed in: (pages, store, params, out, events_out, with_html, summary,
# writer, placement)
# writer) -> its RunSummary. This module sits below the offline shell and cannot import it.
Decide = Callable[..., Any]


@dataclass(frozen=True)
class JobSpec:
    """What every worker of a run is given (pickled to spawned processes).

    decide: the function that decides a worker's pages (offline.run_pages), passed in
        because this module sits below the offline shell.
    state: the run's state directory, read only by the workers; None: no state.
    """

    inputs: tuple[str, ...]
    jobs: int
    params: EngineParams
    fmt: str
    options: OutputOptions
    decide: Decide
    with_html: bool = False
    events: bool = False
    state: str | None = None
    policy: ExpiryPolicy | None = None  # the run's expiry policy and table bound (a job's: `job_policy`)
    feed: bool = True  # the parent reads the input once and hands each job its pages; False: every job reads it
    publish_bytes: int = _PUBLISH_BYTES  # how often a job tells the parent how far its files are final


class _RecordSink(io.BytesIO):
    """A file object that files each write as a (seq, index, bytes) record; writes before
    the first `at` (a Writer's header) are dropped: the parent writes the header."""

    def __init__(self, fh: IO[bytes]) -> None:
        super().__init__()
        self.fh = fh
        self.seq = self.current = -1
        self.index = 0
        self.sweeping: tuple[int, int] | None = None  # (seq, index) to go back to after a sweep's events
        self.filed = 0  # bytes written to `fh`: the records, their heads included

    def at(self, seq: int) -> None:
        self.seq = self.current = seq
        self.index = 0

    def place(self, at: int | None) -> None:
        """Records from now on go just after position `at`'s, before the next position's
        (a held first page published by its bound: offline.Placement); None: back to the
        item's own position."""
        if at is None:
            self.at(self.current)
        else:
            self.seq = at
            self.index = _AFTER

    def sweep_at(self, at: int | None) -> None:
        """A sweep's records from now on, after position `at`'s own (offline.Placement.sweep_at):
        each at the same index, so that the merge orders the jobs' by their bytes, as one job
        writes them; None: back to where records went before."""
        if at is not None:
            self.sweeping = (self.seq, self.index)
            self.seq, self.index = at, _SWEEP
        elif self.sweeping is not None:
            self.seq, self.index = self.sweeping
            self.sweeping = None

    def write(self, data: ReadableBuffer, /) -> int:
        chunk = bytes(data)
        if self.seq >= 0 and chunk:
            self.fh.write(_RECORD.pack(self.seq, self.index, len(chunk)))
            self.fh.write(chunk)
            self.filed += _RECORD.size + len(chunk)
            if self.sweeping is None:
                self.index += 1
        return len(chunk)


class _Placement:
    """offline.Placement for a job: its output and events sinks."""

    def __init__(self, out: _RecordSink, events: _RecordSink) -> None:
        self.out = out
        self.events = events
        self.total: int | None = None  # the input's records, once the parent has said (or read)

    def position(self) -> int:
        return self.out.current

    def place(self, at: int | None) -> None:
        self.out.place(at)
        self.events.place(at)

    def sweep_at(self, at: int | None) -> None:
        self.out.sweep_at(at)
        self.events.sweep_at(at)

    def records(self) -> int:
        if self.total is None:
            raise RuntimeError("the input's end asked for before it came")
        return self.total


class _Chunk:
    """A record's bytes in its job's mapped file, compared by those bytes: the merge orders
    the records of one position (a sweep's events, from any job) by them, as one job writes
    them (`_RecordSink.sweep_at`). Only records at the same position are ever compared."""

    __slots__ = ("end", "start", "view")

    def __init__(self, view: memoryview, start: int, end: int) -> None:
        self.view, self.start, self.end = view, start, end

    def data(self) -> memoryview:
        return self.view[self.start : self.end]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Chunk) and self.data() == other.data()

    def __lt__(self, other: _Chunk) -> bool:
        return bytes(self.data()) < bytes(other.data())

    __hash__ = None  # type: ignore[assignment]  # compared, never hashed


def _records(view: memoryview, at: int, below: int) -> tuple[list[tuple[int, int, _Chunk]], int]:
    """The records of a job's file (`view`: its bytes from some offset on) from `at` on, in the
    order written (seq order), up to the first at a position of `below` or after; with the
    offset where they end."""
    unpack, head = _RECORD.unpack_from, _RECORD.size
    size = len(view)
    out = []
    while at + head <= size:
        seq, index, length = unpack(view, at)
        if seq >= below or at + head + length > size:
            break
        out.append((seq, index, _Chunk(view, at + head, at + head + length)))
        at += head + length
    return out, at


_FALLOC_FL_KEEP_SIZE = 0x01  # Linux's fallocate(2) modes
_FALLOC_FL_PUNCH_HOLE = 0x02


def _punch(fd: int, offset: int, length: int) -> bool:
    """Free the disk blocks of bytes [offset, offset + length) of the file `fd`, its size kept
    (Linux's fallocate with FALLOC_FL_PUNCH_HOLE: the bytes then read as zeros); False where
    the system or the file system cannot."""
    fallocate = _fallocate()
    if fallocate is None:
        return False
    done: int = fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)
    return done == 0


def _libc(name: str) -> Any:
    """The C library's function `name`, or None where there is none."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


@functools.cache
def _fallocate() -> Any:
    """The C library's fallocate, or None where there is none."""
    fallocate = _libc("fallocate")
    if fallocate is not None:
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        fallocate.restype = ctypes.c_int
    return fallocate


class _Merge:
    """The jobs' records into the run's output in input order (`out`, or as Parquet rows into
    `writer`), written as they become final rather than all once the last job has ended.

    A job publishes, every `JobSpec.publish_bytes` of records (`_Published`), how many bytes of its files
    it has flushed and the position below which it will write nothing more: the position of
    the item it has just decided (a held first page it lets out later goes after a position no
    earlier, and so do its sweeps' events); a job that has ended, all of its files and no bound.
    `advance` writes every record at a position below the least of the running jobs' bounds:
    each job's are then all in its files, so the order is the one a merge of the whole files
    gives (by position, then by write; a sweep's events at one position by their bytes), and
    nothing at a position it wrote comes after. The parent advances it whenever it looks at
    the jobs (`Jobs.check`), and once more at the end; the end's merge is then what the jobs
    wrote since the last look, where it was the whole output (docs/parallel.md, "The merge
    while the jobs run").

    Each file's new part is mapped, not read: a record goes from the file's pages straight into
    `out.write` (one copy)."""

    def __init__(self, paths: Sequence[Path], out: IO[bytes], writer: Writer | None = None) -> None:
        self.paths = list(paths)
        self.out = out
        self.parquet = writer if isinstance(writer, ParquetWriter) else None
        self.taken = [0] * len(self.paths)  # each file's bytes merged
        self.freed = [0] * len(self.paths)  # each file's bytes whose disk blocks were handed back
        self.punch = _LINUX  # whether to hand them back (False once the file system refused)
        self.records = 0  # written to `out` so far

    def advance(self, below: int, sizes: Sequence[int]) -> None:
        """Write every record at a position below `below` that the first sizes[i] bytes of
        file i hold (whole records: what its job flushed) and not written yet; then give the
        file system back the disk blocks of what is written (`_punch`)."""
        maps: list[mmap.mmap] = []
        views: list[memoryview] = []
        runs = []
        try:
            for i, path in enumerate(self.paths):
                start, size = self.taken[i], sizes[i]
                if size <= start:
                    continue
                base = start - start % mmap.ALLOCATIONGRANULARITY  # (a map starts at a page)
                with open(path, "rb") as fh:
                    maps.append(mmap.mmap(fh.fileno(), size - base, access=mmap.ACCESS_READ, offset=base))
                if hasattr(mmap, "MADV_SEQUENTIAL"):  # read once, front to back: read ahead, drop behind
                    maps[-1].madvise(mmap.MADV_SEQUENTIAL)
                views.append(memoryview(maps[-1]))
                run, end = _records(views[-1], start - base, below)
                self.taken[i] = base + end
                runs.append(run)
                self.records += len(run)
            parquet = self.parquet
            for _seq, _index, chunk in heapq.merge(*runs):
                if parquet is not None:
                    row, size = pickle.loads(chunk.data())  # our own job's bytes, written by _ParquetRows
                    parquet._add(row, size)
                else:
                    self.out.write(chunk.data())
        finally:
            runs.clear()
            for view in views:
                view.release()
            for mapped in maps:
                # A record's bytes that an error's traceback still holds (a writer's frame) keep
                # their map open: it closes when they go, and the error is the one raised.
                with contextlib.suppress(BufferError):
                    mapped.close()
        self._free()

    def _free(self) -> None:
        """The merged part of each file, whole pages of it (those before the page `advance`
        maps next), handed back to the file system, so that the jobs' files hold what is not
        merged yet rather than the run's whole output once more (where the file system
        cannot, they keep it as before)."""
        if not self.punch:
            return
        for i, path in enumerate(self.paths):
            upto = self.taken[i] - self.taken[i] % mmap.ALLOCATIONGRANULARITY
            if upto > self.freed[i] and self.punch:
                with open(path, "r+b") as fh:
                    self.punch = _punch(fh.fileno(), self.freed[i], upto - self.freed[i])
                self.freed[i] = upto


_FINAL = (1 << 63) - 1  # the bound of a job that has ended: past every position (`_END` included)


class _ParquetRows(ParquetWriter):
    """A job's Parquet output: each row as a record of its own (pickled), which the parent's
    ParquetWriter gathers into row groups in input order, as one job does."""

    def __init__(self, out: IO[bytes], options: OutputOptions) -> None:
        Writer.__init__(self, out, options)  # no Arrow writer: the parent's writes the file

    def _add(self, row: dict[str, Any], size: int) -> None:
        self.out.write(pickle.dumps((row, size), pickle.HIGHEST_PROTOCOL))

    def close(self) -> None:
        pass


def _job_writer(fmt: str, out: IO[bytes], options: OutputOptions) -> Writer:
    return _ParquetRows(out, options) if fmt == "parquet" else make_writer(fmt, out, options)


class _LayeredStore:
    """A worker's store: its own tables, each loaded from the run's state when first asked for.

    Whole-host expiry: the page clock is the run's (the state's clock before the run plus the
    input's records, `advance`), and a sweep weighs the job's own hosts with the run's state's
    hosts of this job that it has not loaded; one of those it drops is marked in its own store
    (RocksStore.drop), not loaded again, and deleted from the run's state by the parent (as
    is one it loaded and then dropped: the run's state still holds it)."""

    def __init__(self, own: SegmentStore, base: ReadOnlyTables | None, index: int = 0, jobs: int = 1) -> None:
        self.own = own
        self.base = base
        self.index = index
        self.jobs = jobs
        self.dropped: set[str] = set()  # the run's state's hosts this job dropped
        ledger = getattr(own, "ledger", None)
        if ledger is not None:
            ledger.scale = jobs  # a job holds about 1/jobs of the hosts (Ledger.sweep_every)
            if base is not None:
                ledger.start_at(base.clock())

    def get(self, host: str) -> HostTable | None:
        table = self.own.get(host)
        if table is None and self.base is not None and host not in self.dropped:
            table = self.base.get(host)
            if table is not None:
                self.own.put(host, table)  # the live object from now on, as the run's store keeps it
        return table

    def put(self, host: str, table: HostTable) -> None:
        self.own.put(host, table)

    def hosts(self) -> Iterator[str]:
        return self.own.hosts()

    def flush(self) -> None:
        self.own.flush()

    def advance(self, records: int) -> None:
        self.own.advance(records)

    def expire(self, now_ms: int | None = None, force: bool = False) -> list[str]:
        base = self.base
        if base is None or not isinstance(self.own, RocksStore):
            return self.own.expire(now_ms, force)
        def others(own_hosts: set[str]) -> list[IndexEntry]:
            return [e for e in base.index() if e.host not in own_hosts and e.host not in self.dropped
                    and job_of(e.host, self.jobs) == self.index]

        dropped = self.own.expire(now_ms, force, others)
        for host in dropped:
            # Gone from the run's state too, whether loaded from it or not: not loaded again.
            if host not in self.dropped and base.holds(host):
                self.dropped.add(host)
                self.own.drop(host)
        return dropped

    def take_events(self) -> list[TemplateEvent]:
        return self.own.take_events()

    def close(self) -> None:
        self.own.close()
        if self.base is not None:
            self.base.close()


def _paths(work: Path, index: int) -> tuple[Path, Path, Path]:
    """A worker's output records, event records and own state folder."""
    return work / f"out-{index}.bin", work / f"events-{index}.bin", work / f"state-{index}"


def _own_store(spec: JobSpec, work: Path, index: int) -> SegmentStore:
    policy = job_policy(spec.policy, spec.jobs)
    if spec.state is None:
        return MemoryStore(policy)
    return RocksStore(_paths(work, index)[2], spec.params.table, policy=policy)


def job_policy(policy: ExpiryPolicy | None, jobs: int) -> ExpiryPolicy | None:
    """A job's expiry policy: the run's, with a share of its state budget (the hosts are split
    evenly by their hash: each job keeps its own under budget / jobs, the least recently seen
    of them first, and the state under the budget, as each stream worker keeps its own)."""
    if policy is None or not policy.budget_bytes or jobs == 1:
        return policy
    return dataclasses.replace(policy, budget_bytes=max(1, policy.budget_bytes // jobs))


_waited = [0.0]  # seconds a job waited for its pages (a job is a process: one a process)


# A message to a job (`_frame`): its length, then how many JSONL lines it carries out of band
# and its pickle's length, each line's length, the pickle (protocol 5), the lines.
_LENGTH = struct.Struct("<Q")
_HEAD = struct.Struct("<IQ")
_IOV_MAX = 16  # buffers a writev takes at once: POSIX's least, else the system's (at most 1,024)
with contextlib.suppress(AttributeError, ValueError, OSError):
    _IOV_MAX = max(_IOV_MAX, min(os.sysconf("SC_IOV_MAX"), 1024))
_inbox = [bytearray()]  # a job's receive buffer (a job a process): made at its first message, grown to its largest


def _frame(message: Message) -> list[Any]:
    """A message to a job as the buffers to write, in order: its length and head, its pickle,
    and each JSONL line handed over undecoded, out of band (pickle protocol 5): the line's own
    bytes go into the pipe and the job reads them in place (`_get`), where pickling a batch
    copied every line into the pickle and the job copied each out of it again (docs/parallel.md,
    "A job's lines read in place")."""
    lines: list[pickle.PickleBuffer] = []
    if isinstance(message, list):
        message = [
            # (the line pickled out of band: the job gets a memoryview of it)
            (seq, Undecoded(pickle.PickleBuffer(item.line), item.source, item.host))  # type: ignore[arg-type]
            if type(item) is Undecoded
            else (seq, item)
            for seq, item in message
        ]
    data = pickle.dumps(message, 5, buffer_callback=lines.append)  # (append returns None: out of band)
    raws = [line.raw() for line in lines]
    head = _HEAD.pack(len(raws), len(data)) + struct.pack(f"<{len(raws)}Q", *map(len, raws))
    return [_LENGTH.pack(len(head) + len(data) + sum(map(len, raws))), head, data, *raws]


def _write_all(fd: int, parts: Sequence[Any]) -> None:
    """Write the buffers to `fd` in order, whole (a writev may write part of them)."""
    views = [memoryview(part) for part in parts if len(part)]
    at = 0
    while at < len(views):
        written = os.writev(fd, views[at : at + _IOV_MAX])
        while written and written >= len(views[at]):
            written -= len(views[at])
            at += 1
        if written:
            views[at] = views[at][written:]


class _Inbox:
    """The parent's end of a job's inbox: a pipe of the job's own, written by a thread of the
    parent's, `put` waiting while _QUEUE_BATCHES messages wait. The parent closes its copy of
    the reading end once the job has started (`Jobs._start_processes`): the job is then the
    pipe's only reader, so a job that ends makes the thread's next write fail, and the thread
    ends, rather than fill the pipe and wait."""

    def __init__(self, ctx: multiprocessing.context.BaseContext) -> None:
        self.reader, self.writer = ctx.Pipe(duplex=False)
        self.waiting: queue_module.Queue[list[Any] | None] = queue_module.Queue(_QUEUE_BATCHES)
        self.thread: threading.Thread | None = None  # started at the first message (none may run at a fork)
        self.error: BaseException | None = None  # what ended the thread, but for a job that ended

    def put(self, parts: list[Any], timeout: float) -> None:
        """Hand a message over (`_frame`'s buffers); queue.Full when it could not within
        `timeout` seconds; the thread's own error where one ended it (the job would wait for
        ever)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._send, name="detemplate-job-inbox", daemon=True)
            self.thread.start()
        if self.error is not None:
            raise self.error
        self.waiting.put(parts, timeout=timeout)

    def _send(self) -> None:
        fd = self.writer.fileno()
        while True:
            parts = self.waiting.get()
            if parts is None:
                return
            try:
                _write_all(fd, parts)
            except OSError:
                return  # the job has ended (a broken pipe): the parent's check says how
            except BaseException as exc:  # (none is known: told to the parent rather than hang it)
                self.error = exc
                return

    def close(self) -> None:
        """End the thread and close the pipe's ends: the thread ends at once where it waits for
        a message; one writing to a job that was stopped ends on the failed write."""
        if self.thread is not None:
            with contextlib.suppress(queue_module.Full):
                self.waiting.put_nowait(None)
            self.thread.join(_STOP_SECONDS)
        if self.thread is None or not self.thread.is_alive():  # (a thread still writing keeps its pipe)
            self.writer.close()
        self.reader.close()


def _take(inbox: Connection) -> Message:
    """The parent's next message to this job (a batch; an int: no more, the input's records),
    its wait counted."""
    started = time.perf_counter()
    message = _get(inbox.fileno())
    _waited[0] += time.perf_counter() - started
    return message


def _get(fd: int) -> Message:
    """The next message of a job's inbox (the pipe `fd`, `_frame`'s buffers), read into the
    job's one buffer and unpickled from there, each JSONL line a view of that buffer: valid
    until the next message is read (`_own_items` decodes a batch's lines before it asks for
    the next). EOFError at the pipe's end."""
    (size,) = _LENGTH.unpack(_read(fd, _LENGTH.size))
    message = _read(fd, size)
    count, length = _HEAD.unpack_from(message)
    at = _HEAD.size + 8 * count
    data = message[at : at + length]
    at += length
    buffers = []
    for n in struct.unpack_from(f"<{count}Q", message, _HEAD.size):
        buffers.append(message[at : at + n])
        at += n
    return pickle.loads(data, buffers=buffers)  # type: ignore[no-any-return]  # what the parent put


def _read(fd: int, size: int) -> memoryview:
    """The next `size` bytes of the pipe `fd`, in the job's buffer (valid until the next read)."""
    if len(_inbox[0]) < size:
        _inbox[0] = bytearray(max(size, 1 << 20))  # (a new one: the last one's views may live on)
    view = memoryview(_inbox[0])[:size]
    at = 0
    while at < size:
        with view[at:] as rest:
            n = os.readv(fd, [rest])
        if n == 0:
            view.release()
            if at == 0:
                raise EOFError
            raise OSError("got end of file during message")
        at += n
    return view


def _own_items(
    spec: JobSpec, index: int, inbox: Connection, first: Message, placement: _Placement
) -> Iterator[tuple[int, RawPage | DeadPage]]:
    """This worker's items with their place in the input: from the parent's batches (the first
    one already taken), or read (every line routed by its first fields, only this job's decoded).
    At the end, the input's records go to `placement`."""
    if spec.feed:
        message = first
        while isinstance(message, list):
            for seq, item in message:
                yield seq, _decoded(item)
            message = _take(inbox)
        placement.total = message
        return
    seq = -1  # (no items: the input's records are 0)
    for seq, item in enumerate(iter_inputs(spec.inputs, spec.params.segment.max_page_bytes, undecoded=True)):
        if _owner(item, spec.jobs) == index:
            yield seq, _decoded(item)
    placement.total = seq + 1


def _decoded(item: RawPage | DeadPage | Undecoded) -> RawPage | DeadPage:
    """An item as its job decides it: a line handed over undecoded is decoded here."""
    if not isinstance(item, Undecoded):
        return item
    page = decode_record(item.line, item.source)
    if isinstance(page, RawPage) and page.host != item.host:  # decode_record rules this out
        raise RuntimeError(f"{item.source}: routed by host {item.host!r}, decoded as {page.host!r}")
    return page


def _owner(item: RawPage | DeadPage | Undecoded, jobs: int) -> int:
    """The job of an item: its host's; a dead item of the reader (no reliable host) goes to job 0."""
    return 0 if isinstance(item, DeadPage) else job_of(item.host, jobs)


class _Published:
    """What a job has published to the parent: pages decided, the bytes of its output and event
    files flushed, and the position below which it writes nothing more (`_Merge`); one shared
    array of the job's (`Jobs._make`), written here and read by the parent."""

    def __init__(self, shared: Any, out: _RecordSink, events: _RecordSink, every: int) -> None:
        self.shared = shared
        self.out, self.events = out, events
        self.every = every
        self.pages = 0
        self.filed = 0  # the records' bytes when last published

    def decided(self, seq: int) -> None:
        """The item at position `seq` is decided: count it; every `every` bytes of records,
        flush the files and publish how far they are final."""
        self.pages += 1
        filed = self.out.filed + self.events.filed
        if filed - self.filed < self.every:
            self.shared[0] = self.pages  # (one slot: the parent's progress bar reads it alone)
            return
        self.filed = filed
        self.publish(seq)

    def publish(self, below: int) -> None:
        """Flush the files and publish their bytes, and `below`: the job writes nothing more at
        an earlier position (_FINAL: nothing more at all)."""
        self.out.fh.flush()
        self.events.fh.flush()
        with self.shared.get_lock():
            self.shared[:] = [self.pages, self.out.filed, self.events.filed, below]


def _decide_share(spec: JobSpec, work: Path, index: int, shared: Any, inbox: Connection) -> Any:
    """Decide this worker's pages of the whole input; its summary."""
    # The parent's first message: the first batch, or the go of a job that reads the input
    # itself (an empty one). The parent sends it once it has opened the run's state, so a job
    # forked before that opens the state only after it exists.
    first = _take(inbox)
    out_path, events_path, _ = _paths(work, index)
    base = ReadOnlyTables(spec.state, spec.params.table) if spec.state else None
    store = _LayeredStore(_own_store(spec, work, index), base, index, spec.jobs)
    try:
        with open(out_path, "wb", buffering=1 << 20) as out_fh, open(events_path, "wb", buffering=1 << 20) as ev_fh:
            out = _RecordSink(out_fh)
            events = _RecordSink(ev_fh)
            writer = _job_writer(spec.fmt, out, spec.options)
            placement = _Placement(out, events)
            published = _Published(shared, out, events, spec.publish_bytes)

            def mine() -> Iterator[RawPage | DeadPage]:
                for seq, item in _own_items(spec, index, inbox, first, placement):
                    out.at(seq)
                    events.at(seq)
                    yield item
                    published.decided(seq)

            try:
                summary = spec.decide(
                    mine(), store, spec.params, None, events if spec.events else None, spec.with_html, None, writer,
                    placement,
                )
            finally:
                writer.close()
            published.publish(_FINAL)  # every record written: the files whole
            return summary
    finally:
        store.close()


def _work(
    spec: JobSpec,
    work: str,
    index: int,
    shared: Any,
    conn: Connection,
    inbox: Connection,
    gc_threshold: tuple[int, ...],
    blas_threads: int | None = None,
    parent: int | None = None,
) -> None:
    """A worker process: its summary to `conn`, or the error that stopped it. `parent`: the
    process id of the run that forked it (None: it came from the fork server)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers on Ctrl-C...
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # ...by SIGTERM (a forked job has the run's handler)
    if hasattr(signal, "pthread_sigmask"):  # a job starts with both held back (`_no_interrupt`)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _end_with_parent(parent)
    # The garbage collector and BLAS's threads as the parent has them (the command line raises
    # the first threshold and sets one thread: settings.tune_gc, tune_blas). A forked job has
    # them already; the fork server's interpreter started with the defaults.
    gc.set_threshold(*gc_threshold)
    if blas_threads is not None:
        blas.set_threads(blas_threads)
    try:
        summary = _decide_share(spec, Path(work), index, shared, inbox)
    except DetemplateError as exc:
        conn.send(("error", str(exc)))
        return
    except OSError as exc:  # its files in the jobs' folder (the disk full): a reason, not a traceback
        conn.send(("error", f"a write in {work} failed: {exc.strerror or exc}"))
        return
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise
    conn.send(("ok", (summary, time.process_time(), _waited[0])))


_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


def _end_with_parent(parent: int | None) -> None:
    """Have the kernel kill this job when the process that started it ends (Linux). A run
    stops its jobs itself, on every way out that runs Python (an error, Ctrl-C, SIGTERM:
    `Jobs.stop`); this is for the ways that do not: the run killed by SIGKILL or the kernel's
    out-of-memory killer. A forked job would otherwise wait for ever on its inbox, with its
    RocksDB and files open: the fork gave it its inbox's writing end too, and the jobs forked
    after it, so the inbox does not end with the run. A job of the fork server goes when the
    server does, which ends with the run. `parent`: the run's process id, for a forked job:
    gone already (before the request was made), the job ends now. Where prctl cannot be
    called, nothing changes (the fork server's jobs, the only ones off Linux, see their inbox
    end with the run)."""
    prctl = _libc("prctl") if _LINUX else None
    if prctl is None or prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if parent is not None and os.getppid() != parent:
        os._exit(1)


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM (interrupts.py) held back from the calling thread
    for the block (delivered after it), where the platform can."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _ended(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _progress(total: int | None) -> Callable[[int | None], None]:
    """Show pages done on a terminal (None: the end); a no-op elsewhere."""
    if not sys.stderr.isatty():
        return lambda done: None
    from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type stubs

    bar = tqdm(total=total, unit="page", dynamic_ncols=True, file=sys.stderr)

    def show(done: int | None) -> None:
        if done is None:
            bar.close()
        else:
            bar.update(done - bar.n)

    return show


def _can_fork() -> bool:
    """Whether jobs may be forked from this process: on Linux (elsewhere a forked child may not
    use what the system libraries set up in its parent), with no other Python thread (a fork
    copies the calling thread only: locks another one held would stay held in the job) and no
    RocksDB background thread. RocksDB starts its flush and compaction threads once a process,
    with the first database it opens, and keeps them after it is closed: a job forked after that
    has none, and its own database's flush would wait for them for ever. Its threads say what
    they are in their names ("rocksdb:low", "rocksdb:high"). OpenBLAS's threads are safe: it
    stops them before a fork and starts them again after."""
    if not _LINUX or threading.active_count() != 1:
        return False
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/comm", "rb") as fh:
                if fh.read().startswith(b"rocksdb"):
                    return False
    except OSError:
        return False
    return True


class Jobs:
    """The parent's view of the running workers: their processes, pipes, counters and inboxes.

    fork: the jobs are forked from this process, which must have opened nothing that a job may
        not share (no RocksDB handle, no output file, no thread: `start_jobs` is called first
        thing). A fork takes milliseconds, and the job has the engine imported. Otherwise they
        are forked from a fork server: a fresh interpreter that imports this module (and with
        it the engine, 0.25 s of CPU once rather than once a job) and opens nothing, so that
        nothing the parent holds crosses into a job; it starts 0.3 s later.
    """

    def __init__(self, spec: JobSpec, work: Path, fork: bool = False) -> None:
        self.spec = spec
        self.fork = fork
        self.ctx: multiprocessing.context.ForkContext | multiprocessing.context.ForkServerContext = (
            multiprocessing.get_context("fork") if fork else multiprocessing.get_context("forkserver")
        )
        if not fork:
            self.ctx.set_forkserver_preload([__name__])
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.conns: list[Connection] = []
        self.published: list[Any] = []  # each job's `_Published` array
        self.inboxes: list[_Inbox] = []
        self.summaries: dict[int, Any] = {}
        self.show: Callable[[int | None], None] = lambda done: None  # the progress bar: `run`
        self.merges: list[_Merge] = []  # the output's and the events' (`run_jobs`): merged as the jobs go
        self._next_look = 0.0  # when `_put` looks at the jobs next (`check`)
        self.work = work
        self._sends: list[Connection] = []
        self._starter = threading.Thread()
        # Set by the starter thread when it is done (every process started, or an error). Not
        # Thread.join: a join that Ctrl-C interrupts leaves the thread marked as stopped while
        # it still runs (CPython 3.11's `_wait_for_tstate_lock` releases the running thread's
        # lock), and every later join returns at once; `stop` then missed a job the thread
        # went on to start, which outlived the run and wrote into the folder being removed.
        self._done_starting = threading.Event()
        self._start_error: BaseException | None = None
        self._stopped = False
        # The run's last step, the jobs' tables copied into its state (`_decide_and_merge`):
        # None before it, "copying" in it, "copied" once every table is in.
        self.copy: str | None = None

    def start(self) -> None:
        """Start every job. Forked ones here; from the fork server, on a thread of their own, so
        that the parent reads and queues the first batches while the server starts (it imports
        the engine: a quarter of a second the parent would otherwise wait out)."""
        threads = blas.threads()
        if self.fork:
            with _no_interrupt():  # Ctrl-C between two forks would leave `stop` a job it does not know
                self._start_processes(threads, make=True)
            self.started()
            return
        for index in range(self.spec.jobs):
            self._make(index, threads)
        self._starter = threading.Thread(target=self._start_processes, name="detemplate-job-starter", daemon=True)
        # An interrupt after the thread is launched but before it has an ident would hide it from `stop`.
        with _no_interrupt():
            self._starter.start()

    def _make(self, index: int, threads: int | None) -> None:
        """Job `index`'s process (not started), pipes, counter and inbox."""
        ctx = self.ctx
        recv, send = ctx.Pipe(duplex=False)
        shared = ctx.Array("q", 4)  # what the job publishes (`_Published`)
        inbox = _Inbox(ctx)
        process = ctx.Process(
            target=_work,
            args=(self.spec, str(self.work), index, shared, send, inbox.reader, gc.get_threshold(), threads,
                  os.getpid() if self.fork else None),
            name=f"detemplate-job-{index}",
            daemon=True,
        )
        self.conns.append(recv)
        self.inboxes.append(inbox)
        self.processes.append(process)
        self.published.append(shared)
        self._sends.append(send)

    def _start_processes(self, threads: int | None = None, make: bool = False) -> None:
        """Start the jobs in order; `make`: each one made just before its start. A forked job
        holds what the parent held when it was forked: made one by one, no job holds the
        writing end of another's pipe, so each pipe's end of file shows when its job ends."""
        try:
            for index in range(self.spec.jobs):
                if make:
                    self._make(index, threads)
                self.processes[index].start()
                self._sends[index].close()  # the parent's copy: EOF on `recv` when the worker ends without a word
                self.inboxes[index].reader.close()  # the job its inbox's only reader (`_Inbox`)
        except BaseException as exc:  # told to the main thread by `started`
            self._start_error = exc
        finally:
            self._done_starting.set()

    def started(self) -> None:
        """Wait until every job has been started; JobFailedError when one could not be."""
        self._done_starting.wait()
        if self._start_error is not None:
            raise JobFailedError(f"the jobs could not be started: {self._start_error}") from self._start_error

    def check(self) -> None:
        """Take the summaries of finished workers, merge what the jobs have made final, show
        their pages; JobFailedError when one failed or died, or its pages could not be handed
        over."""
        self._next_look = time.monotonic() + _POLL_SECONDS
        if not self._done_starting.is_set():
            return  # not every job started yet: nothing can have ended
        self.started()
        jobs = self.spec.jobs
        for i in range(jobs):
            if i in self.summaries:
                continue
            error = self.inboxes[i].error
            if error is not None:
                raise JobFailedError(f"job {i + 1} of {jobs}: its pages could not be handed over: {error!r}") from error
            if self.conns[i].poll():
                try:
                    status, value = self.conns[i].recv()
                except EOFError:
                    self.processes[i].join()
                    raise JobFailedError(
                        f"job {i + 1} of {jobs} ended before it finished ({_ended(self.processes[i])})"
                    ) from None
                if status != "ok":
                    raise JobFailedError(f"job {i + 1} of {jobs} failed: {value}")
                self.summaries[i], cpu_seconds, waited_seconds = value
                logger.debug("job %d of %d: %d pages, %.1f s CPU, %.1f s waiting for pages", i + 1, jobs,
                             value[0].pages, cpu_seconds, waited_seconds)
                self.processes[i].join()
            elif self.processes[i].exitcode is not None:
                raise JobFailedError(f"job {i + 1} of {jobs} ended before it finished ({_ended(self.processes[i])})")
        self.merge_ready()
        self.show(sum(shared[0] for shared in self.published))

    def merge_ready(self) -> None:
        """Merge every record the jobs have made final so far (`_Merge`) into the run's output
        and events."""
        if not self.merges or not self.published:
            return
        below = _FINAL
        sizes: list[list[int]] = [[], []]
        for shared in self.published:
            with shared.get_lock():
                _pages, out_bytes, event_bytes, bound = shared[:]
            below = min(below, bound)
            sizes[0].append(out_bytes)
            sizes[1].append(event_bytes)
        # The output's merge, then the events' where the run writes them; an interrupt (Ctrl-C,
        # SIGTERM: interrupts.py) waits for them, so that no write is cut in two (a Parquet row
        # group's, whose writer a cut leaves unable to write the file's footer).
        with interrupts.held_back():
            for merge, filed in zip(self.merges, sizes[: len(self.merges)], strict=True):
                merge.advance(below, filed)

    def run(self, total: int | None) -> list[Any]:
        """Feed the jobs (or tell them to read) and wait for every one; their summaries."""
        self.show = _progress(total)  # not before: a bar's monitor thread must not be forked
        if self.spec.feed:
            self.feed()
        else:
            for index in range(self.spec.jobs):
                self._put(index, [])  # the go of a job that reads the input itself (_decide_share)
        return self.wait()

    def feed(self) -> None:
        """Read the input once, handing each job its items in batches (through its bounded inbox)."""
        spec = self.spec
        batches: list[Batch] = [[] for _ in range(spec.jobs)]
        chars = [0] * spec.jobs
        max_items = [_FIRST_BATCH_ITEMS] * spec.jobs  # each job's next batch: its items...
        max_chars = [_BATCH_CHARS >> _FIRST_BATCH_SHIFT] * spec.jobs  # ...or characters, at most
        seq = -1  # (no items: the input's records are 0)
        for seq, item in enumerate(iter_inputs(spec.inputs, spec.params.segment.max_page_bytes, undecoded=True)):
            owner = _owner(item, spec.jobs)
            batches[owner].append((seq, item))
            if isinstance(item, Undecoded):
                chars[owner] += len(item.line)
            elif isinstance(item, RawPage):
                chars[owner] += len(item.html)
            if len(batches[owner]) >= max_items[owner] or chars[owner] >= max_chars[owner]:
                self._put(owner, batches[owner])
                batches[owner] = []
                chars[owner] = 0
                max_items[owner] = min(2 * max_items[owner], _BATCH_ITEMS)
                max_chars[owner] = min(2 * max_chars[owner], _BATCH_CHARS)
        records = seq + 1
        for owner, batch in enumerate(batches):
            if batch:
                self._put(owner, batch)
            self._put(owner, records)  # the end: the input's records (the page clock's, offline.run_pages)

    def _put(self, index: int, message: Message) -> None:
        parts = _frame(message)
        while True:
            try:
                self.inboxes[index].put(parts, timeout=_POLL_SECONDS)
                break
            except queue_module.Full:
                self.check()
        if time.monotonic() >= self._next_look:  # the jobs looked at while the parent reads, too
            self.check()

    def wait(self) -> list[Any]:
        """Every worker's summary, in job order."""
        self.started()
        pending = range(self.spec.jobs)
        while len(self.summaries) < self.spec.jobs:
            todo = [i for i in pending if i not in self.summaries]
            # Once a job has ended, a core is free: the parent merges what the others make final
            # as they go, so that little is left to merge after the last (`_Merge`).
            timeout = _MERGE_POLL_SECONDS if self.summaries else _POLL_SECONDS
            wait([self.conns[i] for i in todo] + [self.processes[i].sentinel for i in todo], timeout)
            self.check()
        return [self.summaries[i] for i in pending]

    def stop(self) -> None:
        """Stop every worker still running (after a failure or Ctrl-C) and release the pipes;
        once (later calls do nothing)."""
        if self._stopped:
            return
        self._stopped = True
        self.show(None)
        if self._starter.ident is not None:  # the thread runs, or ran: every process is started or not, never half
            self._done_starting.wait()
        self.processes = [p for p in self.processes if p.pid is not None]
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + _STOP_SECONDS
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        for inbox in self.inboxes:
            inbox.close()  # a stopped worker leaves batches unread: they are dropped
        for conn in self.conns:
            conn.close()


@contextlib.contextmanager
def start_jobs(spec: JobSpec, fork: bool | None = None) -> Iterator[Jobs]:
    """The run's jobs, started, in their own folder (beside the state directory, or in the
    temporary one); stopped and the folder removed on leaving. `fork` None: forked where
    `_can_fork`. Call it before this process opens the run's state or output (`run_jobs`
    gives the jobs their first pages only then)."""
    root = work_root(spec.state)
    try:
        root.mkdir(parents=True, exist_ok=True)  # the state folder's, which the run makes
        work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=root))
        lock = _hold(work)
    except OSError as exc:
        raise StateError(f"cannot make the jobs' folder beside the state folder {spec.state}: {exc}") from exc
    try:
        jobs = Jobs(spec, work, _can_fork() if fork is None else fork)
        try:
            jobs.start()
            yield jobs
        finally:
            jobs.stop()
    finally:
        remove_work(work)
        os.close(lock)


WORK_PREFIX = ".detemplate-jobs-"
_LOCK_NAME = "run.lock"


def _hold(work: Path) -> int:
    """Lock the jobs' folder `work` for the run (an exclusive flock on its lock file, which
    holds the run's process id); the file's descriptor, to close once the folder is removed.
    A forked job holds the lock with the run (its copy of the descriptor): a folder whose lock
    is free is no run's."""
    import fcntl

    fd = os.open(work / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())  # after the lock: a file with a pid was locked
    except BaseException:
        os.close(fd)
        raise
    return fd


def work_root(state: str | None) -> Path:
    """Where a run's jobs' folder goes: beside its state folder, or in the temporary one."""
    return Path(state).resolve().parent if state else Path(tempfile.gettempdir())


def remove_abandoned(state: str | None) -> list[Path]:
    """Remove the jobs' folders that no run holds where a run with this state would make its
    own (`work_root`): those of a run killed where no clean-up could run (SIGKILL, the
    out-of-memory killer), which hold its jobs' unmerged records and tables. A folder is
    abandoned when its lock file names a process and its lock is free; one without a lock
    file, or whose file is still empty, is being made (or is from a run before the lock), and
    is left. Every `run` calls it first, whatever its jobs. Returns the folders removed."""
    import fcntl

    removed: list[Path] = []
    try:
        found = sorted(work_root(state).glob(WORK_PREFIX + "*"))
    except OSError:  # a folder that cannot be read: nothing of ours can be removed there
        return removed
    for work in found:
        try:
            fd = os.open(work / _LOCK_NAME, os.O_RDONLY)
        except OSError:  # none (yet), or not ours to open
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not os.read(fd, 32).strip():
                    continue  # locked before its pid is written: a run making it
            except OSError:
                continue  # a run holds it
            shutil.rmtree(work, ignore_errors=True)
            removed.append(work)
        finally:
            os.close(fd)
    return removed


def add_summaries(total: Any, parts: Iterable[Any]) -> None:
    """Add the workers' summaries (offline.RunSummary) into `total`: counts summed, counters
    and host counts joined (`update`); `seconds` is left to the caller (the run's wall time)."""
    for part in parts:
        for f in dataclasses.fields(total):
            if f.name == "seconds":
                continue
            mine, theirs = getattr(total, f.name), getattr(part, f.name)
            if hasattr(mine, "update"):
                mine.update(theirs)
            elif isinstance(mine, int | float):
                setattr(total, f.name, mine + theirs)


def run_jobs(
    spec: JobSpec,
    store: SegmentStore,
    writer: Writer,
    events_out: IO[bytes] | None,
    summary: Any,
    total: int | None = None,
    jobs: Jobs | None = None,
) -> None:
    """Decide the inputs in `spec.jobs` processes; write the merged output through the run's
    `writer` (after the header it wrote; the caller closes it) and events to `events_out`, put
    every table the workers hold into `store` (when the run has state), add their figures to
    `summary`. `jobs`: started by `start_jobs` before `store` was opened; None: started here,
    from the fork server (this process has opened its state: no job may be forked from it)."""
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if jobs is None:
            jobs = stack.enter_context(start_jobs(spec, fork=False))
        try:
            _decide_and_merge(jobs, store, writer, events_out, summary, total)
        finally:
            summary.seconds += time.perf_counter() - started


def _decide_and_merge(
    jobs: Jobs, store: SegmentStore, writer: Writer, events_out: IO[bytes] | None, summary: Any, total: int | None
) -> None:
    spec, work = jobs.spec, jobs.work
    jobs.merges = [_Merge([_paths(work, i)[0] for i in range(spec.jobs)], writer.out, writer)]
    if events_out is not None:
        jobs.merges.append(_Merge([_paths(work, i)[1] for i in range(spec.jobs)], events_out))
    try:
        parts = jobs.run(total)
        jobs.merge_ready()  # what the jobs wrote since the parent last looked: every job has ended
    finally:
        jobs.stop()
    add_summaries(summary, parts)
    if spec.state is not None:
        # Every record is out: an interrupt now waits for the copy, so that the state is this
        # run's whole (a second one goes through: `interrupts._interrupt`).
        with interrupts.held_back():
            jobs.copy = "copying"
            _copy_tables(spec, work, store, sum(part.pages for part in parts))
            jobs.copy = "copied"
    logger.debug("run --jobs %d: %.1f s CPU in the parent (reading, merging, copying tables)", spec.jobs,
                 time.process_time())


def remove_work(work: Path) -> None:
    """Remove the jobs' folder, whole even when Ctrl-C comes while it is being removed (the
    run's last step: a KeyboardInterrupt there would leave it half removed); the interrupt is
    raised once the folder is gone."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            shutil.rmtree(work, ignore_errors=True)
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


def _copy_tables(spec: JobSpec, work: Path, store: SegmentStore, records: int) -> None:
    """Every table the workers hold, with when each host was last seen, into the run's store
    (the hosts a job dropped deleted from it first), and the store's clock moved on by the
    input's `records`."""
    assert isinstance(store, RocksStore)  # a run with --state
    for index in range(spec.jobs):
        own = _own_store(spec, work, index)
        try:
            assert isinstance(own, RocksStore)
            store.take_from(own)
        finally:
            own.close()
    store.set_clock(store.ledger.base + records)
