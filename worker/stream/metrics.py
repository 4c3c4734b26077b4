"""Prometheus metrics and health endpoints of the stream worker.

One `Metrics` object per worker process, with its own registry (so tests and benchmarks
can make several). The worker feeds it what the pipeline returned; nothing here reads
Kafka or the environment.

    metrics = Metrics()
    server = metrics.start_server("0.0.0.0", 8780)     # /metrics, /healthz, /readyz
    metrics.page_in()                                 # every pages.raw message read
    metrics.observe_decision(outcome, seconds, cpu)   # every page decided: latency, CPU, template share
    metrics.published_clean(omitted)                  # what went out: clean pages (lean or not),
    metrics.published_event(type)                     #   events,
    metrics.published_dead(reason)                    #   dead letters
    metrics.order(kind)                               # replayed, redecided, deferred or skipped messages
    metrics.changelog_records(n)                      # state records written
    metrics.first_pages_released(n, how)              # hosts' first pages held for their second, out
    metrics.count_first_pages_held(fn)                # held now: fn() when scraped
    metrics.host_expired(reason), table_capped()      # whole-host expiry, bounded tables
    metrics.observe_tables(tables)                    # from a timer: hosts, segments
    metrics.set_consumer_lag(partition, lag)          # from a timer
    metrics.beat()                                    # from a timer: the event loop runs
    metrics.set_ready(True)                           # partitions assigned, state recovered

The HTTP server runs in a daemon thread: it answers while the event loop is busy with a
long page, and liveness is judged by `beat()`, which only the event loop calls, so a
stuck loop fails /healthz even though the thread still answers.

Metric names (all prefixed ``detemplate_``; counters get Prometheus' ``_total``):

    build_info{version,python,page_walk}   1, with the build in its labels
    pages_in_total                  pages.raw messages read
    pages_out_total                 clean pages published
    outputs_reduced_total{omitted}  clean pages published in their lean form, by what they leave out
    pages_dead_total{reason}        dead letters published, by reason
    events_total{type}              template events published, by type
    pages_order_total{kind}         replayed (sent again, identical), redecided (no delta: decided
                                    against the current table), deferred (past a gap, waiting for
                                    the offsets before it), skipped (processed already), refetched
                                    (a partition behind its end that delivered nothing: sought back),
                                    state_reset (a host's records did not load)
    partitions_waiting              partitions waiting for a missing offset now
    first_pages_held                hosts' first pages held for their second page now (engine/firstpages.py)
    first_pages_released_total{how} held first pages published: second (decided with the host's second
                                    page), alone (its second page did not come within the bound, or
                                    the partition had no message for hold_idle_s)
    changelog_records_total         state changelog records written (tombstones included)
    hosts_expired_total{reason}     whole hosts dropped: unseen_pages, unseen_time, budget
    tables_capped_total             pages after which a host's table was bounded (max_table_entries)
    hosts_in_store, state_bytes     hosts and bytes of state in this worker's partitions (each sweep)
    page_latency_seconds            histogram: decide time per page
    decide_cpu_seconds_total        CPU time in decide, freeing a decided page included (the engine's
                                    share of process_cpu_seconds_total)
    template_share_ratio            template chars / all chars over the last N clean pages
    hosts_in_state                  hosts with a live table on this worker
    segments_in_state               table entries over those tables (segment and pagelet keys)
    consumer_lag{partition}         high watermark minus next offset to read
    ready                           1 when /readyz answers 200
    standby_remaining_records       changelog records the standby partitions have yet to read to catch up
    standby_partitions_waiting      standby partitions that have not started reading (their records are
                                    not in standby_remaining_records yet)
    process_*, python_*             the process' CPU, memory, open files (prometheus_client's collectors)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import compress
from operator import itemgetter
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from ..engine.errors import ConfigError
from ..engine.model import TEMPLATE, BlockVerdict, DeadPage, Outcome
from ..engine.table import HostTable

logger = logging.getLogger(__name__)

PREFIX = "detemplate"

# Decide time of one page is about 1 ms for a typical page and tens of ms for a large one
# (docs/measurements.md): buckets from 0.25 ms to 2.5 s.
LATENCY_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)

# A clean page's block's characters and verdict (BlockVerdict fields), for the template share.
_CHARS = itemgetter(BlockVerdict._fields.index("chars"))
_VERDICT = itemgetter(BlockVerdict._fields.index("verdict"))
_IS_TEMPLATE = TEMPLATE.__eq__


class Metrics:
    """The worker's metrics, readiness and liveness.

    share_window: clean pages over which `template_share` is computed (rolling).
    liveness_timeout_s: /healthz fails when `beat()` was called before but not within
        this many seconds (a stuck event loop). Before the first beat it passes.
    """

    def __init__(self, share_window: int = 1000, liveness_timeout_s: float = 60.0) -> None:
        if share_window < 1:
            raise ValueError("share_window must be at least 1")
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.build_info = Gauge(
            f"{PREFIX}_build_info", "1, with the build in the labels", ["version", "python", "page_walk"], registry=r
        )
        self.pages_in = Counter(f"{PREFIX}_pages_in", "pages.raw messages read", registry=r)
        self.pages_out = Counter(f"{PREFIX}_pages_out", "clean pages published", registry=r)
        self.pages_dead = Counter(f"{PREFIX}_pages_dead", "dead letters published, by reason", ["reason"], registry=r)
        self.events = Counter(f"{PREFIX}_events", "template events published, by type", ["type"], registry=r)
        self.changelog = Counter(f"{PREFIX}_changelog_records", "state changelog records written", registry=r)
        self.latency = Histogram(
            f"{PREFIX}_page_latency_seconds", "decide time per page", buckets=LATENCY_BUCKETS, registry=r
        )
        self.batch_records = Histogram(
            f"{PREFIX}_batch_records", "pages.raw records handed to the worker in one batch (one fetch)",
            buckets=BATCH_BUCKETS, registry=r,
        )
        self.decide_cpu = Counter(
            f"{PREFIX}_decide_cpu_seconds", "CPU time of the worker's event loop thread in decide", registry=r
        )
        self.reduced = Counter(
            f"{PREFIX}_outputs_reduced", "clean pages published in their lean form, by what they leave out",
            ["omitted"], registry=r,
        )
        self.order_counter = Counter(
            f"{PREFIX}_pages_order", "messages replayed, redecided, deferred or skipped (see docs/stream.md)",
            ["kind"], registry=r,
        )
        self.waiting = Gauge(f"{PREFIX}_partitions_waiting", "partitions waiting for a missing offset", registry=r)
        self.held = Gauge(f"{PREFIX}_first_pages_held", "hosts' first pages held for their second page",
                          registry=r)
        self.released = Counter(f"{PREFIX}_first_pages_released", "held first pages published, by how",
                                ["how"], registry=r)
        self.expired = Counter(f"{PREFIX}_hosts_expired", "whole hosts dropped from the state, by reason",
                               ["reason"], registry=r)
        self.capped = Counter(f"{PREFIX}_tables_capped", "pages after which a host's table was bounded", registry=r)
        self.store_hosts = Gauge(f"{PREFIX}_hosts_in_store", "hosts in this worker's partitions (last sweep)",
                                 registry=r)
        self.store_bytes = Gauge(f"{PREFIX}_state_bytes", "bytes of state in this worker's partitions (last sweep)",
                                 registry=r)
        self.template_share = Gauge(
            f"{PREFIX}_template_share_ratio",
            f"template chars / all chars over the last {share_window} clean pages",
            registry=r,
        )
        self.hosts = Gauge(f"{PREFIX}_hosts_in_state", "hosts with a live table on this worker", registry=r)
        self.segments = Gauge(
            f"{PREFIX}_segments_in_state", "entries (segment and pagelet keys) in the live tables", registry=r
        )
        self.lag = Gauge(
            f"{PREFIX}_consumer_lag", "high watermark minus next offset to read", ["partition"], registry=r
        )
        self.ready_gauge = Gauge(f"{PREFIX}_ready", "1 when the worker is ready (/readyz)", registry=r)
        self.standby_remaining = Gauge(
            f"{PREFIX}_standby_remaining_records",
            "changelog records this worker's standby partitions have yet to read to catch up with the "
            "changelog's end when they started (0 without standbys; see standby_partitions_waiting)",
            registry=r,
        )
        self.standby_waiting = Gauge(
            f"{PREFIX}_standby_partitions_waiting",
            "standby partitions of this worker that have not started reading their changelog (Faust starts "
            "them once the worker's active partitions are restored): standby_remaining_records leaves them out",
            registry=r,
        )
        self._window: deque[tuple[int, int]] = deque(maxlen=share_window)
        self._chars = 0
        self._template_chars = 0
        self._lock = threading.Lock()
        self._ready = False
        self._last_beat: float | None = None
        self.liveness_timeout_s = liveness_timeout_s

    # -- what the worker feeds -------------------------------------------------------

    def page_in(self, n: int = 1) -> None:
        """Count messages read from pages.raw (every one, dead or not)."""
        self.pages_in.inc(n)

    def batch_in(self, records: int) -> None:
        """A fetch's pages.raw records handed to the worker as one batch."""
        self.batch_records.observe(records)

    def observe_outcome(self, outcome: Outcome, seconds: float, cpu_seconds: float = 0.0) -> None:
        """A decided page as if all it produced were published: `observe_decision`, then its
        clean page or dead letter and its events counted (what the worker does in steps)."""
        self.observe_decision(outcome, seconds, cpu_seconds)
        if outcome.dead is not None:
            self.published_dead(outcome.dead.reason)
        if outcome.clean is not None:
            self.published_clean()
        for event in outcome.events:
            self.published_event(event.type)

    def observe_decision(self, outcome: Outcome, seconds: float, cpu_seconds: float = 0.0) -> None:
        """A page decided: its latency, the CPU it took, and its share of template text when clean
        (nothing counted)."""
        self.latency.observe(seconds)
        if cpu_seconds:
            self.decide_cpu.inc(cpu_seconds)
        if outcome.clean is not None:
            blocks = outcome.clean.blocks
            # The blocks' characters, and those of the template blocks, summed by C-level
            # iterators (a Python loop over a page's blocks cost 4.9 us a page).
            chars = sum(map(_CHARS, blocks))
            tchars = sum(compress(map(_CHARS, blocks), map(_IS_TEMPLATE, map(_VERDICT, blocks))))
            self._add_share(chars, tchars)

    def add_decide_cpu(self, cpu_seconds: float) -> None:
        """CPU in the engine besides a page's own decision (a held first page decided again, a
        decided page's objects freed)."""
        self.decide_cpu.inc(cpu_seconds)

    def published_clean(self, omitted: tuple[str, ...] = ()) -> None:
        self.pages_out.inc()
        for name in omitted:
            self.reduced.labels(omitted=name).inc()

    def published_event(self, kind: str) -> None:
        self.events.labels(type=kind).inc()

    def published_dead(self, reason: str) -> None:
        self.pages_dead.labels(reason=reason).inc()

    def order(self, kind: str) -> None:
        self.order_counter.labels(kind=kind).inc()

    def first_pages_released(self, released: int, how: str) -> None:
        """`released` more of the hosts' held first pages published `how` (second, alone)."""
        self.released.labels(how=how).inc(released)

    def count_first_pages_held(self, count: Callable[[], int]) -> None:
        """The held first pages, counted by `count` when /metrics is read."""
        self.held.set_function(count)

    def set_waiting_partitions(self, n: int) -> None:
        self.waiting.set(n)

    def set_standby_remaining(
        self, standbys: Iterable[Any], highwaters: Mapping[Any, int], offsets: Mapping[Any, int | None]
    ) -> None:
        """Records this worker's standby partitions (`standbys`) still have to read: each one's high
        watermark when it started (-1: an empty changelog), less the offset it has read to (-1 or
        None: none yet); and how many have not started, with no high watermark yet.

        Faust starts the standbys after the worker's own partitions are restored, and until then
        a standby has no high watermark: counted as 0 records left, a worker restoring a large
        partition would say its standbys had caught up before they had read anything."""
        remaining = waiting = 0
        for tp in standbys:
            hw = highwaters.get(tp)
            if hw is None:
                waiting += 1
            elif hw >= 0:
                read = offsets.get(tp)
                remaining += max(0, hw - (-1 if read is None else read))
        self.standby_remaining.set(remaining)
        self.standby_waiting.set(waiting)

    def host_expired(self, reason: str) -> None:
        self.expired.labels(reason=reason).inc()

    def table_capped(self) -> None:
        self.capped.inc()

    def set_store_size(self, hosts: int, nbytes: int) -> None:
        self.store_hosts.set(hosts)
        self.store_bytes.set(nbytes)

    def set_build(self, version: str, python: str, page_walk: str) -> None:
        self.build_info.labels(version=version, python=python, page_walk=page_walk).set(1)

    def observe_dead(self, dead: DeadPage) -> None:
        """Count a dead letter that never reached the pipeline (undecodable message, bad key)."""
        self.pages_dead.labels(reason=dead.reason).inc()

    def changelog_records(self, n: int = 1) -> None:
        self.changelog.inc(n)

    def set_state_size(self, hosts: int, segments: int) -> None:
        self.hosts.set(hosts)
        self.segments.set(segments)

    def observe_tables(self, tables: Mapping[str, HostTable] | Iterable[HostTable]) -> None:
        """Set hosts_in_state and segments_in_state from the live tables (O(hosts): call from a timer)."""
        values = tables.values() if isinstance(tables, Mapping) else tables
        hosts = 0
        segments = 0
        for table in values:
            hosts += 1
            segments += len(table)
        self.set_state_size(hosts, segments)

    def set_consumer_lag(self, partition: int, lag: int) -> None:
        self.lag.labels(partition=str(partition)).set(max(0, lag))

    def forget_partitions(self) -> None:
        """Drop every consumer_lag series (call on rebalance: partitions may have moved away)."""
        self.lag.clear()

    def set_ready(self, ready: bool) -> None:
        """Ready: partitions assigned and their state recovered. Not ready while rebalancing."""
        self._ready = bool(ready)
        self.ready_gauge.set(1 if ready else 0)

    def beat(self) -> None:
        """The event loop is alive (call from a periodic timer of the worker)."""
        self._last_beat = time.monotonic()

    # -- what the endpoints read ------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready

    def alive(self) -> bool:
        last = self._last_beat
        return last is None or time.monotonic() - last <= self.liveness_timeout_s

    def share(self) -> float:
        """The rolling template share (0 before any clean page)."""
        with self._lock:
            return self._template_chars / self._chars if self._chars else 0.0

    def scrape(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def _add_share(self, chars: int, tchars: int) -> None:
        with self._lock:
            window = self._window
            if len(window) == window.maxlen:
                old_chars, old_tchars = window[0]
                self._chars -= old_chars
                self._template_chars -= old_tchars
            window.append((chars, tchars))
            self._chars += chars
            self._template_chars += tchars
            share = self._template_chars / self._chars if self._chars else 0.0
        self.template_share.set(share)

    # -- the HTTP server --------------------------------------------------------------

    def start_server(self, host: str = "0.0.0.0", port: int = 8780) -> MetricsServer:
        """Serve /metrics, /healthz and /readyz in a daemon thread; port 0 picks a free port."""
        server = MetricsServer(self, host, port)
        server.start()
        return server


class MetricsServer:
    """A small threaded HTTP server for the three endpoints. `stop()` shuts it down."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        handler = _handler_for(metrics)
        try:
            self._httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise ConfigError(
                f"the metrics endpoint cannot listen on {host}:{port} ({exc.strerror or exc}): another process has "
                "it? Give --metrics-port (or DETEMPLATE_METRICS_PORT) another port, 0 for any free one, -1 for none"
            ) from exc
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="detemplate-metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    def start(self) -> None:
        self._thread.start()
        logger.info("metrics and health on http://%s:%d (/metrics /healthz /readyz)", self.host, self.port)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "detemplate"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, metrics.scrape(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = metrics.alive()
                self._send(200 if ok else 503, b"ok\n" if ok else b"event loop stalled\n")
            elif path == "/readyz":
                ok = metrics.ready
                self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            # Probes and scrapes every few seconds would flood the worker's log.
            logger.debug("http %s", format % args)

    return Handler
