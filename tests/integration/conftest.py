"""Fixtures for broker tests: a fresh Tansu broker per test, worker processes, offline reference.

Every test that needs Kafka starts its own broker on a free loopback port (about 35 ms),
so tests never share topics or consumer groups and never skip for want of a broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from worker import codec
from worker.broker import LocalBroker
from worker.model import RawPage
from worker.params import EngineParams
from worker.pipeline import process_page
from worker.settings import StreamSettings, env_for
from worker.state.memory import MemoryStore
from worker.stream.kafka_io import Record, consume, encode_raw, produce_raw

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

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        settings = self.settings.with_overrides(data_dir=str(self.tmp / f"{name}-data"))
        env = {**os.environ, **env_for(settings), "PYTHONPATH": str(REPO)}
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (closed in stop)
        self.logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "worker"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def produce_pages(self, pages: list[RawPage]) -> None:
        run(produce_raw(self.bootstrap, self.settings.topic_raw, ((p.host.encode(), encode_raw(p)) for p in pages)))

    def produce_messages(self, messages: list[tuple[bytes | None, bytes | None]]) -> None:
        run(produce_raw(self.bootstrap, self.settings.topic_raw, messages))

    def read(self, topic: str) -> list[Record]:
        """Every record of `topic` up to its end now."""
        return run(consume(self.bootstrap, topic, tansu=True))

    def wait_for(self, topic: str, done: object, timeout_s: float = 120.0) -> list[Record]:
        """Read `topic` until `done(records)` holds; fail with the worker logs after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.read(topic)
            if done(records):  # type: ignore[operator]
                return records
            for proc in self.procs:
                if proc.poll() not in (None, -signal.SIGKILL):
                    pytest.fail(f"a worker exited with {proc.returncode}:\n{self.logs_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{topic}: condition not met within {timeout_s} s ({len(records)} records)\n"
                            f"{self.logs_tail()}")
            time.sleep(0.5)

    def logs_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.tmp.glob("*.log"))

    def stop(self) -> None:
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


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    broker = LocalBroker(log_path=tmp_path / "broker.log").start()
    settings = StreamSettings(
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
    broker.create_topics(settings.topic_partitions())
    c = Cluster(broker, settings, tmp_path)
    try:
        yield c
    finally:
        c.stop()
        broker.stop()


@dataclass
class Offline:
    """What `detemplate run` produces for the same pages in the same order."""

    clean: dict[str, list[bytes]]  # host -> clean page records in page order
    events: dict[str, list[bytes]]
    store: MemoryStore


def offline(pages: list[RawPage], params: EngineParams | None = None) -> Offline:
    params = params or EngineParams()
    store = MemoryStore()
    clean: dict[str, list[bytes]] = defaultdict(list)
    events: dict[str, list[bytes]] = defaultdict(list)
    for page in pages:
        outcome = process_page(page, store, params)
        assert outcome.clean is not None
        clean[page.host].append(codec.encode_clean(outcome.clean))
        events[page.host].extend(codec.encode_event(e) for e in outcome.events)
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
