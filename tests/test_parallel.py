"""`detemplate run --jobs N`: the hosts split over N processes give the bytes of one job, in
every format, with dead inputs at their place; a state written by N jobs is continued by any
number; a job that fails or is killed fails the run (exit 1) and leaves the state as it was."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import io
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type stubs
import pytest
from detemplate import blas, interrupts, parallel
from detemplate.cli import main
from detemplate.engine.errors import ConfigError, StateError
from detemplate.engine.model import DeadPage, RawPage
from detemplate.engine.params import EngineParams
from detemplate.io.formats import OutputOptions, make_writer
from detemplate.io.sources import Undecoded, iter_inputs
from detemplate.offline import HostCount, RunSummary, _closing, run_pages
from detemplate.parallel import JobFailedError, JobSpec, job_of, resolve_jobs, run_jobs
from detemplate.state.expiry import ExpiryPolicy
from detemplate.state.memory import MemoryStore
from detemplate.state.rocks import RocksStore

from tests.factories import interleave, make_site, write_jsonl

HOSTS = 7
DEADLINE_SECONDS = 300.0  # for a condition on a loaded machine; never a sleep


def _crawl(pages: int, seed: int = 0) -> list[Any]:
    layouts = ("blog", "docs", "news")
    return interleave(*(
        make_site(f"site{n}.example", pages + n, seed=seed + n, layout=layouts[n % 3]) for n in range(HOSTS)
    ))


def _with_bad_line(path: Path, at: int) -> Path:
    """PATH with a line that is not JSON inserted before line `at`."""
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:at], b"{not json\n", *lines[at:]]))
    return path


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """7 hosts, 63 pages interleaved, and a bad JSON line as the 10th item."""
    path = write_jsonl(_crawl(6), tmp_path_factory.mktemp("crawl") / "crawl.jsonl")
    return _with_bad_line(path, 9)


def run(inputs: Iterable[Path], out: Path, *flags: str) -> None:
    assert main(["run", *map(str, inputs), "--output", str(out), *flags]) == 0


def outputs_by_jobs(inputs: Iterable[Path], tmp_path: Path, suffix: str) -> dict[int, bytes]:
    """The output file's bytes of `run` with 1, 2 and 3 jobs."""
    files = {}
    for jobs in (1, 2, 3):
        out = tmp_path / f"out-{jobs}{suffix}"
        run(inputs, out, "--jobs", str(jobs))
        files[jobs] = out.read_bytes()
    return files


def test_the_hosts_are_split_over_every_job() -> None:
    for jobs in (2, 3):  # the test crawl gives every job pages
        assert {job_of(f"site{n}.example", jobs) for n in range(HOSTS)} == set(range(jobs))
    assert job_of("site1.example", 3) == job_of("site1.example", 3)


@pytest.mark.parametrize("fmt", ["jsonl", "text", "markdown"])
def test_n_jobs_write_the_bytes_of_one(crawl: Path, tmp_path: Path, fmt: str) -> None:
    outputs = {}
    for jobs in (1, 2, 3):
        out, events = tmp_path / f"out-{jobs}", tmp_path / f"events-{jobs}.jsonl"
        run([crawl], out, "--format", fmt, "--events", str(events), "--jobs", str(jobs))
        outputs[jobs] = (out.read_bytes(), events.read_bytes())
    assert outputs[1][0] and outputs[1][1].count(b"\n") >= HOSTS  # every host learned its template
    assert outputs[2] == outputs[1]
    assert outputs[3] == outputs[1]


def test_first_pages_published_by_their_bound_are_at_the_place_of_one_job(tmp_path: Path) -> None:
    # Hosts whose second page comes more than `hold_first` items after their first have their
    # first page go out alone after that many items: at the same place whatever job decides it.
    sites = [make_site(f"late{n}.example", 2, seed=n, layout="docs") for n in range(4)]
    busy = [sp.page for sp in make_site("busy.example", 12, seed=9, layout="blog")]
    pages = [*(s[0].page for s in sites), *busy, *(s[1].page for s in sites)]
    crawl = write_jsonl(pages, tmp_path / "late.jsonl")
    outs = {}
    for jobs in (1, 2, 3):
        out = tmp_path / f"late-{jobs}.jsonl"
        run([crawl], out, "--jobs", str(jobs), "--param", "pagelevel.hold_first=5")
        outs[jobs] = out.read_bytes()
    assert outs[2] == outs[1] and outs[3] == outs[1]
    urls = [json.loads(line)["url"] for line in outs[1].splitlines()]
    # late0..3 at items 0..3 go out after items 5..8 (busy's first page, item 4, waits for its second).
    late = [s[0].page.url for s in sites]
    b = [p.url for p in busy]
    assert urls[:9] == [b[0], b[1], late[0], b[2], late[1], b[3], late[2], b[4], late[3]]


def test_lines_routed_undecoded_or_decoded_give_the_bytes_of_one_job(crawl: Path, tmp_path: Path) -> None:
    # The parent hands a line that starts with "url" and "host" over undecoded and decodes
    # the others itself: records of either shape, and one naming its host twice, differently.
    shaped = tmp_path / "shaped.jsonl"
    lines = []
    for n, line in enumerate(crawl.read_bytes().splitlines()):
        if n % 3 == 1 and line.startswith(b'{"url"'):
            record = json.loads(line)
            line = json.dumps({"html": record.pop("html"), **record}).encode()  # "html" first
        lines.append(line)
    lines.insert(20, b'{"url": "https://site1.example/x", "host": "site1.example", "html": "<p>x</p>", '
                     b'"host": "site2.example"}')
    shaped.write_bytes(b"\n".join(lines) + b"\n")
    assert sum(line.startswith(b'{"html"') for line in lines) >= 15
    outputs = outputs_by_jobs([shaped], tmp_path, ".jsonl")
    assert outputs[2] == outputs[1] and outputs[3] == outputs[1]
    records = [json.loads(line) for line in outputs[1].splitlines()]
    assert [r["error"] for r in records if "error" in r] == ["bad_json", "bad_record"]
    assert records[20]["error"] == "bad_record" and "twice" in records[20]["detail"]


def test_jobs_that_read_the_input_themselves_write_the_bytes_of_one(crawl: Path, tmp_path: Path) -> None:
    # JobSpec.feed=False (what scripts/measure_jobs.py --read compares with the parent feeding
    # the jobs): every job reads the whole input, routes each line by its first fields and
    # decodes only its own; the bad line's dead letter comes from the job that reads it as its own.
    run([crawl], tmp_path / "one.jsonl", "--jobs", "1")
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), run_pages, feed=False)
    out = io.BytesIO()
    summary = RunSummary()
    run_jobs(spec, MemoryStore(), make_writer("jsonl", out, OutputOptions()), None, summary)
    one = (tmp_path / "one.jsonl").read_bytes()
    assert out.getvalue() == one
    assert summary.pages == one.count(b"\n") == 64  # 63 pages and the bad line's dead letter


def test_wet_has_one_warcinfo_and_the_bytes_of_one_job(crawl: Path, tmp_path: Path) -> None:
    # WET's records carry the run's start: both runs are given the same one.
    options = OutputOptions(started=datetime(2024, 5, 1, tzinfo=UTC))
    params = EngineParams()
    one = io.BytesIO()
    writer = make_writer("wet", one, options)
    run_pages(iter_inputs([crawl]), MemoryStore(), params, writer=writer)
    many = io.BytesIO()
    writer = make_writer("wet", many, options)
    summary = RunSummary()
    run_jobs(JobSpec((str(crawl),), 2, params, "wet", options, run_pages), MemoryStore(), writer, None, summary)
    writer.close()
    assert many.getvalue().count(b"WARC-Type: warcinfo") == 1
    assert many.getvalue() == one.getvalue()
    assert summary.pages == 64 and summary.clean == 63 and summary.errors == {"bad_json": 1}
    assert len(summary.hosts) == HOSTS


def _job_file(path: Path, writes: Iterable[tuple[int, bytes] | tuple[int, bytes, str]]) -> Path:
    """A job's temporary file as a job writes it: each (seq, bytes) at its item, and each
    (seq, bytes, "sweep") as a sweep's event after that item's own records."""
    with open(path, "wb") as fh:
        sink = parallel._RecordSink(fh)
        for seq, data, *sweep in writes:
            if sweep:
                sink.sweep_at(seq)
                sink.write(data)
                sink.sweep_at(None)
            else:
                sink.at(seq)
                sink.write(data)
    return path


def _merge(paths: list[Path], out: Any) -> None:
    """The whole of the jobs' files merged into `out`, as the run's last merge does."""
    parallel._Merge(paths, out).advance(parallel._FINAL, [path.stat().st_size for path in paths])


def test_the_merge_orders_records_by_place_then_a_sweeps_by_bytes(tmp_path: Path) -> None:
    """The parent's merge of the jobs' files (mapped, not read): records by their item, several
    of one item in the order written, a sweep's events from every job after the item's own,
    ordered by their bytes as one job writes them (each job's in that order already); a job with
    no record adds nothing."""
    a = _job_file(tmp_path / "a", [(0, b"a0\n"), (0, b"a0+\n"), (3, b"a3\n"), (3, b"sweep host-a\n", "sweep"),
                                   (3, b"sweep host-c\n", "sweep"), (5, b"a5\n")])
    b = _job_file(tmp_path / "b", [(1, b"b1\n"), (3, b"sweep host-b\n", "sweep"), (4, b"b4\n")])
    empty = _job_file(tmp_path / "empty", [])
    out = io.BytesIO()
    _merge([a, empty, b], out)
    assert out.getvalue() == b"a0\na0+\nb1\na3\nsweep host-a\nsweep host-b\nsweep host-c\nb4\na5\n"


def test_the_merge_writes_what_is_final_as_the_jobs_go_and_the_rest_at_the_end(tmp_path: Path) -> None:
    """Merged a piece at a time (`_Merge.advance`: below a position, within the bytes each job
    has published), the output is the whole merge's: nothing at or past the bound, and no
    record the published bytes cut off, is written before its time."""
    writes_a = [(0, b"a0\n"), (0, b"a0+\n"), (3, b"a3\n"), (3, b"sweep host-a\n", "sweep"),
                (3, b"sweep host-c\n", "sweep"), (5, b"a5\n"), (7, b"a7\n")]
    writes_b = [(1, b"b1\n"), (3, b"sweep host-b\n", "sweep"), (4, b"b4\n"), (6, b"b6\n")]
    a = _job_file(tmp_path / "a", writes_a)
    b = _job_file(tmp_path / "b", writes_b)
    whole = io.BytesIO()
    _merge([a, b], whole)
    head = parallel._RECORD.size
    sizes = [a.stat().st_size, b.stat().st_size]
    b_through_4 = sum(head + len(w[1]) for w in writes_b[:3])

    out = io.BytesIO()
    merge = parallel._Merge([a, b], out)
    merge.advance(0, [0, 0])  # nothing published yet
    assert out.getvalue() == b""
    merge.advance(3, [sizes[0], b_through_4 - 1])  # b's third record cut off: b's first only
    assert out.getvalue() == b"a0\na0+\nb1\n"
    merge.advance(4, [sizes[0], b_through_4])  # position 3: its own records, then the sweeps' by bytes
    assert out.getvalue() == b"a0\na0+\nb1\na3\nsweep host-a\nsweep host-b\nsweep host-c\n"
    merge.advance(4, sizes)  # the same bound again: nothing more
    merge.advance(parallel._FINAL, sizes)
    assert out.getvalue() == whole.getvalue()
    assert whole.getvalue() == b"a0\na0+\nb1\na3\nsweep host-a\nsweep host-b\nsweep host-c\nb4\na5\nb6\na7\n"


def test_the_merge_hands_the_disk_blocks_of_what_it_wrote_back(tmp_path: Path) -> None:
    """The jobs' files do not hold the run's output once more: each advance of the merge frees
    the disk blocks of the whole pages it has written (where the file system can: Linux's
    fallocate punching a hole), keeps the files' sizes, and what is left merges as before."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * (1 << 16))
    with open(probe, "r+b") as fh:
        if not parallel._punch(fh.fileno(), 0, 1 << 16):
            pytest.skip(f"the file system at {tmp_path} cannot punch holes: the jobs' files keep what is merged")
    pages = [b"%02d" % n + b"p" * 4000 + b"\n" for n in range(64)]
    a = _job_file(tmp_path / "a", [(n, pages[n]) for n in range(0, 64, 2)])
    b = _job_file(tmp_path / "b", [(n, pages[n]) for n in range(1, 64, 2)])
    sizes = [a.stat().st_size, b.stat().st_size]
    for path in (a, b):  # the files' blocks allocated now (a file system may put that off)
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
    allocated = [os.stat(path).st_blocks * 512 for path in (a, b)]
    assert min(allocated) >= 32 * 4003
    out = io.BytesIO()
    merge = parallel._Merge([a, b], out)
    merge.advance(48, sizes)  # three quarters of each file written
    assert out.getvalue() == b"".join(pages[:48])
    for path, before, taken, size in zip((a, b), allocated, merge.taken, sizes, strict=True):
        assert taken >= 24 * 4003
        assert os.stat(path).st_blocks * 512 <= before - (taken - taken % 4096) + 4096
        assert path.stat().st_size == size
    merge.advance(parallel._FINAL, sizes)
    assert out.getvalue() == b"".join(pages)


def test_a_job_writes_nothing_below_the_position_it_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the parent's merge while the jobs run rests on: once a job has published a
    position and its files' bytes (after every item here), every record it writes after them is
    at that position or later: a held first page let out by its bound, and a sweep's events,
    included. The job runs in this process, fed its batches through a pipe as the parent feeds it."""
    published: list[tuple[int, int, int]] = []
    publish = parallel._Published.publish

    def recording(self: parallel._Published, below: int) -> None:
        publish(self, below)
        published.append((self.out.filed, self.events.filed, below))

    monkeypatch.setattr(parallel._Published, "publish", recording)
    # This job's items at positions with gaps (the other jobs' items between): first pages held
    # past their bound of 3 (two let out at exactly the position the job published last), and
    # hosts unseen for 10,000 positions dropped at the sweeps.
    sites = [[sp.page for sp in make_site(f"held{n}.example", 3, seed=n, layout="docs")] for n in range(3)]
    items = [(0, sites[0][0]), (3, sites[1][0]), (6, sites[0][1]), (9, sites[2][0]), (10, sites[1][1]),
             (12, sites[2][1]), (15, sites[0][2]), (25_003, sites[1][2]), (25_010, sites[2][2])]
    params = EngineParams(pagelevel=dataclasses.replace(EngineParams().pagelevel, hold_first=3))
    policy = ExpiryPolicy(ttl_pages=10_000)
    spec = JobSpec(("-",), 2, params, "jsonl", OutputOptions(), run_pages, events=True, policy=policy,
                   publish_bytes=0)  # published after every item
    reader, writer = multiprocessing.Pipe(duplex=False)

    def feed() -> None:
        for message in ([(seq, page) for seq, page in items[:4]], [(seq, page) for seq, page in items[4:]], 25_020):
            parallel._write_all(writer.fileno(), parallel._frame(message))

    feeder = threading.Thread(target=feed)
    feeder.start()
    shared = multiprocessing.Array("q", 4)
    parallel._decide_share(spec, tmp_path, 0, shared, reader)
    feeder.join()
    out_path, events_path, _ = parallel._paths(tmp_path, 0)

    def records(path: Path) -> list[tuple[int, int, int]]:
        """(offset where the record ends, seq, index) of each record of a job's file."""
        data, at, found = path.read_bytes(), 0, []
        while at < len(data):
            seq, index, length = parallel._RECORD.unpack_from(data, at)
            at += parallel._RECORD.size + length
            found.append((at, seq, index))
        return found

    outs, events = records(out_path), records(events_path)
    assert len(outs) == 9 and any(seq not in dict(items) for _, seq, _ in outs)  # pages placed by their bound
    assert any(index == parallel._SWEEP and seq < 25_000 for _, seq, index in events)  # a sweep's drop events
    assert len(published) == len(items) + 1 and published[-1] == (outs[-1][0], events[-1][0], parallel._FINAL)
    assert [below for _, _, below in published[:-1]] == [seq for seq, _ in items]
    for out_bytes, event_bytes, below in published:
        for filed, found in ((out_bytes, outs), (event_bytes, events)):
            assert filed in {0} | {end for end, _, _ in found}  # whole records
            assert all(seq >= below for end, seq, _ in found if end > filed)
    assert shared[:] == [len(items), *published[-1]]


def _held_back(marker: str, pages: Iterable[Any], *args: Any) -> Any:
    """offline.run_pages in a job, with its 10th item held back until `marker` exists (the
    parent has merged records of the jobs while they run)."""

    def held(pages: Iterable[Any]) -> Iterable[Any]:
        for n, page in enumerate(pages):
            if n == 9:
                deadline = time.monotonic() + DEADLINE_SECONDS
                while not os.path.exists(marker) and time.monotonic() < deadline:
                    time.sleep(0.01)  # polling a condition with a deadline
            yield page

    return run_pages(held(pages), *args)


def test_the_parent_merges_while_the_jobs_run_and_writes_the_bytes_of_one(
    crawl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each job publishes after every item and holds its 10th back until the parent has merged
    some of the run's records (a marker file, made by the parent's merge): so records are
    merged while both jobs run, and the output and events are still the bytes of one job."""
    one, one_events = tmp_path / "one.jsonl", tmp_path / "one-events.jsonl"
    run([crawl], one, "--jobs", "1", "--events", str(one_events))
    marker = tmp_path / "merged"
    merged_early: list[int] = []
    advance = parallel._Merge.advance

    def watched(self: parallel._Merge, below: int, sizes: Any) -> None:
        before = sum(self.taken)
        advance(self, below, sizes)
        if below < parallel._FINAL and sum(self.taken) > before:
            merged_early.append(sum(self.taken) - before)
            marker.touch()

    monkeypatch.setattr(parallel._Merge, "advance", watched)
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(),
                   functools.partial(_held_back, str(marker)), events=True, publish_bytes=0)
    out, events = io.BytesIO(), io.BytesIO()
    run_jobs(spec, MemoryStore(), make_writer("jsonl", out, OutputOptions()), events, RunSummary())
    assert marker.exists() and merged_early  # records merged before every job had ended
    assert out.getvalue() == one.read_bytes()
    assert events.getvalue() == one_events.read_bytes()


def test_a_writer_that_fails_in_the_merge_raises_its_own_error(tmp_path: Path) -> None:
    """A write that fails during the merge (a full disk) is the error the run sees, even where
    the failed write's bytes are still held (its frame, in the traceback) when the merge lets
    go of the jobs' mapped files."""
    a = _job_file(tmp_path / "a", [(n, b"x" * 100) for n in range(0, 20, 2)])
    b = _job_file(tmp_path / "b", [(n, b"y" * 100) for n in range(1, 20, 2)])

    class FullDisk(io.BytesIO):
        def write(self, data: Any) -> int:
            if len(self.getvalue()) >= 500:
                raise OSError(28, "No space left on device")
            return super().write(data)

    with pytest.raises(OSError, match="No space left") as caught:
        _merge([a, b], FullDisk())
    assert caught.value.__context__ is None


def _as_put(message: Any) -> Any:
    """A message as a job read it, its lines made bytes (they are views of the job's buffer,
    valid until the next message is read)."""
    if not isinstance(message, list):
        return message
    return [(seq, item._replace(line=bytes(item.line)) if isinstance(item, Undecoded) else item)
            for seq, item in message]


def test_a_jobs_inbox_gives_each_message_as_put() -> None:
    """A job's inbox (`parallel._Inbox`, read by `parallel._get`): every message as put, in
    order, small and larger than the job's buffer or the pipe; each undecoded line a view of
    the job's buffer, not a copy; the pipe's end an EOFError."""
    import multiprocessing

    inbox = parallel._Inbox(multiprocessing.get_context("fork"))
    big = bytes(range(256)) * (12 << 10)  # 3 MB: past the 1 MB buffer and many pipe reads
    page = RawPage("https://a.example/p", "<p>caf\u00e9</p>", "a.example", "x:1", {"date": "2026"})
    dead = DeadPage("", "", "bad_json", "the line is not valid JSON", "x:2")
    messages: list[Any] = [
        [(0, Undecoded(b"x", "x:0", "a.example"))], 7, [],
        [(1, Undecoded(big, "x:1", "b.example")), (2, page), (3, dead), (4, Undecoded(b'{"a":1}', "x:4", "c.example"))],
        [(5, Undecoded(big[::-1], "x:5", "b.example"))], 4906,
    ]
    got: list[Any] = []
    views: list[bool] = []

    def read() -> None:
        for _ in messages:
            message = parallel._get(inbox.reader.fileno())
            if isinstance(message, list):
                views.extend(isinstance(item.line, memoryview) for _, item in message if isinstance(item, Undecoded))
            got.append(_as_put(message))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for message in messages:
        inbox.put(parallel._frame(message), DEADLINE_SECONDS)
    reader.join(DEADLINE_SECONDS)
    assert got == messages
    assert views == [True] * 4
    inbox.close()
    ended = parallel._Inbox(multiprocessing.get_context("fork"))
    ended.writer.close()  # the pipe's writing end gone, as when the parent dies
    with pytest.raises(EOFError):
        parallel._get(ended.reader.fileno())
    ended.close()


def test_an_inbox_whose_job_ended_ends_its_thread() -> None:
    """A job that ends (its inbox's reading end closed) makes the inbox's next write fail and
    its thread end, rather than fill the pipe and wait for ever; the parent then sees the job
    gone (`Jobs.check`)."""
    import multiprocessing

    inbox = parallel._Inbox(multiprocessing.get_context("fork"))
    inbox.put(parallel._frame([(0, Undecoded(b"x" * 100, "x:0", "a.example"))]), DEADLINE_SECONDS)
    assert inbox.thread is not None
    inbox.reader.close()  # the job's end, as the only reader
    inbox.put(parallel._frame([(1, Undecoded(b"y" * (1 << 20), "x:1", "a.example"))]), DEADLINE_SECONDS)
    inbox.thread.join(DEADLINE_SECONDS)
    assert not inbox.thread.is_alive()
    inbox.close()


def test_an_inbox_that_cannot_write_says_why() -> None:
    """An inbox thread that fails for another reason than its job's end keeps the error, and
    the next hand-over raises it (the job would otherwise wait for ever; `Jobs.check` raises
    it too)."""
    import multiprocessing

    inbox = parallel._Inbox(multiprocessing.get_context("fork"))
    inbox.put([object()], DEADLINE_SECONDS)  # no buffer: the thread's write fails
    assert inbox.thread is not None
    inbox.thread.join(DEADLINE_SECONDS)
    assert isinstance(inbox.error, TypeError)
    with pytest.raises(TypeError):
        inbox.put(parallel._frame(7), DEADLINE_SECONDS)
    inbox.close()


def test_dead_inputs_are_at_their_place(crawl: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run([crawl], out, "--jobs", "3")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 64
    # Before the bad line (the 10th item) go the outputs of the pages before it, but a host's
    # first page whose second page comes after it: held, it goes out just before its second.
    hosts = [json.loads(line)["host"] if line.startswith("{\"") else None
             for line in crawl.read_text(encoding="utf-8").splitlines()]
    second_at = {h: [i for i, x in enumerate(hosts) if x == h][1] for h in set(hosts) if h}
    held_past = sum(1 for h in hosts[:9] if h and hosts.index(h) < 9 < second_at[h])
    assert held_past == 5  # hosts 2 to 6 (7 hosts interleaved: their second pages after the bad line)
    assert [i for i, r in enumerate(records) if "error" in r] == [9 - held_past]
    assert records[9 - held_past]["error"] == "bad_json"
    # Each host's pages in input order: page_no counts up.
    by_host: dict[str, list[int]] = {}
    for r in records:
        if "error" not in r:
            by_host.setdefault(r["host"], []).append(r["page_no"])
    assert all(nos == sorted(nos) for nos in by_host.values())


def test_a_state_written_by_two_jobs_is_continued_as_one_jobs(tmp_path: Path) -> None:
    pages = _crawl(14, seed=5)
    first = write_jsonl(pages[:40], tmp_path / "first.jsonl")
    second = write_jsonl(pages[40:], tmp_path / "second.jsonl")
    outs: dict[str, bytes] = {}
    for name, jobs_first, jobs_second in (("one", "1", "1"), ("two-then-one", "2", "1"), ("two-then-three", "2", "3")):
        state = tmp_path / f"state-{name}"
        run([first], tmp_path / f"{name}-1.jsonl", "--state", str(state), "--jobs", jobs_first)
        run([second], tmp_path / f"{name}-2.jsonl", "--state", str(state), "--jobs", jobs_second)
        outs[name] = (tmp_path / f"{name}-1.jsonl").read_bytes() + (tmp_path / f"{name}-2.jsonl").read_bytes()
        assert not list(tmp_path.glob(".detemplate-jobs-*")), "the jobs' temporary folder is removed"
    assert outs["two-then-one"] == outs["one"]
    assert outs["two-then-three"] == outs["one"]
    # The second run continued the hosts' tables: page numbers go on from the first run.
    second_run = [json.loads(line) for line in (tmp_path / "two-then-one-2.jsonl").read_text().splitlines()]
    assert min(r["page_no"] for r in second_run) > 1


# `detemplate run` with the state made durable and whole-host expiry weighed every 10 records
# (not 10,000): in a process of its own, whose jobs are forked from it with these settings.
# With "--read" first, every job reads the input itself (JobSpec.feed=False).
_EXPIRY_RUN = (
    "import dataclasses, sys\n"
    "from detemplate import cli, offline, parallel\n"
    "from detemplate.state import expiry\n"
    "offline.FLUSH_EVERY_PAGES = expiry.Ledger.SWEEP_EVERY_PAGES = 10\n"
    "if sys.argv[1] == '--read':\n"
    "    start, sys.argv[1:] = parallel.start_jobs, sys.argv[2:]\n"
    "    parallel.start_jobs = lambda spec, *a, **k: start(dataclasses.replace(spec, feed=False), *a, **k)\n"
    "sys.exit(cli.main(sys.argv[1:]))\n"
)


def _state(path: Path) -> tuple[Any, ...]:
    """A state directory's clock, index entries (without the wall-clock time) and tables."""
    store = RocksStore(path, EngineParams().table)
    try:
        index = sorted((e.host, e.last_page, e.state_bytes, e.pages) for e in store.index())
        tables = sorted((host, table.to_bytes()) for host in store.hosts() if (table := store.get(host)))
        return store.ledger.clock, index, tables
    finally:
        store.close()


def test_whole_host_expiry_in_n_jobs_is_one_jobs(tmp_path: Path) -> None:
    """Hosts unseen for --host-ttl-pages leave the state at the same records in any number of
    jobs: a job weighs its own hosts and the run's state's hosts it stands for, the page clock
    is the input's records, the sweeps' events go where one job writes them; a state so
    written is continued by a run with any number of jobs."""
    sites = [make_site(f"wave{n}.example", 12, seed=20 + n, layout=("blog", "docs", "news")[n % 3]) for n in range(7)]
    # Three hosts, then four others for longer than the ttl, then the first three again.
    pages = [*interleave(*(s[:6] for s in sites[:3])), *interleave(*(s[:8] for s in sites[3:])),
             *interleave(*(s[6:] for s in sites[:3]))]
    halves = [write_jsonl(pages[:45], tmp_path / "first.jsonl"), write_jsonl(pages[45:], tmp_path / "second.jsonl")]
    unseen = re.compile(rb',"unseen_s":[0-9.e+-]+')
    results = {}
    for name, jobs in (("one", ("1", "1")), ("two", ("2", "2")), ("two-then-one", ("2", "1")),
                       ("one-then-three", ("1", "3")), ("two-reading", ("2", "2"))):
        state, outs = tmp_path / f"state-{name}", []
        read = ["--read"] if name.endswith("reading") else []
        for n, (part, j) in enumerate(zip(halves, jobs, strict=True)):
            out, events = tmp_path / f"{name}-{n}.jsonl", tmp_path / f"{name}-{n}.events.jsonl"
            subprocess.run([sys.executable, "-c", _EXPIRY_RUN, *read, "run", str(part), "-o", str(out), "--events",
                            str(events), "--state", str(state), "--host-ttl-pages", "15", "--jobs", j],
                           check=True, capture_output=True, timeout=DEADLINE_SECONDS)
            outs += [out.read_bytes(), unseen.sub(b"", events.read_bytes())]
        results[name] = (outs, _state(state))
    for name in ("two", "two-then-one", "one-then-three", "two-reading"):
        assert results[name] == results["one"], name
    # The expiry decided pages: the first wave went at the sweep after the first run's 40th
    # record (of 45), each unseen since its last page, and came back afresh in the second run.
    first_events = [json.loads(line) for line in results["one"][0][1].splitlines()]
    expired = {e["host"]: e["details"]["unseen_pages"] for e in first_events if e["type"] == "template.host_expired"}
    last = {p.page.host: n for n, p in enumerate(pages[:45], 1)}
    assert expired == {host: 40 - last[host] for host in ("wave0.example", "wave1.example", "wave2.example")}
    back = [json.loads(line) for line in results["one"][0][2].splitlines()]
    assert {r["host"]: r["page_no"] for r in reversed(back) if r["host"] == "wave0.example"} == {"wave0.example": 1}


def test_a_state_budget_in_n_jobs_is_shared_out(tmp_path: Path) -> None:
    """Each job keeps its hosts under its share of --state-budget-mb, the least recently seen
    of them first: the state stays under the budget, as each stream worker keeps its own."""
    crawl = write_jsonl(_crawl(10, seed=9), tmp_path / "crawl.jsonl")
    sizes = {}
    for jobs in ("1", "2"):
        state = tmp_path / f"state-{jobs}"
        run([crawl], tmp_path / f"out-{jobs}.jsonl", "--state", str(state), "--jobs", jobs)
        store = RocksStore(state, EngineParams().table)
        sizes[jobs] = {e.host: e.state_bytes for e in store.index()}
        store.close()
    assert sizes["1"] == sizes["2"]  # without a budget, the same hosts and sizes
    budget = sum(sizes["1"].values()) * 0.6
    events = tmp_path / "events.jsonl"
    state = tmp_path / "state-budget"
    run([crawl], tmp_path / "out-budget.jsonl", "--state", str(state), "--jobs", "2",
        "--state-budget-mb", str(budget / (1 << 20)), "--events", str(events))
    store = RocksStore(state, EngineParams().table)
    kept = {e.host: e.state_bytes for e in store.index()}
    assert sorted(store.hosts()) == sorted(kept)
    store.close()
    assert 0 < sum(kept.values()) <= budget
    dropped = [e for e in map(json.loads, events.read_text().splitlines()) if e["type"] == "template.host_expired"]
    assert {e["details"]["reason"] for e in dropped} == {"budget"}
    assert dropped and set(kept).isdisjoint(e["host"] for e in dropped)
    for index in (0, 1):  # within each job's share
        share = sum(size for host, size in kept.items() if job_of(host, 2) == index)
        assert share <= budget / 2


def _fail(pages: Iterable[RawPage | DeadPage], *args: Any, **kwargs: Any) -> Any:
    """A decide function that fails on the first page (a bug in a job)."""
    for _ in pages:
        raise RuntimeError("a bug in the engine")
    return RunSummary()


def test_a_failing_job_fails_the_run(crawl: Path) -> None:
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), _fail)
    out = io.BytesIO()
    with pytest.raises(JobFailedError, match="a bug in the engine"):
        run_jobs(spec, MemoryStore(), make_writer("jsonl", out, OutputOptions()), None, RunSummary())
    assert out.getvalue() == b""


# A process as `run` is when it starts its jobs (nothing open, no thread but its own), with
# two jobs' spec for the crawl in argv[1], forked where argv[2] is "fork".
_TWO_JOBS = """
import os, signal, sys
from detemplate import parallel
from detemplate.engine.params import EngineParams
from detemplate.io.formats import OutputOptions, make_writer
from detemplate.offline import RunSummary, run_pages
from detemplate.state.memory import MemoryStore

spec = parallel.JobSpec((sys.argv[1],), 2, EngineParams(), "jsonl", OutputOptions(), run_pages)
fork = sys.argv[2] == "fork"
"""
# ... deciding the crawl into argv[3]
_START_AND_RUN = _TWO_JOBS + """
summary = RunSummary()
with parallel.start_jobs(spec, fork=fork) as jobs, open(sys.argv[3], "wb") as out:
    assert jobs.fork is fork
    parallel.run_jobs(spec, MemoryStore(), make_writer("jsonl", out, OutputOptions()), None, summary, jobs=jobs)
print(summary.pages)
"""


@pytest.mark.parametrize("how", ["fork", "fork server"])
def test_jobs_forked_or_from_the_fork_server_write_the_bytes_of_one(crawl: Path, tmp_path: Path, how: str) -> None:
    # `run` forks its jobs where it can (parallel._can_fork), else starts them from a fork
    # server. Each way in a fresh process: this one may run threads (a fork would copy none).
    run([crawl], tmp_path / "one.jsonl", "--jobs", "1")
    out = tmp_path / "two.jsonl"
    done = subprocess.run([sys.executable, "-c", _START_AND_RUN, str(crawl), how, str(out)],
                          capture_output=True, text=True, timeout=DEADLINE_SECONDS)
    assert done.returncode == 0, done.stderr
    one = (tmp_path / "one.jsonl").read_bytes()
    assert out.read_bytes() == one
    assert int(done.stdout) == one.count(b"\n") == 64  # 63 pages and the bad line's dead letter


# ... starting them (they wait for their first batch), killing the second, seeing its pipe's end.
_KILL_THE_SECOND = _TWO_JOBS + """
with parallel.start_jobs(spec, fork=fork) as jobs:
    jobs.started()
    os.kill(jobs.processes[1].pid, signal.SIGKILL)
    jobs.processes[1].join()
    print(jobs.conns[1].poll(60.0))
"""


@pytest.mark.parametrize("how", ["fork", "fork server"])
def test_a_killed_jobs_pipe_ends_while_the_other_job_runs(crawl: Path, how: str) -> None:
    # A forked job holds what the parent held when it was forked: were every pipe made before
    # the first fork, the first job would hold the second's writing end, and the second's
    # death would not end its pipe (the run still saw it end, by its process).
    done = subprocess.run([sys.executable, "-c", _KILL_THE_SECOND, str(crawl), how],
                          capture_output=True, text=True, timeout=DEADLINE_SECONDS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


def test_no_job_is_forked_from_a_process_that_has_opened_rocksdb(tmp_path: Path) -> None:
    # RocksDB's flush and compaction threads outlive the database that started them; a job
    # forked after that would have none, and its own state's flush would wait for ever.
    # In a fresh process (this one may run other threads, which say no on their own).
    code = (
        "import sys; from detemplate import parallel; from detemplate.engine.params import EngineParams; "
        "from detemplate.state.rocks import RocksStore; print(parallel._can_fork()); "
        "RocksStore(sys.argv[1], EngineParams().table).close(); print(parallel._can_fork())"
    )
    fresh = subprocess.run([sys.executable, "-c", code, str(tmp_path / "state")],
                           capture_output=True, text=True, check=True, timeout=DEADLINE_SECONDS)
    assert fresh.stdout.split() == [str(sys.platform.startswith("linux")), "False"]
    # A run from the command line forks its jobs before it opens its state: they keep their own.
    pages = write_jsonl(_crawl(8, seed=3), tmp_path / "pages.jsonl")
    for jobs in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-m", "detemplate", "run", str(pages), "--output", str(tmp_path / f"out-{jobs}.jsonl"),
             "--state", str(tmp_path / f"state-{jobs}"), "--jobs", jobs],
            capture_output=True, text=True, timeout=DEADLINE_SECONDS,
        )
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "out-2.jsonl").read_bytes() == (tmp_path / "out-1.jsonl").read_bytes()


def _tell_gc(pages: Iterable[RawPage | DeadPage], *args: Any, **kwargs: Any) -> Any:
    """A decide function that says which thresholds the job's garbage collector has."""
    raise RuntimeError(f"collector thresholds {gc.get_threshold()}")


def test_a_job_collects_garbage_as_its_parent(crawl: Path) -> None:
    # The command line raises the first threshold (settings.tune_gc); the jobs come from a fork
    # server that started with the defaults, and take the parent's.
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), _tell_gc)
    saved = gc.get_threshold()
    gc.set_threshold(12_345, 9, 11)
    try:
        with pytest.raises(JobFailedError, match=r"collector thresholds \(12345, 9, 11\)"):
            run_jobs(spec, MemoryStore(), make_writer("jsonl", io.BytesIO(), OutputOptions()), None, RunSummary())
    finally:
        gc.set_threshold(*saved)


def _disk_full(pages: Iterable[RawPage | DeadPage], *args: Any, **kwargs: Any) -> Any:
    """A decide function whose write fails as on a full disk."""
    raise OSError(28, "No space left on device")


def test_a_job_whose_write_fails_tells_the_reason_in_a_line(crawl: Path) -> None:
    # Run from the fork server: a module-level function the job can find by name.
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), _disk_full)
    with pytest.raises(JobFailedError, match=r"^job \d of 2 failed: a write in .* failed: No space left on device$"):
        run_jobs(spec, MemoryStore(), make_writer("jsonl", io.BytesIO(), OutputOptions()), None, RunSummary())


def test_a_store_that_cannot_be_closed_does_not_hide_the_runs_own_reason() -> None:
    class Full(MemoryStore):
        def close(self) -> None:
            raise StateError("cannot write the state at st: IO error: No space left on device")

    close = _closing(Full())
    assert close(JobFailedError, JobFailedError("job 1 of 2 failed: ..."), None) is False  # the job's reason goes on
    with pytest.raises(StateError, match="No space left"):
        close(None, None, None)  # alone, the state's is the reason


def _children(parent: int) -> list[tuple[int, bytes]]:
    """The processes whose parent is `parent`, with their command lines."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            out.append((int(entry.name), cmdline))
    return out


def _job_pids(run: int) -> list[int]:
    """The job processes of the run with process id `run`: forked from it, or from its fork server."""
    pids = []
    for pid, cmdline in _children(run):
        if b"forkserver" in cmdline:
            pids.extend(child for child, _ in _children(pid))
        elif b"resource_tracker" not in cmdline:
            pids.append(pid)
    return pids


def _run_and_act(cmd: list[str], act: Callable[[subprocess.Popen[bytes], list[int]], None]) -> tuple[int, str]:
    """Start a run of two jobs, `act` on it as soon as both jobs exist; its exit code and stderr."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        jobs: list[int] = []
        while len(jobs) < 2 and proc.poll() is None and time.monotonic() < deadline:
            jobs = _job_pids(proc.pid)
        assert len(jobs) == 2, "the run started its two jobs"
        act(proc, jobs)
        _, err = proc.communicate(timeout=DEADLINE_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode()


def test_a_killed_job_fails_the_run_and_leaves_the_state_usable(tmp_path: Path) -> None:
    pages = _crawl(30, seed=9)
    first = write_jsonl(pages[:60], tmp_path / "first.jsonl")
    rest = write_jsonl(pages[60:], tmp_path / "rest.jsonl")
    state = tmp_path / "state"
    run([first], tmp_path / "first-out.jsonl", "--state", str(state), "--jobs", "1")
    store = RocksStore(state, EngineParams().table)
    before = {host: store.get(host).to_bytes() for host in store.hosts()}  # type: ignore[union-attr]
    store.close()

    cmd = [sys.executable, "-m", "detemplate", "run", str(rest), "--output", str(tmp_path / "out.jsonl"),
           "--state", str(state), "--jobs", "2"]

    def kill_one(proc: subprocess.Popen[bytes], jobs: list[int]) -> None:
        # Freeze both jobs as soon as they exist (they cannot have finished: they are still
        # starting), then kill one and let the other go on.
        for pid in jobs:
            os.kill(pid, signal.SIGSTOP)
        os.kill(jobs[0], signal.SIGKILL)
        os.kill(jobs[1], signal.SIGCONT)

    code, err = _run_and_act(cmd, kill_one)
    assert code == 1, err
    assert "ended before it finished (killed by SIGKILL)" in err
    assert not list(tmp_path.glob(".detemplate-jobs-*")), "the jobs' temporary folder is removed"

    store = RocksStore(state, EngineParams().table)
    after = {host: store.get(host).to_bytes() for host in store.hosts()}  # type: ignore[union-attr]
    store.close()
    assert after == before  # nothing of the failed run reached the state
    run([rest], tmp_path / "again.jsonl", "--state", str(state), "--jobs", "2")  # and a run continues it
    assert (tmp_path / "again.jsonl").read_bytes().count(b"\n") == len(pages) - 60


def _gone(pid: int) -> bool:
    """True when process `pid` has ended (or is a zombie waiting to be reaped)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize(("how", "said", "exit_code"), [
    (signal.SIGINT, "interrupted", 130),  # Ctrl-C
    (signal.SIGTERM, "terminated", 143),  # a process manager's stop (systemd, Kubernetes, `timeout`)
])
def test_ctrl_c_or_sigterm_stops_the_jobs_and_says_so(tmp_path: Path, how: int, said: str, exit_code: int) -> None:
    pages = write_jsonl(_crawl(120, seed=11), tmp_path / "pages.jsonl")  # 900 pages: seconds of work
    state = tmp_path / "state"
    # Ctrl-C's KeyboardInterrupt even where this test's own process ignores SIGINT (a job in
    # the background of a shell), which a child would inherit.
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from detemplate.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    cmd = [sys.executable, "-c", code, "run", str(pages), "--output", str(tmp_path / "out.jsonl"),
           "--state", str(state), "--jobs", "2"]
    jobs: list[int] = []

    def interrupt(proc: subprocess.Popen[bytes], started: list[int]) -> None:
        jobs.extend(started)
        proc.send_signal(how)

    code, err = _run_and_act(cmd, interrupt)
    assert code == exit_code, err
    said_merged = re.search(
        said + r": the jobs stopped; the output holds the first ([\d,]+) records, those merged so far; "
        r"the state is as it was",
        err,
    )
    assert said_merged is not None, err
    out = tmp_path / "out.jsonl"  # (none where the interrupt came before the run opened it)
    written = out.read_bytes().count(b"\n") if out.exists() else 0
    assert written == int(said_merged.group(1).replace(",", ""))
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not all(_gone(pid) for pid in jobs) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition with a deadline
    assert all(_gone(pid) for pid in jobs), "no job outlives the run"
    assert not list(tmp_path.glob(".detemplate-jobs-*")), "the jobs' temporary folder is removed"
    store = RocksStore(state, EngineParams().table)
    assert list(store.hosts()) == []  # nothing of the interrupted run reached the state
    store.close()


def test_a_killed_run_leaves_no_job_behind_and_the_next_run_removes_its_folder(tmp_path: Path) -> None:
    # SIGKILL (or the out-of-memory killer) leaves the run no way to stop its jobs: the kernel
    # ends them with it (parallel._end_with_parent), and their folder, which nothing could
    # remove, goes with the next run beside the same state.
    pages = write_jsonl(_crawl(120, seed=12), tmp_path / "pages.jsonl")
    state = tmp_path / "state"
    cmd = [sys.executable, "-m", "detemplate", "run", str(pages), "--output", str(tmp_path / "out.jsonl"),
           "--state", str(state), "--jobs", "2"]
    jobs: list[int] = []

    def kill(proc: subprocess.Popen[bytes], started: list[int]) -> None:
        jobs.extend(started)
        proc.kill()

    code, _err = _run_and_act(cmd, kill)
    assert code == -signal.SIGKILL
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not all(_gone(pid) for pid in jobs) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a condition with a deadline
    assert all(_gone(pid) for pid in jobs), "no job outlives a killed run"
    left = list(tmp_path.glob(".detemplate-jobs-*"))
    assert len(left) == 1  # nothing could remove it

    done = subprocess.run([*cmd[:-2], "--jobs", "1"], capture_output=True, check=True)
    assert f"removed {left[0]}, the jobs' folder of an earlier run that was killed" in done.stderr.decode()
    assert not list(tmp_path.glob(".detemplate-jobs-*"))


def test_only_the_folders_no_run_holds_are_removed(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    # A killed run's folder: its lock file names the run, and nothing holds the lock.
    killed = tmp_path / ".detemplate-jobs-killed"
    killed.mkdir()
    (killed / parallel._LOCK_NAME).write_text("12345\n")
    (killed / "out-0.bin").write_bytes(b"x" * 100)
    # A running run's: its lock held (by another process: flock locks are per open file).
    running = tmp_path / ".detemplate-jobs-running"
    running.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[2]); from detemplate import parallel; "
         "from pathlib import Path; parallel._hold(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()",
         str(running), str(Path(__file__).resolve().parents[1])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        # One being made: no lock file yet, or one with no process id in it yet.
        making = tmp_path / ".detemplate-jobs-making"
        making.mkdir()
        empty = tmp_path / ".detemplate-jobs-empty"
        empty.mkdir()
        (empty / parallel._LOCK_NAME).write_bytes(b"")
        assert parallel.remove_abandoned(state) == [killed]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            ".detemplate-jobs-empty", ".detemplate-jobs-making", ".detemplate-jobs-running"]
    finally:
        holder.communicate(b"")
    assert parallel.remove_abandoned(state) == [running]  # its run has ended


def _state_tables(path: Path) -> dict[str, bytes]:
    """Every host's table in the state directory `path`, as bytes."""
    store = RocksStore(path, EngineParams().table)
    try:
        return {host: store.get(host).to_bytes() for host in store.hosts()}  # type: ignore[union-attr]
    finally:
        store.close()


def _arriving_hosts(hosts: int, pages: int, spread: int) -> list[Any]:
    """`hosts` sites of `pages` pages each, host h's page j at h + spread * j: a new host about
    every record, so that at any point some `spread` hosts wait for their second page (their
    first pages held: engine/firstpages.py)."""
    layouts = ("blog", "docs", "news")
    keyed = [
        (h + spread * j, h, j, page)
        for h in range(hosts)
        for j, page in enumerate(make_site(f"arriving{h}.example", pages, seed=h, layout=layouts[h % 3]))
    ]
    return [page for *_, page in sorted(keyed)]


@pytest.mark.parametrize(("how", "said", "exit_code"), [
    (signal.SIGINT, "interrupted", 130), (signal.SIGTERM, "terminated", 143)])
def test_a_stopped_run_of_one_job_wrote_what_a_run_of_the_pages_it_read_writes(
    tmp_path: Path, how: int, said: str, exit_code: int
) -> None:
    # The whole command: the output, events and RocksDB state are those of a run over the
    # records it read, its held first pages written as at the input's end, and it says how many.
    # The pages come on standard input, more than the run reads ahead: while some are still to
    # be written it is busy with those it has, and the signal is sent while it is stopped
    # (SIGSTOP), in a page or in the reader (the page's own boundary, for certain:
    # test_an_interrupt_in_the_middle_of_a_page_waits_for_it).
    data = write_jsonl(_arriving_hosts(450, 4, 25), tmp_path / "pages.jsonl").read_bytes()  # 5.5 MB
    lines = data.splitlines(keepends=True)
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from detemplate.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    out, events, state = tmp_path / "out.jsonl", tmp_path / "events.jsonl", tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", "-", "--output", str(out), "--events", str(events), "--state", str(state)],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    written = [0]

    def feed() -> None:  # the whole input, a line at a time; the pipe left open: the run waits for more
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            for line in lines:
                proc.stdin.write(line)
                proc.stdin.flush()
                written[0] += len(line)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while written[0] < 4_000_000 and feeder.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)  # polling a condition with a deadline
        assert feeder.is_alive(), "the run read the whole input before it was stopped"
        proc.send_signal(signal.SIGSTOP)
        proc.send_signal(how)
        proc.send_signal(signal.SIGCONT)
        err = proc.stderr.read().decode() if proc.stderr is not None else ""
        proc.wait(timeout=DEADLINE_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        if proc.stderr is not None:
            proc.stderr.close()
        feeder.join(DEADLINE_SECONDS)
    assert proc.returncode == exit_code, err
    told = re.search(said + r": the output, events and state hold the input's first ([\d,]+) records", err)
    assert told is not None, err
    read = int(told.group(1).replace(",", ""))
    assert 0 < read < len(lines)

    prefix = tmp_path / "prefix.jsonl"
    prefix.write_bytes(b"".join(lines[:read]))
    run([prefix], tmp_path / "again.jsonl", "--events", str(tmp_path / "again-events.jsonl"), "--state",
        str(tmp_path / "again-state"))
    assert out.read_bytes().count(b"\n") == read  # every page read, the held first pages too
    assert out.read_bytes() == (tmp_path / "again.jsonl").read_bytes()
    assert events.read_bytes() == (tmp_path / "again-events.jsonl").read_bytes()
    assert _state_tables(state) == _state_tables(tmp_path / "again-state") != {}


@pytest.mark.parametrize("nth", [30, 61, 95])
def test_an_interrupt_in_the_middle_of_a_page_waits_for_it(nth: int) -> None:
    # The signal is sent from inside a page's decision (its host's table being fetched), so
    # CPython runs the handler there: the page is finished first, and the run's output, events
    # and tables are those of a run over the pages it read (held first pages included).
    pages = [sp.page for sp in _arriving_hosts(60, 3, 12)]

    class Signalling(MemoryStore):
        gets = 0

        def get(self, host: str) -> Any:
            self.gets += 1
            if self.gets == nth:
                os.kill(os.getpid(), signal.SIGTERM)
            return super().get(host)

    out, events, summary = io.BytesIO(), io.BytesIO(), RunSummary()
    store = Signalling()
    with interrupts.interrupts((signal.SIGTERM,)), pytest.raises(interrupts.Terminated):
        run_pages(iter(pages), store, EngineParams(), out, events, summary=summary)
    read = summary.pages
    assert 0 < read < len(pages) and store.gets >= nth
    again_out, again_events, again = io.BytesIO(), io.BytesIO(), MemoryStore()
    run_pages(iter(pages[:read]), again, EngineParams(), again_out, again_events)
    assert out.getvalue().count(b"\n") == read  # every page read is out, held first pages too
    assert out.getvalue() == again_out.getvalue()
    assert events.getvalue() == again_events.getvalue()
    tables = [{h: s.get(h).to_bytes() for h in s.hosts()} for s in (store, again)]  # type: ignore[union-attr]
    assert tables[0] == tables[1]


def test_an_interrupt_waits_for_the_merges_writes(
    crawl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The signal comes from inside the parent's Parquet write (a row group's): the merge that
    # writes finishes first, so the file, closed as `run` closes it, holds every record the
    # run says it merged. A write cut in two left pyarrow's writer unable to close the file
    # (no footer: not a Parquet file), or rows counted that were not written.
    from detemplate.io import formats

    monkeypatch.setattr(formats, "PARQUET_ROWS", 4)
    flush = formats.ParquetWriter._flush
    signalled = []

    def signalling_flush(self: Any) -> None:
        if not signalled:
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        flush(self)

    monkeypatch.setattr(formats.ParquetWriter, "_flush", signalling_flush)
    spec = JobSpec((str(crawl),), 2, EngineParams(), "parquet", OutputOptions(), run_pages)
    path = tmp_path / "out.parquet"
    with open(path, "wb") as out:
        writer = make_writer("parquet", out, OutputOptions())
        with interrupts.interrupts((signal.SIGTERM,)), parallel.start_jobs(spec, fork=False) as jobs:
            with pytest.raises(interrupts.Terminated):
                run_jobs(spec, MemoryStore(), writer, None, RunSummary(), None, jobs)
            merged = jobs.merges[0].records
        writer.close()
    assert signalled and merged > 0
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == merged
    # ... and they are the first records of the whole run's output, in its order.
    run([crawl], tmp_path / "whole.jsonl", "--jobs", "1")
    whole = [json.loads(line) for line in (tmp_path / "whole.jsonl").read_text().splitlines()]
    assert [(r["url"], r.get("error")) for r in rows] == [(r["url"], r.get("error")) for r in whole[:merged]]


def test_an_interrupt_in_the_copy_of_the_tables_waits_for_it(
    crawl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run's last step: every record is out, and the jobs' tables go into the state. The
    # signal comes from inside that copy; the copy finishes first, so the state is the same
    # as an uninterrupted run's (it held some hosts' new tables and not others').
    run([crawl], tmp_path / "whole.jsonl", "--state", str(tmp_path / "whole-state"), "--jobs", "2")
    take_from = RocksStore.take_from
    signalled = []

    def signalling_take_from(self: RocksStore, other: RocksStore) -> None:
        if not signalled:
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        take_from(self, other)

    monkeypatch.setattr(RocksStore, "take_from", signalling_take_from)
    state = tmp_path / "state"
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), run_pages, state=str(state))
    out = io.BytesIO()
    with interrupts.interrupts((signal.SIGTERM,)), parallel.start_jobs(spec, fork=False) as jobs:
        store = RocksStore(state, EngineParams().table)
        try:
            with pytest.raises(interrupts.Terminated):
                run_jobs(spec, store, make_writer("jsonl", out, OutputOptions()), None, RunSummary(), None, jobs)
        finally:
            store.close()
        assert jobs.copy == "copied"
    assert signalled
    assert out.getvalue() == (tmp_path / "whole.jsonl").read_bytes()
    assert _state_tables(state) == _state_tables(tmp_path / "whole-state") != {}


@pytest.mark.parametrize(("signals", "said"), [
    (1, "after the run's last step: the output, events and state are whole"),
    # A second interrupt goes through: the user insists.
    (2, "in the run's last step: every record is out; the state holds this run's tables of the hosts copied "
        "before the interrupt"),
])
def test_a_run_interrupted_in_its_copy_of_the_tables_says_what_it_holds(
    crawl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    signals: int, said: str,
) -> None:
    take_from = RocksStore.take_from
    sent = []

    def signalling_take_from(self: RocksStore, other: RocksStore) -> None:  # once a job
        if len(sent) < signals:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
        take_from(self, other)

    monkeypatch.setattr(RocksStore, "take_from", signalling_take_from)
    code = main(["run", str(crawl), "--output", str(tmp_path / "out.jsonl"), "--state", str(tmp_path / "state"),
                 "--jobs", "2"])
    assert code == 143
    assert f"terminated: {said}" in capsys.readouterr().err


def test_ctrl_c_while_the_jobs_folder_is_removed_still_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a loaded machine: Ctrl-C that lands as the run removes its jobs' folder (its
    # last step) left the folder half removed. The removal finishes, then the interrupt goes on.
    work = tmp_path / ".detemplate-jobs-x"
    (work / "0-state").mkdir(parents=True)
    (work / "0-state" / "CURRENT").write_bytes(b"x")
    real = shutil.rmtree
    calls = []

    def interrupted_once(path: Path, ignore_errors: bool = False) -> None:
        calls.append(path)
        if len(calls) == 1:
            real(path / "0-state", ignore_errors=ignore_errors)  # part of the folder, then Ctrl-C
            raise KeyboardInterrupt
        real(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(parallel.shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        parallel.remove_work(work)
    assert len(calls) == 2 and not work.exists()


def test_ctrl_c_while_the_jobs_start_stops_every_job_they_start(crawl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by a loaded machine: Ctrl-C that lands while the parent waits for its jobs to be
    # started left a job running past the run, writing into the folder being removed. On
    # CPython 3.11 a Thread.join that KeyboardInterrupt interrupts marks the thread stopped while
    # it runs, so the join in `stop` returned before the starter had started the last job.
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), run_pages)
    gate = threading.Event()
    finished = threading.Event()
    start_processes = parallel.Jobs._start_processes

    def held_at_the_gate(self: parallel.Jobs) -> None:
        try:
            gate.wait()  # the fork server is slow to start (a loaded machine)
            start_processes(self)
        finally:
            finished.set()

    monkeypatch.setattr(parallel.Jobs, "_start_processes", held_at_the_gate)
    jobs = parallel.Jobs(spec, crawl.parent)
    processes = []
    # Ctrl-C's KeyboardInterrupt even where this process ignores SIGINT (pytest run in the
    # background of a shell, which starts it with SIGINT ignored): else the interrupt below
    # never comes and `started` waits for ever.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        jobs.start()
        processes = list(jobs.processes)
        # A deadline: should no interrupt come, the starter goes on and the test fails, not hangs.
        watchdog = threading.Timer(DEADLINE_SECONDS, gate.set)
        watchdog.start()
        with pytest.raises(KeyboardInterrupt):
            # Ctrl-C for the main thread while it waits on the starter (sent from a timer, so
            # that it interrupts the wait itself)
            threading.Timer(0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
            jobs.started()
        watchdog.cancel()
        threading.Timer(0.3, gate.set).start()  # the starter goes on once `stop` waits for it
        jobs.stop()
        assert all(p.pid is not None for p in processes), "`stop` waited for the starter to start every job"
        assert not any(p.is_alive() for p in processes), "no job outlives `stop`"
    finally:
        signal.signal(signal.SIGINT, handler)
        gate.set()
        finished.wait(DEADLINE_SECONDS)
        for p in processes:
            if p.pid is not None and p.is_alive():
                p.kill()
                p.join()


def _sized(path: Path, size: int) -> str:
    with open(path, "wb") as fh:
        fh.truncate(size)  # sparse: the size without the bytes
    return str(path)


def test_jobs_that_cannot_work_are_refused_or_one(tmp_path: Path) -> None:
    big = _sized(tmp_path / "a.jsonl", parallel.SMALL_INPUT_BYTES)
    assert resolve_jobs(None, ["-"]) == 1
    assert resolve_jobs(None, [big]) == len(os.sched_getaffinity(0))
    assert resolve_jobs(3, [big]) == 3
    for asked, inputs in ((2, ["-"]), (0, [big])):
        with pytest.raises(ConfigError):
            resolve_jobs(asked, inputs)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: every run is one job")
def test_small_inputs_run_in_one_job_unless_asked(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    limit = parallel.SMALL_INPUT_BYTES
    small = _sized(tmp_path / "small.jsonl", limit - 1)
    assert resolve_jobs(None, [small]) == 1
    assert resolve_jobs(2, [small]) == 2
    assert resolve_jobs(None, [small, _sized(tmp_path / "b.warc", 1)]) == cores  # the inputs add up
    assert resolve_jobs(None, [str(tmp_path / "missing.jsonl")]) == 1  # the reader tells what is wrong
    # gzip counts as the JSONL or WARC it inflates to, about five times its size.
    assert resolve_jobs(None, [_sized(tmp_path / "c.jsonl.gz", -(-limit // 5))]) == cores
    assert resolve_jobs(None, [_sized(tmp_path / "d.warc.gz", limit // 5 - 1)]) == 1
    folder = tmp_path / "pages"
    (folder / "sub").mkdir(parents=True)
    _sized(folder / "a.html", limit // 2)
    _sized(folder / "crawl.warc", limit)  # not read from a folder: not counted
    assert resolve_jobs(None, [str(folder)]) == 1
    _sized(folder / "sub" / "b.html", limit // 2)
    assert resolve_jobs(None, [str(folder)]) == cores


def test_parquet_of_n_jobs_is_the_file_of_one(crawl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Row groups of PARQUET_ROWS rows (made by this process's writer): 10 puts 7 in the file.
    monkeypatch.setattr("detemplate.io.formats.PARQUET_ROWS", 10)
    files = outputs_by_jobs([crawl], tmp_path, ".parquet")
    assert files[2] == files[1] and files[3] == files[1]
    assert pq.ParquetFile(tmp_path / "out-2.parquet").num_row_groups == 7
    table = pq.read_table(tmp_path / "out-2.parquet")
    # The bad line after 4 outputs: see test_dead_inputs_are_at_their_place.
    assert table.num_rows == 64 and table.column("error").to_pylist()[4] == "bad_json"


def test_the_host_count_is_exact_then_estimated_in_bounded_memory() -> None:
    small = HostCount(exact_limit=1000)
    for n in range(800):
        small.add(f"h{n % 400}.example")
    assert small.exact and len(small) == 400
    big = HostCount(exact_limit=1000)
    for n in range(200_000):
        big.add(f"host{n}.example")
    assert not big.exact  # past the limit: 16 KB of registers, no names
    assert abs(len(big) - 200_000) < 0.03 * 200_000
    # Jobs' counts joined: a union (hosts both saw count once), exact or estimated.
    halves = [HostCount(exact_limit=1000), HostCount(exact_limit=1000)]
    for n in range(200_000):
        halves[n % 2].add(f"host{n}.example")
    halves[0].update(halves[1])
    assert len(halves[0]) == len(big)  # the same registers as one count of every host
    again = HostCount(exact_limit=1000)
    for n in range(600):
        again.add(f"host{n}.example")
    other = HostCount(exact_limit=1000)
    for n in range(300, 900):
        other.add(f"host{n}.example")
    again.update(other)
    assert again.exact and len(again) == 900
    other_big = HostCount(exact_limit=1000)
    for n in range(100):
        other_big.add(f"host{n}.example")
    big.update(other_big)  # hosts already counted: the estimate does not move
    assert len(big) == len(halves[0])


def _tell_blas(pages: Iterable[RawPage | DeadPage], *args: Any, **kwargs: Any) -> Any:
    """A decide function that says how many threads the job's BLAS has."""
    raise RuntimeError(f"BLAS threads {blas.threads()}")


@pytest.mark.skipif(blas.threads() is None, reason="numpy's BLAS here is not an OpenBLAS this process can see")
@pytest.mark.parametrize("threads", [1, 2])
def test_a_job_runs_as_many_blas_threads_as_its_parent(crawl: Path, threads: int) -> None:
    # The command line sets one BLAS thread (settings.tune_blas); the jobs come from a fork
    # server that loaded numpy afresh, with a thread a core, and take the parent's count.
    saved = blas.threads()
    assert saved is not None
    blas.set_threads(threads)
    spec = JobSpec((str(crawl),), 2, EngineParams(), "jsonl", OutputOptions(), _tell_blas)
    try:
        with pytest.raises(JobFailedError, match=rf"BLAS threads {threads}\b"):
            run_jobs(spec, MemoryStore(), make_writer("jsonl", io.BytesIO(), OutputOptions()), None, RunSummary())
    finally:
        blas.set_threads(saved)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux), whose writes fail: disk full")
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("full", ["--output", "--events"])
def test_a_write_that_fails_is_told_and_the_run_ends(
    crawl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: str, full: str
) -> None:
    # The disk full: the reason, not a traceback (nor a second one when the file is closed).
    args = {"--output": str(tmp_path / "out.jsonl"), "--events": str(tmp_path / "events.jsonl"), full: "/dev/full"}
    code = main(["run", str(crawl), *[part for pair in args.items() for part in pair], "--jobs", jobs])
    assert code == 1
    err = capsys.readouterr().err
    assert "detemplate run: a write failed: No space left on device; the output holds what was written before it" in err
    assert "Traceback" not in err


def test_an_output_that_cannot_be_made_is_told(crawl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["run", str(crawl), "--output", str(tmp_path / "file" / "out.jsonl")]) == 2
    assert f"detemplate run: cannot write {tmp_path / 'file' / 'out.jsonl'}: " in capsys.readouterr().err
