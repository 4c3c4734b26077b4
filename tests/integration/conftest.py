"""Fixtures for broker tests: a fresh Tansu broker per test, worker processes, offline reference.

Every test that needs Kafka starts its own broker on a free loopback port (about 35 ms),
so tests never share topics or consumer groups and never skip for want of a broker.
`s3_cluster` is the same on a broker that keeps its data in a local S3 emulator (s3rver,
installed with npm on first use; reported skipped where Node.js is absent), so that the
broker can be stopped and started again without losing anything.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
from detemplate.engine.errors import ConfigError
from detemplate.engine.firstpages import process_pages
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.io import codec
from detemplate.settings import StreamSettings, env_for
from detemplate.state.expiry import ExpiryPolicy
from detemplate.state.memory import MemoryStore
from detemplate.stream.kafka_io import Record, consume, encode_raw, produce_raw, producer
from detemplate.tools.broker import LocalBroker, S3rver, install_s3rver, s3rver_missing

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4


@dataclass
class Cluster:
    """A running broker with the detemplate topics, and the worker processes of one test."""

    broker: LocalBroker
    settings: StreamSettings
    tmp: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)
    stopped: set[int] = field(default_factory=set)  # pids the test stopped on purpose

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        settings = self.settings.with_overrides(data_dir=str(self.tmp / f"{name}-data"))
        env = {**os.environ, **env_for(settings), "PYTHONPATH": str(REPO)}
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (closed in stop)
        self.logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "detemplate.cli", "worker"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def terminate(self, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> int:
        """Stop a worker with SIGTERM (it leaves the group cleanly); its exit code."""
        self.stopped.add(proc.pid)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=timeout_s)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def metric(self, name: str, metric: str, default: float | None = None) -> float:
        """One value of a worker's Prometheus endpoint, e.g. ``detemplate_pages_out_total``
        (`default` for a labelled series not counted yet)."""
        port = re.search(r"metrics and health on http://127\.0\.0\.1:(\d+)", self.log(name))
        assert port is not None, f"{name} has no metrics endpoint in its log"
        with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = re.search(rf"^{re.escape(metric)} (\S+)$", text, re.MULTILINE)
        if found is None and default is not None:
            return default
        assert found is not None, f"{metric} not in {name}'s metrics"
        return float(found.group(1))

    def wait_metric(self, name: str, metric: str, at_least: float, timeout_s: float = 90.0) -> float:
        """Poll a worker's metric until it reaches `at_least` (0 while its endpoint is not up yet)."""
        deadline = time.monotonic() + timeout_s
        while True:
            up = re.search(r"metrics and health on http://127\.0\.0\.1:(\d+)", self.log(name))
            value = self.metric(name, metric) if up else 0.0
            if value >= at_least:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"{name}: {metric} = {value} < {at_least} after {timeout_s} s\n{self.logs_tail()}")
            time.sleep(0.01)

    def produce_pages(self, pages: list[RawPage]) -> None:
        run(produce_raw(self.bootstrap, self.settings.topic_raw, ((p.host.encode(), encode_raw(p)) for p in pages)))

    def produce_messages(self, messages: list[tuple[bytes | None, bytes | None]]) -> None:
        run(produce_raw(self.bootstrap, self.settings.topic_raw, messages))

    def trickle(self, messages: list[Message], per_s: float) -> Trickle:
        """Start sending `messages` to pages.raw in the background, `per_s` a second."""
        t = Trickle(self.bootstrap, self.settings.topic_raw, messages, per_s)
        t.start()
        return t

    def produce_tracked(self, messages: list[tuple[bytes | None, bytes | None]]) -> dict[Position, Message]:
        """Send (key, value) messages to pages.raw; each one by the (partition, offset) it got."""
        positions = run(_produce_tracked(self.bootstrap, self.settings.topic_raw, messages))
        return dict(zip(positions, messages, strict=True))

    def read(self, topic: str) -> list[Record]:
        """Every record of `topic` up to its end now."""
        return run(consume(self.bootstrap, topic)).records

    def wait_for(self, topic: str, done: object, timeout_s: float = 120.0) -> list[Record]:
        """Read `topic` until `done(records)` holds; fail with the worker logs after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.read(topic)
            if done(records):  # type: ignore[operator]
                return records
            for proc in self.procs:
                if proc.pid not in self.stopped and proc.poll() not in (None, -signal.SIGKILL):
                    pytest.fail(f"a worker exited with {proc.returncode}:\n{self.logs_tail()}")
            if time.monotonic() > deadline:
                explain = getattr(done, "explain", None)
                why = explain(records, self) + "\n" if explain is not None else ""
                pytest.fail(f"{topic}: condition not met within {timeout_s} s ({len(records)} records)\n"
                            f"{why}{self.logs_tail()}")
            time.sleep(0.5)

    def logs_tail(self) -> str:
        """The end of every log of the test, and each worker's assignments and stats lines; a
        live worker first logs where each of its tasks waits (SIGUSR1), for a test that timed out."""
        live = [p for p in self.procs if p.poll() is None]
        for proc in live:
            proc.send_signal(signal.SIGUSR1)
        if live:
            time.sleep(1.0)  # a failure path only: time for the workers to write their stacks
        parts = []
        for p in sorted(self.tmp.glob("*.log")):
            text = p.read_text(errors="replace")
            marks = [line for line in text.splitlines() if "assigned partitions=" in line or "WorkerStats(" in line]
            stacks = text[text.rfind("tasks and threads:"):] if "tasks and threads:" in text else ""
            parts.append(f"--- {p.name}\n" + "\n".join(marks[-12:]) + f"\n...\n{text[-4000:]}\n{stacks[:20000]}")
        return "\n".join(parts)

    def peak_rss_mb(self, proc: subprocess.Popen[bytes]) -> float | None:
        """A running worker's peak resident memory so far (Linux' VmHWM), in MB."""
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return None
        found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        return int(found.group(1)) / 1024 if found else None

    def stop(self) -> None:
        peaks = [f"{p.pid}={mb:.0f}MB" for p in self.procs if p.poll() is None and (mb := self.peak_rss_mb(p))]
        if peaks:  # for the fault table in docs/stream.md (`pytest -s`)
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
            print(f"\nPEAKRSS {test} workers still running at the end: {' '.join(peaks)}")
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs:
            log.close()


Position = tuple[int, int]  # (partition, offset) of a pages.raw message
Message = tuple[bytes | None, bytes | None]  # (key, value)


async def _produce_tracked(bootstrap: str, topic: str, messages: list[Message]) -> list[Position]:
    prod = producer(bootstrap)
    await prod.start()
    try:
        futures = [await prod.send(topic, value, key=key) for key, value in messages]
        await prod.flush()
        sent = [await f for f in futures]
    finally:
        await prod.stop()
    return [(md.partition, md.offset) for md in sent]


class Trickle(threading.Thread):
    """Sends messages to a topic in the background, `per_s` a second in order, until `stop()`
    or the end of the list; `sent` holds each one by its (partition, offset) once stopped."""

    def __init__(self, bootstrap: str, topic: str, messages: list[Message], per_s: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.messages, self.per_s = bootstrap, topic, messages, per_s
        self.count = 0  # messages handed to the producer so far
        self.sent: dict[Position, Message] = {}
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    async def _run(self) -> None:
        prod = producer(self.bootstrap)
        await prod.start()
        try:
            futures = []
            t0 = time.monotonic()
            for i, (key, value) in enumerate(self.messages):
                if self._stop_event.is_set():
                    break
                delay = t0 + i / self.per_s - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                futures.append(await prod.send(self.topic, value, key=key))
                self.count = i + 1
            await prod.flush()
            for (key, value), fut in zip(self.messages, futures, strict=False):
                md = await fut
                self.sent[(md.partition, md.offset)] = (key, value)
        finally:
            await prod.stop()

    def stop(self) -> dict[Position, Message]:
        self._stop_event.set()
        self.join(timeout=60)
        if self.error is not None:
            raise self.error
        assert not self.is_alive(), "the background producer did not stop"
        return self.sent


def page_message(page: RawPage) -> Message:
    return page.host.encode(), encode_raw(page)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def worker_settings(broker: LocalBroker) -> StreamSettings:
    """The worker settings of the broker tests: 4 partitions, K = 16, 6 s sessions."""
    return StreamSettings(
        broker=broker.url,
        app_id="detemplate-test",
        partitions=PARTITIONS,
        out_partitions=PARTITIONS,
        tansu=True,
        snapshot_every=16,
        session_timeout_s=6.0,
        heartbeat_s=1.0,
        rebalance_timeout_s=6.0,
        commit_interval_s=1.0,
        metrics_host="127.0.0.1",
        metrics_port=0,  # a free port per worker
    )


def outputs_by_input(c: Cluster, sent: dict[Position, Message]) -> dict[Position, set[bytes]]:
    """The distinct clean pages and dead letters downstream, by the pages.raw position they came from.

    A dead letter names its input (`source` = pages.raw/PARTITION/OFFSET); a clean page is
    traced by its URL, which is unique among the inputs of these tests.
    """
    position_of_url: dict[str, Position] = {}
    for pos, (_, value) in sent.items():
        try:
            url = json.loads(value or b"").get("url")
        except (ValueError, AttributeError):
            continue
        if isinstance(url, str):
            assert url not in position_of_url, f"test input: {url} sent twice"
            position_of_url[url] = pos
    out: dict[Position, set[bytes]] = defaultdict(set)
    for r in c.read(c.settings.topic_clean):
        assert r.value is not None
        url = json.loads(r.value)["url"]
        assert url in position_of_url, f"a clean page that no input asked for: {url}"
        out[position_of_url[url]].add(r.value)
    prefix = f"{c.settings.topic_raw}/"
    for r in c.read(c.settings.topic_dead):
        assert r.value is not None
        source = json.loads(r.value)["source"]
        assert source.startswith(prefix), f"a dead letter that names no input: {source}"
        partition, offset = source[len(prefix):].split("/")
        out[(int(partition), int(offset))].add(r.value)
    return out


def assert_each_input_once(c: Cluster, sent: dict[Position, Message]) -> dict[Position, bytes]:
    """Every input offset has exactly one distinct output (clean page or dead letter); nothing else came out."""
    out = outputs_by_input(c, sent)
    missing = sorted(set(sent) - set(out))
    report_counts(c, sent, out)
    assert not missing, f"{len(missing)} inputs with no output, e.g. {missing[:5]}"
    assert set(out) == set(sent), f"outputs for positions nobody sent: {sorted(set(out) - set(sent))[:5]}"
    differing = {pos: vals for pos, vals in out.items() if len(vals) != 1}
    assert not differing, f"{len(differing)} inputs with differing outputs, e.g. {next(iter(differing.items()))}"
    return {pos: next(iter(vals)) for pos, vals in out.items()}


def report_counts(c: Cluster, sent: dict[Position, Message], out: dict[Position, set[bytes]]) -> None:
    """One line for the fault loops (`pytest -s`): inputs sent, outputs, inputs without one, copies."""
    total = len(c.read(c.settings.topic_clean)) + len(c.read(c.settings.topic_dead))
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    print(f"\nLOOPCOUNT {test} sent={len(sent)} out={total} inputs_out={len(set(out) & set(sent))} "
          f"lost={len(set(sent) - set(out))} duplicates={total - sum(len(v) for v in out.values())} "
          f"differing={sum(1 for v in out.values() if len(v) > 1)}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    broker = LocalBroker(log_path=tmp_path / "broker.log").start()
    settings = worker_settings(broker)
    broker.create_topics(settings.topic_partitions())
    c = Cluster(broker, settings, tmp_path)
    try:
        yield c
    finally:
        c.stop()
        broker.stop()


@pytest.fixture
def s3_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster whose broker keeps its data in s3rver: `cluster.broker.stop()` then `.start()`
    restarts it on the same port with every topic, offset and group kept."""
    missing = s3rver_missing()
    if missing:
        pytest.skip(missing)
    try:
        install_s3rver()  # npm install on first use, under the virtualenv
    except ConfigError as exc:
        pytest.fail(str(exc))
    s3 = S3rver(tmp_path / "s3", log_path=tmp_path / "s3rver.log").start()
    broker = LocalBroker(log_path=tmp_path / "broker.log", storage=s3)
    c: Cluster | None = None
    try:
        broker.start()
        settings = worker_settings(broker)
        broker.create_topics(settings.topic_partitions())
        c = Cluster(broker, settings, tmp_path)
        yield c
    finally:
        if c is not None:
            c.stop()
        broker.stop()
        s3.stop()


@dataclass
class Offline:
    """What `detemplate run` produces for the same pages in the same order."""

    clean: dict[str, list[bytes]]  # host -> clean page records in page order
    events: dict[str, list[bytes]]
    store: MemoryStore


def offline(pages: list[RawPage], params: EngineParams | None = None, policy: ExpiryPolicy | None = None) -> Offline:
    """`detemplate run` on the pages (its state events, such as a bounded table's, after each page's own)."""
    params = params or EngineParams()
    store = MemoryStore(policy)
    clean: dict[str, list[bytes]] = defaultdict(list)
    events: dict[str, list[bytes]] = defaultdict(list)
    for decided in process_pages(pages, store, params):
        outcome = decided.outcome
        host = decided.page.host
        assert outcome.clean is not None
        clean[host].append(codec.encode_clean(outcome.clean))
        events[host].extend(codec.encode_event(e) for e in (*outcome.events, *store.take_events()))
    return Offline(dict(clean), dict(events), store)


def by_host(records: list[Record]) -> dict[str, list[bytes]]:
    """Record values grouped by host, each host's in topic order (one output partition per host)."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        out[json.loads(r.value)["host"]].append(r.value)
    return dict(out)


def first_per_url(values: list[bytes]) -> list[bytes]:
    """A host's clean records with replayed duplicates removed (the first of each URL kept)."""
    seen = set()
    out = []
    for v in values:
        url = json.loads(v)["url"]
        if url not in seen:
            seen.add(url)
            out.append(v)
    return out
