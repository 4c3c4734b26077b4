"""`detemplate bench-stream`: one worker on a fresh local broker, against the offline engine.

In one run, on the same pages in the same order:
  1. offline: what `run` does with each record, without reading or writing files: the
     record's JSON decoded (`decode_record`, of the very bytes the worker is sent),
     `process_pages` over a MemoryStore (each host's first page held for its second), the clean record encoded; pages/s;
  2. a fresh Tansu broker with the topics, all pages produced to pages.raw;
  3. one `detemplate worker` process; pages/s from its first to its last clean page
     (as a consumer sees them), and the outputs checked byte-equal to the offline ones;
  4. the state changelog: records and bytes per page, snapshot sizes, local RocksDB size;
  5. recovery: SIGKILL the worker, restart it (on its own RocksDB directory, then on an
     empty one, which must restore everything from the changelog) and time until one new
     page of every host is out.

The machine is shared: rates vary from run to run; run it twice before believing a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.firstpages import process_pages
from ..engine.model import DeadPage, RawPage
from ..engine.params import EngineParams
from ..engine.pipeline import process_page
from ..io import codec
from ..io.sources import decode_record
from ..settings import StreamSettings, env_for
from ..state.changelog import record_kind
from ..state.memory import MemoryStore
from ..stream.outputs import as_published

DEFAULT_CORPUS = "../shared/corpora/site-antsr-pkgdown/pages.jsonl.gz"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench-stream",
        help="benchmark one stream worker on a fresh local broker against the offline rate",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--corpus", action="append", help=f"JSONL(.gz) pages (repeatable; default {DEFAULT_CORPUS})")
    p.add_argument("--hosts", type=int, default=8, help="copies of the corpus, each under its own host (default 8)")
    p.add_argument("--rounds", type=int, default=1,
                   help="times each host sees its pages (new URLs each round), to grow hosts to thousands of pages")
    p.add_argument("--one-host", action="store_true",
                   help="put all pages of all corpora of one copy under one host (a host with many templates)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--snapshot-every", type=int, default=64)
    p.add_argument("--compression", default="", help="the worker's producer compression (lz4, zstd, ...; default none)")
    p.add_argument("--no-recovery", action="store_true", help="skip the SIGKILL recovery measurement")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (worker logs)")
    p.set_defaults(func=_main)


@dataclass
class Corpus:
    pages: list[RawPage]
    hosts: list[str]


def load_corpus(paths: Sequence[str], hosts: int, rounds: int, one_host: bool = False) -> Corpus:
    from ..io.sources import iter_inputs

    base = [p for p in iter_inputs(paths) if isinstance(p, RawPage)]
    by_host: dict[str, list[RawPage]] = defaultdict(list)
    for p in base:
        by_host["merged" if one_host else p.host].append(p)
    streams = []
    names = []
    for i in range(hosts):
        for host, pages in by_host.items():
            name = f"c{i}.{host}"
            names.append(name)
            seq: list[RawPage] = []
            for r in range(rounds):
                suffix = "" if r == 0 else f"#r{r}"
                seq.extend(RawPage(p.url + suffix, p.html, name, p.source) for p in pages)
            streams.append(seq)
    # A crawl interleaves hosts: round-robin over them.
    out = [s[j] for j in range(max((len(s) for s in streams), default=0)) for s in streams if j < len(s)]
    return Corpus(out, names)


def same_speed_ratio(worker_ms: float, worker_decide_ms: float, offline_ms: float, offline_decide_ms: float) -> float:
    """The worker's CPU a page against offline's, both at the speed the engine ran inside the worker.

    The plain ratio (offline's CPU a page over the worker's) compares two passes minutes apart on
    a machine whose speed moves between them, by as much as the ratio itself (one engine, the same
    pages: 0.55x and 0.90x in two runs of one evening). Offline is the engine plus its own small
    costs (the record's JSON decoded, the clean record encoded); the worker is the engine plus its
    own (the message's JSON decoded, the state records, the clean record encoded, the sends, Faust
    and aiokafka). Taking the engine's CPU a page from inside
    the worker for both leaves the two own costs to compare, each measured in its own pass:
    (worker's decide + offline's own) / worker's. An engine slowed inside the worker by the
    worker's other work (caches) counts as the engine's here, and as the worker's in the plain ratio.
    """
    if worker_ms <= 0:
        return float("nan")
    return (worker_decide_ms + max(0.0, offline_ms - offline_decide_ms)) / worker_ms


def offline_pass(pages: list[RawPage], params: EngineParams) -> tuple[float, dict[str, bytes], dict[str, Any]]:
    """Pages/s of `run`'s work on a record (decode, process_pages, codec); each URL's clean record;
    table figures (and the CPU a page of the engine alone, the engine's share, as the worker
    measures its own, and of the decode).

    Both sides start from the record's bytes: `run` reads each JSONL line through
    `decode_record`, as the worker reads each message, so the decode is in both (until
    2026-11-28 offline started from decoded pages and only the worker's figure held it:
    `offline_decode_cpu_ms_per_page` says how much that was). `run`'s file reading, its
    decompression and its writes are left out; measured, the pass costs what `run` costs a
    page (docs/stream.md, "Both sides from the record's bytes")."""
    from ..stream.kafka_io import encode_raw  # aiokafka's import: only where a broker is used

    raws = [encode_raw(page) for page in pages]  # the worker's messages, made before the clock starts
    store = MemoryStore()
    out: dict[str, bytes] = {}
    distinct: dict[str, set[int]] = defaultdict(set)
    max_entries: dict[str, int] = defaultdict(int)
    t0 = time.perf_counter()
    c0 = time.process_time()
    decode_s = 0.0

    def decoded() -> Iterator[RawPage]:
        nonlocal decode_s
        for n, raw in enumerate(raws):
            d0 = time.thread_time()
            page = decode_record(raw, f"offline:{n}")
            decode_s += time.thread_time() - d0
            if isinstance(page, DeadPage):
                raise ValueError(f"offline: page {n} does not decode: {page.reason}: {page.detail}")
            yield page

    encode_s = 0.0
    c1 = time.thread_time()
    for item in process_pages(decoded(), store, params):
        e0 = time.thread_time()
        page, outcome = item.page, item.outcome
        if outcome.clean is not None:
            out[page.url + "\x00" + page.host] = codec.encode_clean(outcome.clean)
            for e in outcome.events:
                codec.encode_event(e)
        encode_s += time.thread_time() - e0
    decide_s = time.thread_time() - c1 - decode_s - encode_s  # the engine's alone, as the worker times its own
    dt = time.perf_counter() - t0
    cpu_ms = (time.process_time() - c0) * 1000 / len(pages)
    # Second pass, untimed: how big the tables get, against the segments ever seen.
    store2 = MemoryStore()
    for page in pages:
        outcome = process_page(page, store2, params)
        distinct[page.host].update(outcome.applied)
        table = store2.get(page.host)
        if table is not None:
            max_entries[page.host] = max(max_entries[page.host], len(table))
    tables = {h: store2.get(h) for h in store2.hosts()}
    figures = {
        "offline_cpu_ms_per_page": round(cpu_ms, 3),
        "offline_decide_cpu_ms_per_page": round(decide_s * 1000 / len(pages), 3),
        "offline_decode_cpu_ms_per_page": round(decode_s * 1000 / len(pages), 3),
        "pages_per_host": max(t.pages for t in tables.values() if t is not None),
        "distinct_segments_per_host": max(len(s) for s in distinct.values()),
        "table_entries_max": max(max_entries.values()),
        "table_entries_end": max(len(t) for t in tables.values() if t is not None),
        "table_bytes_end": max(t.nbytes() for t in tables.values() if t is not None),
    }
    return len(pages) / dt, out, figures


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    """The worker's unlabelled metrics (name -> value) from its /metrics endpoint."""
    from urllib.request import urlopen

    with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line.startswith("#") or "{" in name or not value:
            continue
        out[name] = float(value)
    return out


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Run:
    def __init__(self, settings: StreamSettings, tmp: Path) -> None:
        self.settings = settings
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None

    def start_worker(self, data_dir: Path) -> None:
        env = {**os.environ, **env_for(self.settings.with_overrides(data_dir=str(data_dir)))}
        log = open(self.tmp / "worker.log", "ab")  # noqa: SIM115 (lives as long as the process)
        self.proc = subprocess.Popen([sys.executable, "-m", "detemplate.cli", "worker"], env=env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()

    def kill_worker(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop_worker(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill_worker()


async def _collect(bootstrap: str, topic: str, n: int, timeout_s: float, start_at_end: bool = False,
                   proc: subprocess.Popen[bytes] | None = None) -> tuple[list[tuple[float, bytes]], float]:
    """Read `n` new records of `topic`, with their arrival times."""
    from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]  # no stubs

    from ..stream.kafka_io import fetch_highwaters

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    got: list[tuple[float, bytes]] = []
    cpu_first = cpu_last = 0.0
    try:
        await consumer.topics()
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        starts = await fetch_highwaters(bootstrap, parts) if start_at_end else {tp: 0 for tp in parts}
        for tp in parts:
            consumer.seek(tp, starts[tp])
        deadline = time.monotonic() + timeout_s
        while len(got) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(got)} of {n} records on {topic} within {timeout_s} s")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {proc.returncode}")
            batch = await consumer.getmany(timeout_ms=100, max_records=10_000)
            now = time.perf_counter()
            for msgs in batch.values():
                if msgs and proc is not None:
                    cpu_last = _cpu_s(proc.pid)
                    if not got:
                        cpu_first = cpu_last
                got.extend((now, m.value or b"") for m in msgs)
    finally:
        await consumer.stop()
    return got, cpu_last - cpu_first


def _main(args: argparse.Namespace) -> int:
    from ..stream.kafka_io import Record, consume, encode_raw, produce_raw
    from .broker import LocalBroker

    corpus_paths = args.corpus or [DEFAULT_CORPUS]
    corpus = load_corpus(corpus_paths, args.hosts, args.rounds, args.one_host)
    if not corpus.pages:
        print(f"detemplate bench-stream: no pages in {', '.join(corpus_paths)} (give WARC or JSONL files, or "
              "folders of HTML files)", file=sys.stderr)
        return 2
    pages = corpus.pages
    n = len(pages)
    params = EngineParams()
    print(f"corpus: {', '.join(corpus_paths)}: {n} pages, {len(corpus.hosts)} hosts, "
          f"{n // len(corpus.hosts)} pages per host", flush=True)
    offline_rate, reference, table_figs = offline_pass(pages, params)
    print(f"offline: {offline_rate:,.0f} pages/s (the record decoded, process_pages over MemoryStore, the clean "
          f"record encoded), {table_figs['offline_cpu_ms_per_page']:.2f} ms CPU per page (the decode "
          f"{table_figs['offline_decode_cpu_ms_per_page']:.3f})", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="detemplate-bench-"))
    figures: dict[str, Any] = {"pages": n, "hosts": len(corpus.hosts), "partitions": args.partitions,
                               "compression": args.compression or "none",
                               "snapshot_every": args.snapshot_every, "offline_pages_per_s": round(offline_rate, 1),
                               **table_figs}
    broker = LocalBroker(log_path=tmp / "broker.log")
    run: Run | None = None
    try:
        broker.start()  # inside: a broker that does not start leaves no temporary folder behind
        settings = StreamSettings(broker=broker.url, partitions=args.partitions, out_partitions=args.partitions,
                                  tansu=True, snapshot_every=args.snapshot_every, session_timeout_s=6.0,
                                  heartbeat_s=1.0, rebalance_timeout_s=6.0, metrics_host="127.0.0.1",
                                  metrics_port=_free_port(), compression=args.compression)
        broker.create_topics(settings.topic_partitions())
        t0 = time.perf_counter()
        asyncio.run(produce_raw(broker.bootstrap, settings.topic_raw,
                                ((p.host.encode(), encode_raw(p)) for p in pages)))
        figures["produce_pages_per_s"] = round(n / (time.perf_counter() - t0), 1)
        print(f"produced: {figures['produce_pages_per_s']:,.0f} pages/s", flush=True)

        run = Run(settings, tmp)
        data = tmp / "worker-data"
        t_launch = time.perf_counter()
        run.start_worker(data)
        got, cpu_s = asyncio.run(_collect(broker.bootstrap, settings.topic_clean, n, 900.0, proc=run.proc))
        t_first, t_last = got[0][0], got[-1][0]
        rate = (n - 1) / (t_last - t_first) if t_last > t_first else float("nan")
        figures["worker_pages_per_s"] = round(rate, 1)
        figures["worker_start_to_first_page_s"] = round(t_first - t_launch, 2)
        figures["worker_vs_offline"] = round(rate / offline_rate, 3)
        first_batch = sum(1 for t, _ in got if t == t_first)
        worker_cpu_ms = cpu_s * 1000 / max(1, n - first_batch)
        figures["worker_cpu_ms_per_page"] = round(worker_cpu_ms, 3)
        figures["worker_cpu_vs_offline"] = round(table_figs["offline_cpu_ms_per_page"] / worker_cpu_ms, 3)
        # A page over the message limit goes out lean (detemplate.stream.outputs): compared with
        # the offline record reduced the same way.
        differing = [v for _, v in got if as_published(reference.get(_url_key(v)) or b"{}", v) != v]
        lean = sum(1 for _, v in got if "omitted" in json.loads(v))
        figures["outputs_lean"] = lean
        mismatched = len(differing)
        if differing:
            with open(tmp / "differing.jsonl", "wb") as fh:
                for v in differing:
                    fh.write(v + b"\n" + (reference.get(_url_key(v)) or b"(no offline record)") + b"\n")
            print(f"differing outputs (stream, offline pairs) in {tmp / 'differing.jsonl'}; first: "
                  f"{json.loads(differing[0])['url']}", flush=True)
        figures["outputs_differing_from_offline"] = mismatched
        print(f"worker: {rate:,.0f} pages/s from first to last clean page "
              f"({rate / offline_rate:.2f}x offline); startup and group join {t_first - t_launch:.1f} s; "
              f"{mismatched} outputs differ from offline ({lean} published lean, compared as such)", flush=True)
        print(f"cpu: worker {worker_cpu_ms:.2f} ms per page, offline {table_figs['offline_cpu_ms_per_page']:.2f} ms "
              f"per page ({figures['worker_cpu_vs_offline']:.2f}x offline in CPU terms: the rate a worker with a "
              "core of its own would reach)", flush=True)
        # The engine's share, measured inside the worker on the same pages: what is left is the
        # worker's own cost a page (Faust, aiokafka, the message's JSON, the state records, metrics).
        scraped = _scrape(settings.metrics_port)
        decided = scraped.get("detemplate_page_latency_seconds_count", 0.0)
        engine_ms = 1000 * scraped.get("detemplate_decide_cpu_seconds_total", 0.0) / max(1.0, decided)
        figures["worker_decide_cpu_ms_per_page"] = round(engine_ms, 3)
        batches = max(1.0, scraped.get("detemplate_batch_records_count", 0.0))
        figures["worker_records_per_batch"] = round(scraped.get("detemplate_batch_records_sum", 0.0) / batches, 1)
        figures["worker_overhead_cpu_ms_per_page"] = round(worker_cpu_ms - engine_ms, 3)
        figures["worker_minus_offline_cpu_ms_per_page"] = round(worker_cpu_ms - table_figs["offline_cpu_ms_per_page"],
                                                                3)
        print(f"overhead: decide {engine_ms:.2f} ms CPU a page inside the worker (offline "
              f"{table_figs['offline_decide_cpu_ms_per_page']:.2f}), the rest {worker_cpu_ms - engine_ms:.2f} ms; "
              f"worker minus offline {figures['worker_minus_offline_cpu_ms_per_page']:.2f} ms; "
              f"{figures['worker_records_per_batch']:.0f} records a batch on average", flush=True)
        same = same_speed_ratio(worker_cpu_ms, engine_ms, table_figs["offline_cpu_ms_per_page"],
                                table_figs["offline_decide_cpu_ms_per_page"])
        figures["worker_cpu_vs_offline_same_speed"] = round(same, 3)
        print(f"same speed: {same:.2f}x offline per core, the engine's CPU a page taken from inside the worker for "
              "both (the machine's speed moves between the offline pass and the worker's; this does not)",
              flush=True)

        state: list[Record] = asyncio.run(consume(broker.bootstrap, settings.topic_state)).records
        deltas = [r for r in state if r.key and record_kind(r.key) == "delta"]
        snaps = [r for r in state if r.key and record_kind(r.key) == "snapshot"]
        total_bytes = sum(len(r.key or b"") + len(r.value or b"") for r in state)
        figures.update(
            changelog_records=len(state),
            changelog_records_per_page=round(len(state) / n, 3),
            changelog_bytes_per_page=round(total_bytes / n, 1),
            delta_bytes_avg=round(sum(len(r.value or b"") for r in deltas) / max(1, len(deltas)), 1),
            snapshot_bytes_avg=round(sum(len(r.value or b"") for r in snaps) / max(1, len(snaps)), 1),
            snapshot_bytes_max=max((len(r.value or b"") for r in snaps), default=0),
        )
        run.stop_worker()
        figures["rocksdb_dir_bytes"] = _dir_bytes(data)
        print(f"changelog: {len(state)} records ({len(state) / n:.3f} per page), {total_bytes / n:,.0f} bytes "
              f"per page; delta {figures['delta_bytes_avg']:,.0f} B avg, snapshot {figures['snapshot_bytes_avg']:,.0f}"
              f" B avg / {figures['snapshot_bytes_max']:,} B max; local RocksDB {figures['rocksdb_dir_bytes']:,} B",
              flush=True)
        print(f"tables: {figures['pages_per_host']} pages per host saw {figures['distinct_segments_per_host']:,} "
              f"distinct segments; table at most {figures['table_entries_max']:,} entries, "
              f"{figures['table_entries_end']:,} at the end ({figures['table_bytes_end']:,} B)", flush=True)

        if not args.no_recovery:
            run.start_worker(data)
            for label, wipe in (("own_rocksdb", False), ("from_changelog", True)):
                total_s = _recovery(run, broker.bootstrap, settings, data, wipe, pages, corpus.hosts)
                restore_s = _last_restore_s(tmp / "worker.log")
                figures[f"recovery_{label}_s"] = round(total_s, 2)
                figures[f"recovery_{label}_restore_s"] = restore_s
                print(f"recovery after SIGKILL ({label.replace('_', ' ')}): {total_s:.1f} s from restart to one new "
                      f"page of every host out, of which {restore_s} s reading the changelog (the rest is process "
                      "start and the group waiting out the dead member's session)", flush=True)
            run.stop_worker()
    finally:
        if run is not None:
            run.kill_worker()  # (stopped already, but on an error or interrupt before that)
        broker.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures))
    return 0


def _recovery(run: Run, bootstrap: str, settings: StreamSettings, data: Path, wipe: bool,
              pages: list[RawPage], hosts: list[str]) -> float:
    """SIGKILL the running worker, restart it, and time one new page per host through it."""
    from ..stream.kafka_io import encode_raw, produce_raw

    # The worker is running and idle: let it join, then kill it.
    time.sleep(8.0)
    run.kill_worker()
    if wipe:
        shutil.rmtree(data, ignore_errors=True)
    probe = []
    by_host = {p.host: p for p in pages}
    for h in hosts:
        p = by_host[h]
        probe.append(RawPage(p.url + f"#probe{time.monotonic_ns()}", p.html, h, ""))
    asyncio.run(produce_raw(bootstrap, settings.topic_raw, ((p.host.encode(), encode_raw(p)) for p in probe)))
    t0 = time.perf_counter()
    run.start_worker(data)
    got, _ = asyncio.run(_collect(bootstrap, settings.topic_clean, len(probe), 300.0, start_at_end=True,
                                  proc=run.proc))
    return got[-1][0] - t0


def _last_restore_s(log: Path) -> float | None:
    """Seconds Faust's last table recovery spent reading the changelog, from the worker log."""
    import datetime as dt
    import re

    stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
    start = end = None
    for line in log.read_text(errors="replace").splitlines():
        m = stamp.match(line)
        if not m:
            continue
        if "Highwater for active changelog partitions" in line:
            start, end = m.group(1), None
        elif "Recovery complete" in line and start is not None:
            end = m.group(1)
    if start is None or end is None:
        return None
    fmt = "%Y-%m-%d %H:%M:%S,%f"
    return round((dt.datetime.strptime(end, fmt) - dt.datetime.strptime(start, fmt)).total_seconds(), 2)


def _url_key(value: bytes) -> str:
    d = json.loads(value)
    return str(d["url"]) + "\x00" + str(d["host"])
