"""`detemplate bench-scale`: state bounded however many hosts come and go (issues 15 and 17).

A synthetic crawl of H hosts whose sizes follow a power law (Zipf: a few hosts of hundreds of
pages, most of one to a few), each host crawled only within a window of the crawl (hosts
come and go), goes through `detemplate run --state` and through one stream worker, both
with whole-host expiry and a byte budget. Sampled while they run: pages/s, RSS, the RocksDB
directory, hosts held and state bytes. At the end: state bytes per host, the changelog's
records and bytes (as written, and as compaction keeps them), the time one worker takes to
restore its partitions from the changelog into an empty directory, and, with --failover,
the time from a worker's SIGKILL to every host of its partitions answering again on the
surviving worker, with and without a standby replica (Faust's standby tables).

    detemplate bench-scale --hosts 10000 --out scale/        # figures.json, samples.csv, scale.png

Figures are printed and written; nothing here judges them (docs/scale.md holds the runs).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.model import RawPage
from ..settings import StreamSettings

WORDS = (
    "data page index model crawl table river mountain history garden light signal market paper code "
    "window engine travel music story vector simple open fast state host network music season winter "
    "summer city north south number letter method result figure value system report design family"
).split()


@dataclass(frozen=True, slots=True)
class Shape:
    """The synthetic crawl: `hosts` hosts, sizes ~ a power law of exponent `zipf` capped at
    `max_pages`, each host crawled within a window `window` (a share of the crawl) long."""

    hosts: int
    zipf: float = 1.2
    max_pages: int = 400
    window: float = 0.2
    seed: int = 0

    def sizes(self) -> list[int]:
        rng = random.Random(self.seed)
        # A discrete power law from a Pareto draw, floored: P(n >= k) = k^-zipf (mean zipf / (zipf - 1)).
        return [min(self.max_pages, int(1.0 / (1.0 - rng.random()) ** (1.0 / self.zipf))) for _ in range(self.hosts)]

    def order(self) -> list[tuple[int, int]]:
        """(host, page index) of every page, in crawl order: each host's pages spread over its window."""
        rng = random.Random(self.seed + 1)
        events: list[tuple[float, int, int]] = []
        for h, n in enumerate(self.sizes()):
            start = rng.random() * (1.0 - self.window)
            events.extend((start + self.window * rng.random(), h, i) for i in range(n))
        events.sort()
        # Within a host, pages come in page order (its i-th page is its i-th in time).
        seen: dict[int, int] = {}
        out = []
        for _, h, _i in events:
            i = seen.get(h, 0)
            seen[h] = i + 1
            out.append((h, i))
        return out


def host_name(h: int) -> str:
    return f"h{h}.scale.example"


def page(h: int, i: int) -> RawPage:
    """Page i of host h: the host's template (nav, header, sidebar, footer) around new content."""
    rng = random.Random(h * 1_000_003 + i)
    host = host_name(h)
    words = [WORDS[(h * 7 + k) % len(WORDS)] for k in range(6)]
    body = " ".join(rng.choice(WORDS) for _ in range(60))
    more = " ".join(rng.choice(WORDS) for _ in range(40))
    html = (
        f"<html><head><title>{host} {i}</title></head><body>"
        f"<nav><a href='/'>Home</a> <a href='/about'>About {words[0]}</a> <a href='/blog'>{words[1]} blog</a> "
        f"<a href='/contact'>Contact {words[2]}</a></nav><header><h1>The {words[3]} {words[4]} site {h}</h1></header>"
        f"<main><article><h2>Article {i} on {rng.choice(WORDS)}</h2><p>{body}</p><p>{more}</p></article></main>"
        f"<aside><h3>Popular</h3><ul><li><a href='/p/1'>The first {words[5]}</a></li><li><a href='/p/2'>More "
        f"{words[0]}</a></li></ul></aside><footer><p>Copyright {h} {words[2]} and {words[3]}. All rights reserved."
        f"</p><p><a href='/privacy'>Privacy</a> <a href='/terms'>Terms</a></p></footer></body></html>"
    )
    return RawPage(f"https://{host}/a/{i}.html", html, host)


def pages(shape: Shape) -> Iterator[RawPage]:
    for h, i in shape.order():
        yield page(h, i)


# -- sampling a running process --------------------------------------------------------------------


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process' resident memory now (VmRSS), or its high-water mark (VmHWM), MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def dir_mb(path: Path) -> float:
    total = 0
    for f in path.rglob("*"):
        try:
            if f.is_file():
                total += f.stat().st_size
        except OSError:
            continue  # a RocksDB file compacted away meanwhile
    return total / 1e6


class Sampler(threading.Thread):
    """Every `every_s`: `probe()` -> a dict of figures, kept with the time."""

    def __init__(self, probe: Any, every_s: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.probe, self.every_s = probe, every_s
        self.samples: list[dict[str, float]] = []
        self.t0 = time.monotonic()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            try:
                self.samples.append({"t": round(time.monotonic() - self.t0, 1), **self.probe()})
            except Exception:  # a sample that fails (an endpoint not up yet) is skipped
                continue

    def stop(self) -> list[dict[str, float]]:
        self._halt.set()
        self.join(timeout=10)
        return self.samples


# -- offline: detemplate run --state --------------------------------------------------------------


def offline(shape: Shape, tmp: Path, ttl_pages: int, budget_mb: float) -> dict[str, Any]:
    from ..engine.params import EngineParams
    from ..state.expiry import ExpiryPolicy
    from ..state.rocks import RocksStore

    crawl = tmp / "crawl.jsonl.gz"
    n = 0
    with gzip.open(crawl, "wt", encoding="utf-8", compresslevel=1) as fh:
        for p in pages(shape):
            fh.write(json.dumps({"url": p.url, "host": p.host, "html": p.html}) + "\n")
            n += 1
    out, state = tmp / "clean.jsonl", tmp / "state"
    cmd = [sys.executable, "-m", "detemplate.cli", "run", str(crawl), "-o", str(out), "--state", str(state),
           "--host-ttl-pages", str(ttl_pages), "--events", str(tmp / "events.jsonl"),
           "--jobs", "1"]  # one process, as docs/scale.md's figures were taken (the RSS, the state over time)
    if budget_mb:
        cmd += ["--state-budget-mb", str(budget_mb)]
    t0 = time.monotonic()
    with open(tmp / "run.log", "wb") as log:  # the child writes to its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    lines = [0, 0]  # lines counted, bytes read of the output so far

    def probe() -> dict[str, float]:
        if out.exists():
            with open(out, "rb") as fh:
                fh.seek(lines[1])
                chunk = fh.read()
            complete = chunk.rfind(b"\n") + 1
            lines[0] += chunk.count(b"\n", 0, complete)
            lines[1] += complete
        peak[0] = max(peak[0], rss_mb(proc.pid, "VmHWM"))
        return {"pages": lines[0], "rss_mb": round(rss_mb(proc.pid), 1), "state_mb": round(dir_mb(state), 2)}

    # The run's peak RSS is its own high-water mark (VmHWM, of the program it runs), read while
    # it runs: wait4's ru_maxrss would count this process' RSS at the fork (the generated crawl).
    peak = [0.0]
    sampler = Sampler(probe)
    sampler.start()
    _, status = os.waitpid(proc.pid, 0)
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    samples = sampler.stop()
    wall = time.monotonic() - t0
    if rc != 0:
        raise RuntimeError(f"detemplate run exited {rc}: {(tmp / 'run.log').read_text()[-2000:]}")
    store = RocksStore(state, EngineParams().table, policy=ExpiryPolicy())
    index = list(store.index())
    store.close()
    with open(tmp / "events.jsonl", encoding="utf-8") as fh:
        expired = sum(1 for line in fh if '"template.host_expired"' in line)
    live_bytes = sum(e.state_bytes for e in index)
    out.unlink()
    return {
        "pages": n, "seconds": round(wall, 1), "pages_per_s": round(n / wall, 1),
        "hosts_live": len(index), "hosts_expired": expired,
        "state_bytes_live": live_bytes, "state_bytes_per_host": round(live_bytes / max(1, len(index))),
        "rocksdb_mb": round(dir_mb(state), 2), "rss_mb_max": round(peak[0], 1),
        "samples": samples,
    }


# -- the stream worker ------------------------------------------------------------------------------


def stream(shape: Shape, tmp: Path, ttl_pages: int, budget_mb: float, partitions: int,
           failover: bool) -> dict[str, Any]:
    from ..state.changelog import host_of
    from ..stream.kafka_io import consume, encode_raw, produce_raw
    from .bench_stream import Run, _collect, _last_restore_s
    from .broker import LocalBroker

    broker = LocalBroker(log_path=tmp / "broker.log").start()
    figures: dict[str, Any] = {}
    run: Run | None = None
    try:
        settings = StreamSettings(
            broker=broker.url, partitions=partitions, out_partitions=partitions, tansu=True, session_timeout_s=6.0,
            heartbeat_s=1.0, rebalance_timeout_s=6.0, metrics_host="127.0.0.1", metrics_port=0,
            host_ttl_pages=ttl_pages // partitions, state_budget_bytes=int(budget_mb * 1e6), expiry_sweep_s=1.0,
        )
        broker.create_topics(settings.topic_partitions())
        crawl = list(pages(shape))
        asyncio.run(produce_raw(broker.bootstrap, settings.topic_raw,
                                ((p.host.encode(), encode_raw(p)) for p in crawl)))
        run = Run(settings, tmp)
        data = tmp / "w1-data"
        t0 = time.monotonic()
        run.start_worker(data)
        assert run.proc is not None
        proc = run.proc

        def probe() -> dict[str, float]:
            m = _metrics(tmp / "worker.log")
            return {"pages": m.get("detemplate_pages_out_total", 0.0), "rss_mb": round(rss_mb(proc.pid), 1),
                    "rocksdb_mb": round(dir_mb(data), 2), "hosts": m.get("detemplate_hosts_in_store", 0.0),
                    "state_mb": round(m.get("detemplate_state_bytes", 0.0) / 1e6, 2)}

        sampler = Sampler(probe)
        sampler.start()
        asyncio.run(_collect(broker.bootstrap, settings.topic_clean, len(crawl), 24 * 3600.0, proc=proc))
        wall = time.monotonic() - t0
        time.sleep(6.0)  # one more expiry sweep and a few samples
        samples = sampler.stop()
        last = _metrics(tmp / "worker.log")
        state = asyncio.run(consume(broker.bootstrap, settings.topic_state)).records
        latest: dict[bytes, bytes | None] = {}
        for r in state:
            latest[r.key or b""] = r.value
        kept = {k: v for k, v in latest.items() if v is not None}
        # The hosts and bytes a restore gets: the compacted changelog (the worker's own gauges are
        # from its last sweep, which runs between messages: the crawl's last hosts come after it).
        live_hosts = {h for k in kept if (h := host_of(k)) is not None}
        figures.update(
            pages=len(crawl), seconds=round(wall, 1), pages_per_s=round(len(crawl) / wall, 1),
            hosts_live=len(live_hosts),
            hosts_expired=int(sum(v for k, v in last.items() if k.startswith("detemplate_hosts_expired_total"))),
            state_bytes_live=sum(len(k) + len(v) for k, v in kept.items()),
            worker_hosts_gauge=int(last.get("detemplate_hosts_in_store", 0)),
            worker_state_bytes_gauge=int(last.get("detemplate_state_bytes", 0)),
            changelog_records=len(state), changelog_mb=round(sum(len(r.key or b"") + len(r.value or b"")
                                                                 for r in state) / 1e6, 2),
            changelog_compacted_records=len(kept),
            changelog_compacted_mb=round(sum(len(k) + len(v) for k, v in kept.items()) / 1e6, 2),
            rocksdb_mb=round(dir_mb(data), 2), rss_mb_max=max((s["rss_mb"] for s in samples), default=0.0),
            samples=samples,
        )
        figures["state_bytes_per_host"] = round(figures["state_bytes_live"] / max(1, figures["hosts_live"]))
        # Restore: SIGKILL, an empty directory, a restart: Faust reads every partition's changelog.
        run.kill_worker()
        shutil.rmtree(data, ignore_errors=True)
        probe_pages = _probes(crawl, 64)
        asyncio.run(produce_raw(broker.bootstrap, settings.topic_raw,
                                ((p.host.encode(), encode_raw(p)) for p in probe_pages)))
        t1 = time.monotonic()
        run.start_worker(data)
        asyncio.run(_collect(broker.bootstrap, settings.topic_clean, len(probe_pages), 900.0, start_at_end=True,
                             proc=run.proc))
        figures["restart_to_pages_s"] = round(time.monotonic() - t1, 1)
        figures["restore_s"] = _last_restore_s(tmp / "worker.log")
        run.stop_worker()
        if failover:
            for standby in (0, 1):
                figures[f"failover_standby{standby}_s"] = _failover(
                    broker.bootstrap, settings.with_overrides(standby_replicas=standby), tmp / f"failover{standby}",
                    crawl)
    finally:
        if run is not None:
            run.kill_worker()  # (stopped already, but on an error or interrupt before that)
        broker.stop()
    return figures


def _probes(crawl: list[RawPage], n: int) -> list[RawPage]:
    """A new page of each of the last `n` hosts crawled (hosts still in the state)."""
    chosen: dict[str, RawPage] = {}
    for p in reversed(crawl):
        if p.host not in chosen:
            chosen[p.host] = p
        if len(chosen) >= n:
            break
    return [RawPage(p.url + f"?probe={time.monotonic_ns()}", p.html, p.host) for p in chosen.values()]


def _failover(bootstrap: str, settings: StreamSettings, tmp: Path, crawl: list[RawPage]) -> float:
    """Two workers of the group, each restoring its partitions into an empty directory (and,
    with standby replicas, the other's as a standby); once both are ready, their standbys have
    started and caught up (`detemplate_standby_partitions_waiting` and
    `detemplate_standby_remaining_records` 0) and they are idle, SIGKILL one:
    seconds until a new page of each of 64 recent hosts is out (the survivor takes over after
    the dead member's session, 6 s here, and, without a standby, a restore)."""
    from .bench_stream import Run

    tmp.mkdir(parents=True)
    runs = [Run(settings, tmp / name) for name in ("a", "b")]
    for r in runs:
        r.tmp.mkdir()
        r.start_worker(r.tmp / "data")
    try:
        deadline = time.monotonic() + 900
        while not all(_ready(r.tmp / "worker.log") for r in runs):
            if time.monotonic() > deadline:
                raise TimeoutError("the two workers were not both ready within 900 s")
            time.sleep(1.0)
        if settings.standby_replicas:
            _wait_standbys([r.tmp / "worker.log" for r in runs], deadline)
        time.sleep(10.0)  # the group settles
        runs[1].kill_worker()
        return asyncio.run(_time_probes(bootstrap, settings, _probes(crawl, 64), 900.0))
    finally:
        for r in runs:
            r.stop_worker()


STANDBY_REMAINING = "detemplate_standby_remaining_records"
STANDBY_WAITING = "detemplate_standby_partitions_waiting"


def _wait_standbys(logs: list[Path], deadline: float) -> None:
    """Until every worker's standby partitions have started (Faust starts them after the active
    partitions are restored) and read their changelogs to the end they had when they started."""
    while True:
        metrics = [_metrics(log) for log in logs]
        left = [(m.get(STANDBY_REMAINING), m.get(STANDBY_WAITING)) for m in metrics]
        if all(n == 0 and w == 0 for n, w in left):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the standbys did not catch up in time: (records left, partitions not started) {left}")
        time.sleep(1.0)


async def _time_probes(bootstrap: str, settings: StreamSettings, probes: list[RawPage], timeout_s: float) -> float:
    """Send `probes` to the input topic and read the output topic from its end as it was before
    they were sent, until a record of each is out: seconds from the send to the last one. Only
    what follows that end is read (the whole topic, hundreds of thousands of clean pages in the
    larger runs, took longer to read than the failover it timed), and the probes are told by
    their URLs (a survivor may publish again what the dead worker had not committed)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]  # no stubs

    from ..stream.kafka_io import encode_raw, fetch_highwaters, produce_raw

    topic = settings.topic_clean
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    left = {p.url for p in probes}
    try:
        await consumer.topics()  # loads the metadata of every topic
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        for tp, end in (await fetch_highwaters(bootstrap, parts)).items():
            consumer.seek(tp, end)
        t0 = now = time.monotonic()
        await produce_raw(bootstrap, settings.topic_raw, ((p.host.encode(), encode_raw(p)) for p in probes))
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(left)} probe pages not out within {timeout_s} s")
            batch = await consumer.getmany(timeout_ms=100, max_records=10_000)
            now = time.monotonic()
            for msgs in batch.values():
                for m in msgs:
                    if m.value:
                        left.discard(json.loads(m.value).get("url"))
        return round(now - t0, 1)
    finally:
        await consumer.stop()


def _ready(log: Path) -> bool:
    import re

    text = log.read_text(errors="replace") if log.exists() else ""
    return "Worker ready" in text and re.search(r"metrics and health on", text) is not None


def _metrics(log: Path) -> dict[str, float]:
    """The worker's detemplate_* metrics, from the endpoint its log names."""
    import re

    from .soak import scrape

    port = re.search(r"metrics and health on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
    return {} if port is None else scrape(int(port.group(1)), labelled=True)


# -- the capacity plan ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measured:
    """Per-page and per-record costs measured on this machine (docs/scale.md, docs/stream.md)."""

    # bench-stream on ../shared/crawl (real documentation sites), the worker's CPU a page: 1.27-1.38
    # ms in make bench's four runs of November 30th, the slowest taken (1.58-1.61 on November
    # 29th, 2.00-2.17 on November 28th's slower machine, 3.97 on November 24th's engine).
    worker_cpu_ms_per_page: float = 1.38
    delta_bytes: float = 1048.0  # the same runs: a delta record, key and value (its value 1,008 on average)
    snapshot_bytes: float = 20_000.0  # a host's table serialised (9-56 KB measured on the corpora's sites)
    index_bytes: float = 100.0  # a host's index entry, key and value
    restore_records_per_s: float = 1900.0  # Faust reading a changelog into RocksDB (bench-scale: 1,870-9,500)
    # SIGKILL to pages again with a standby (6 s session): 11.2-11.3 s from 1,000 to 100,000
    # hosts (at 100,000, 510,000 records a partition written, about the plan's partitions).
    failover_standby_s: float = 11.2
    # The same without a standby, less the survivor's restore of the dead worker's partition
    # (100,000 hosts: 72.5 - 61.4 s).
    failover_overhead_s: float = 11.1


def capacity_plan(pages_month: float, hosts_month: float, m: Measured, snapshot_every: int = 64,
                  peak: float = 2.0, headroom: float = 1.5, max_host_pages: int = 1_000_000,
                  restore_target_s: float = 300.0) -> dict[str, float]:
    """Partitions, workers, disk and changelog for a crawl, from the measured costs.

    Host sizes follow a power law P(n >= k) = k^-a, its exponent chosen so that the mean is
    pages_month / hosts_month (a host of more than max_host_pages is cut there). A host holds
    min(n, 2K) deltas, a snapshot from its K-th page (two from its 2K-th) and an index entry."""
    import numpy as np

    mean = pages_month / hosts_month
    rng = np.random.default_rng(0)
    u = 1.0 - rng.random(1_000_000)
    lo, hi = 0.2, 3.0
    for _ in range(60):  # the exponent whose capped mean is `mean` (the mean falls as it grows)
        a = (lo + hi) / 2
        n = np.minimum(max_host_pages, np.floor(u ** (-1.0 / a)))
        lo, hi = (a, hi) if n.mean() > mean else (lo, a)
    k2 = 2 * snapshot_every
    snaps = (n >= snapshot_every).astype(float) + (n >= k2)
    records = np.minimum(n, k2) + snaps + 1
    state = np.minimum(n, k2) * m.delta_bytes + snaps * m.snapshot_bytes + m.index_bytes
    # Written in the month, before compaction: a delta a page, a snapshot every K-th page of a
    # host, and the index entry with its first page and each snapshot.
    written = n * m.delta_bytes + np.floor(n / snapshot_every) * (m.snapshot_bytes + m.index_bytes) + m.index_bytes
    rate = pages_month / (30 * 86400)
    cores = rate * peak * m.worker_cpu_ms_per_page / 1000 * headroom
    workers = int(np.ceil(cores))
    state_total = float(state.mean()) * hosts_month
    records_total = float(records.mean()) * hosts_month
    # Partitions: 4 per worker at least (room to add workers), and enough that one partition
    # restores from its changelog within `restore_target_s`; a multiple of 16.
    need = max(4 * workers, records_total / (restore_target_s * m.restore_records_per_s))
    partitions = int(16 * np.ceil(need / 16))
    restore_s = records_total / partitions / m.restore_records_per_s
    return {
        "exponent": round(float(a), 3), "mean_pages_per_host": round(float(n.mean()), 1),
        "hosts_over_2k_pages_share": round(float((n >= k2).mean()), 4),
        "pages_per_s_mean": round(rate), "pages_per_s_peak": round(rate * peak), "cores": round(cores, 1),
        "workers": workers, "partitions": partitions,
        "state_gb": round(state_total / 1e9, 1), "state_bytes_per_host": round(state_total / hosts_month),
        "state_gb_per_partition": round(state_total / partitions / 1e9, 2),
        "changelog_records_compacted": round(records_total), "changelog_written_tb_month":
            round(float(written.mean()) * hosts_month / 1e12, 2),
        "restore_s_per_partition": round(restore_s), "failover_standby_s": m.failover_standby_s,
        "failover_no_standby_s": round(m.failover_overhead_s + restore_s),
    }


# -- the command ------------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench-scale",
        help="state per host, RSS, pages/s, restore and failover times with many hosts that come and go",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--hosts", type=int, action="append", help="hosts in the synthetic crawl (repeatable: one "
                   "run each, for figures as a function of hosts; default 2000)")
    p.add_argument("--zipf", type=float, default=1.2, help="exponent of the host-size power law (default 1.2)")
    p.add_argument("--max-pages", type=int, default=400, help="most pages of one host (default 400)")
    p.add_argument("--window", type=float, default=0.2, help="share of the crawl a host is crawled in (default 0.2)")
    p.add_argument("--ttl-share", type=float, default=0.25,
                   help="expire hosts unseen for this share of the crawl's pages (default 0.25)")
    p.add_argument("--budget-mb", type=float, default=0.0, help="state byte budget, MB (default none)")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--skip", choices=("offline", "stream"), action="append", default=[])
    p.add_argument("--failover", action="store_true", help="also time a failover with and without a standby")
    p.add_argument("--out", default="scale-bench", help="folder for figures.json, samples.csv and scale.png")
    p.add_argument("--keep", action="store_true",
                   help="keep each run's working folder (the broker's and workers' logs, their RocksDB folders) "
                   "and print where it is, to trace a figure afterwards")
    p.add_argument("--plan", nargs=2, type=float, metavar=("PAGES_A_MONTH", "HOSTS"),
                   help="only print the capacity plan for a crawl of this size, from the measured costs")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.plan:
        print(json.dumps(capacity_plan(args.plan[0], args.plan[1], Measured()), indent=1))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for hosts in args.hosts or [2000]:
        shape = Shape(hosts, args.zipf, args.max_pages, args.window)
        n = sum(shape.sizes())
        ttl = max(100, int(n * args.ttl_share))
        row: dict[str, Any] = {"hosts": hosts, "pages": n, "ttl_pages": ttl, "budget_mb": args.budget_mb}
        print(f"== {hosts:,} hosts, {n:,} pages (largest host {max(shape.sizes())}), expiry after {ttl:,} pages",
              flush=True)
        tmp = Path(tempfile.mkdtemp(prefix="detemplate-scale-"))
        try:
            if "offline" not in args.skip:
                (tmp / "offline").mkdir()
                row["offline"] = offline(shape, tmp / "offline", ttl, args.budget_mb)
                _say("run --state", row["offline"])
            if "stream" not in args.skip:
                (tmp / "stream").mkdir()
                row["stream"] = stream(shape, tmp / "stream", ttl, args.budget_mb, args.partitions,
                                       args.failover)
                _say("worker", row["stream"])
        finally:
            if args.keep:
                print(f"working folder kept: {tmp}", flush=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        results.append(row)
        (out / "figures.json").write_text(json.dumps(results, indent=1) + "\n")
    _write_samples(results, out / "samples.csv")
    _plot(results, out / "scale.png")
    print(f"figures in {out}/figures.json, samples in {out}/samples.csv, plot {out}/scale.png")
    return 0


def _say(what: str, f: dict[str, Any]) -> None:
    extra = ""
    if "changelog_records" in f:
        extra = (f"; changelog {f['changelog_records']:,} records / {f['changelog_mb']} MB written, "
                 f"{f['changelog_compacted_records']:,} / {f['changelog_compacted_mb']} MB compacted; restore "
                 f"{f['restore_s']} s (restart to pages {f['restart_to_pages_s']} s)")
        for k in ("failover_standby0_s", "failover_standby1_s"):
            if k in f:
                extra += f"; {k} {f[k]}"
    print(f"{what}: {f['pages_per_s']:,.0f} pages/s; {f['hosts_live']:,} hosts live, {f['hosts_expired']:,} "
          f"expired; {f['state_bytes_per_host']:,} B state a host; RocksDB {f['rocksdb_mb']} MB; "
          f"RSS max {f['rss_mb_max']:.0f} MB{extra}", flush=True)


def _write_samples(results: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("hosts,shell,t_s,pages,rss_mb,state_mb,rocksdb_mb,hosts_live\n")
        for row in results:
            for shell in ("offline", "stream"):
                for s in row.get(shell, {}).get("samples", []):
                    fh.write(f"{row['hosts']},{shell},{s['t']},{s.get('pages', '')},{s.get('rss_mb', '')},"
                             f"{s.get('state_mb', '')},{s.get('rocksdb_mb', '')},{s.get('hosts', '')}\n")


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (the `report` extra): no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for row in results:
        for shell, style in (("offline", "-"), ("stream", "--")):
            samples = row.get(shell, {}).get("samples", [])
            if not samples:
                continue
            label = f"{row['hosts']:,} hosts, {'run' if shell == 'offline' else 'worker'}"
            xs = [s["pages"] for s in samples]
            axes[0].plot(xs, [s.get("state_mb", 0) for s in samples], style, label=label)
            axes[1].plot(xs, [s["rss_mb"] for s in samples], style, label=label)
            rates = [0.0] + [(b["pages"] - a["pages"]) / max(1e-9, b["t"] - a["t"])
                             for a, b in itertools.pairwise(samples)]
            axes[2].plot(xs, rates, style, label=label)
    for ax, title in zip(axes, ("state (MB): run = RocksDB dir, worker = state bytes", "RSS (MB)", "pages/s"),
                         strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("pages processed")
        ax.grid(alpha=0.3)
    if axes[0].get_legend_handles_labels()[0]:  # a run too short for a sample has no curve
        axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

