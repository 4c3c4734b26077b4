"""The Faust app: pages.raw -> decide -> pages.clean, templates.events, pages.dead.

One task (a host's pages must be decided in input order) reads pages.raw, keyed by host, a
fetch at a time (the consumer hands the records over in batches, without Faust's per-event
stream: detemplate.stream.inbox). For each message it decodes the JSON record exactly as
`detemplate run` decodes a JSONL line, calls `detemplate.engine.pipeline.decide` (the offline
command's decision), and sends the outputs serialised with `detemplate.io.codec`, keyed by
host, each sized first so that none is over the producer's limit (detemplate.stream.outputs).

State (see detemplate.state.changelog): live `HostTable` objects in memory, backed by a Faust
table in RocksDB whose changelog gets one delta record per page plus one snapshot per
host every K pages, and an index entry per host that whole-host expiry reads
(detemplate.state.expiry). The in-memory tables are dropped at every rebalance and rebuilt
from the store (which Faust recovers from the changelog) on the host's next page.

No page is acknowledged without an output. A partition's messages are processed in
offset order (detemplate.stream.commits: a message past a gap waits until the ones before
it came, and commits never pass the first unprocessed offset). Each page is decided
whether or not it was seen before:

- a page the state has not applied (its offset past the table's `source_offset`) is
  decided and applied: the normal case;
- a page the state applied (its offset among the host's retained deltas) is a replay after
  a crash or a rebalance: the worker rebuilds the table as of just before it and decides it
  again, so its clean page and events are sent again identical to the first time;
- a page at or below `source_offset` with no delta was dead (decided again: dead again, the
  same dead letter), or is older than the retained deltas, or was never applied: it is
  decided against a copy of the host's current table, its clean page sent and counted
  (`pages_redecided_total`), the table left as it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import faust
from faust.transport.consumer import Consumer
from faust.types import TP

from ..engine.detectors.base import WalkedPage
from ..engine.errors import StateError
from ..engine.firstpages import Decided, FirstPages
from ..engine.model import CleanPage, DeadPage, Outcome, RawPage, TemplateEvent
from ..engine.params import EngineParams
from ..engine.pipeline import Decision, decide_page
from ..engine.table import HostTable
from ..io.sources import decode_record
from ..settings import StreamSettings
from ..state.changelog import (
    INDEX_PREFIX,
    HostState,
    StateLayout,
    assemble,
    get_record,
    host_of,
    host_prefix,
    index_key,
)
from ..state.expiry import Expired, ExpiryPolicy, IndexEntry, capped_event, choose_expired, expired_event
from . import heap
from .commits import Position, Progress, SafeCommitTransport
from .inbox import Batch, Inbox
from .metrics import Metrics
from .outbox import Outbox
from .outputs import RECORD_OVERHEAD_BYTES, OutputLimits, fit_clean, fit_dead, fit_event, output_key
from .store import CheckedRocksDBStore, is_corruption, store_url

logger = logging.getLogger(__name__)

TABLE_NAME = "hosts"
MAX_HOST_BYTES = 1024  # a longer host is a dead letter (`bad_host`): it is in every state key and output key
MAX_KEY_BYTES = 2048  # room kept for a state record's key beside its value
INDEX_REFRESH_MS = 60_000  # a host's index entry is rewritten at most this often (and on snapshot pages)
PARTITION_CACHE_KEYS = 65_536  # output partitions of this many (topic, host) remembered
STALL_S = 5.0  # a partition behind its end with no message handled for this long is fetched again
COMMIT_TRIES = 3  # commits tried before a snapshot replaces one whose pages are not committed yet
YIELD_EVERY = 16  # pages of a batch between two turns given to the event loop (the producer's sender, timers)
SWEEP_CHUNK = 4096  # index entries an expiry sweep reads between two turns given to the event loop
SWEEP_SPACING = 20.0  # the next sweep waits at least this many times the last one's reading took
SWEEP_DROPS = 256  # hosts a sweep drops between two turns given to the event loop
# The producer's batch per partition: many pages each (clean records average about 8 KB;
# aiokafka's default, 16 KB, held two, and every batch costs its own header, CRC and
# bookkeeping). Never over the message limit: brokers check a whole batch against it.
PRODUCER_BATCH_BYTES = 256 * 1024


@dataclass(slots=True)
class WorkerStats:
    """What the worker did, for logs and the benchmark."""

    pages: int = 0
    dead: int = 0
    replayed: int = 0
    redecided: int = 0
    deferred: int = 0
    skipped: int = 0
    forced_commits: int = 0
    rebuilt_hosts: int = 0
    state_records: int = 0
    state_bytes: int = 0
    reduced: int = 0
    expired_hosts: int = 0
    capped_tables: int = 0


class DetemplateApp(faust.App):
    """faust.App with in-order processing and safe offset commits (`progress`), and the Tansu
    workaround transport when the settings ask for it."""

    def __init__(self, *args: Any, tansu: bool = False, stop_timeout_s: float = 0.0, **kwargs: Any) -> None:
        self.tansu = tansu  # read when Faust first builds its transport, after __init__
        self.progress = Progress()  # read by the consumer's commits (detemplate.stream.commits)
        self.inbox: Inbox | None = None  # the worker's topics, a fetch at a time (detemplate.stream.inbox)
        self.stop_timeout_s = stop_timeout_s
        super().__init__(*args, **kwargs)

    async def on_stop(self) -> None:
        """Faust's stop, with a bound: past `stop_timeout_s` the process exits at once (75)."""
        if self.stop_timeout_s > 0:
            timer = threading.Timer(self.stop_timeout_s, _stop_took_too_long, (self.stop_timeout_s,))
            timer.daemon = True  # a stop that ends in time ends the process, and the timer with it
            timer.start()
        await super().on_stop()

    def _new_transport(self) -> Any:
        if self.tansu:
            from .tansu import TansuTransport

            return TansuTransport(self.conf.broker_consumer, self)
        return SafeCommitTransport(self.conf.broker_consumer, self)


EXIT_STOP_TIMEOUT = 75  # EX_TEMPFAIL: the stop waited on the brokers past stop_timeout_s


def _stop_took_too_long(timeout_s: float) -> None:
    """The process out at once (a thread's timer): its stop waited past `timeout_s`, mostly on
    unreachable brokers, which a commit, the outputs not delivered yet and the consumer's close
    wait for (aiokafka's producer for up to Faust's 20-minute request timeout). As after a
    crash, what was not committed is read again, and RocksDB's log restores what it had not
    flushed (docs/stream.md, "Faults")."""
    logger.critical("the stop did not end within %.0f s (are the brokers reachable?): exiting now; the pages "
                    "since the last commit will be read again", timeout_s)
    logging.shutdown()
    os._exit(EXIT_STOP_TIMEOUT)


def check_host(host: str) -> str | None:
    """Why `host` cannot key state and outputs (None when it can): it is in every state key."""
    try:
        data = host.encode("utf-8")
    except UnicodeEncodeError:
        return "the host is not valid Unicode (a lone surrogate)"
    if b"\x00" in data:
        return "the host holds a NUL character"
    if len(data) > MAX_HOST_BYTES:
        return f"the host is {len(data):,} bytes long, over {MAX_HOST_BYTES:,}"
    if not data:
        return "the host is empty"
    return None


def decode_message(key: bytes | None, value: bytes | None, source: str) -> RawPage | DeadPage:
    """A pages.raw message -> RawPage, or DeadPage with the reason (never raises for bad input)."""
    if not value:
        return DeadPage("", _text(key), "empty_message", "the message has no value (a tombstone or empty)", source)
    page = decode_record(value, source)
    if isinstance(page, DeadPage):
        if not page.host:
            page = DeadPage(page.url, _text(key), page.reason, page.detail, page.source)
        return page
    problem = check_host(page.host)
    if problem is not None:
        return DeadPage(page.url, page.host, "bad_host", problem, source)
    if key is None or _text(key) != page.host:
        # Partitioning by host is what keeps a host's pages in order on one worker;
        # a page under another key could be decided out of order against the wrong state.
        shown = _text(key)
        if len(shown) > 200:
            shown = shown[:200] + f"... ({len(key or b''):,} bytes)"
        return DeadPage(
            page.url,
            page.host,
            "bad_key",
            f"the message key {shown!r} is not the page's host {page.host!r}",
            source,
        )
    return page


def _text(key: bytes | None) -> str:
    if key is None:
        return ""
    return key.decode("utf-8", errors="replace")


def expiry_policy(settings: StreamSettings) -> ExpiryPolicy:
    return ExpiryPolicy(
        ttl_pages=settings.host_ttl_pages,
        ttl_s=settings.host_ttl_s,
        budget_bytes=settings.state_budget_bytes,
        max_table_entries=settings.max_table_entries,
    )


class StreamWorker:
    """The worker's logic and the per-host tables of the partitions this worker holds."""

    def __init__(self, app: DetemplateApp, settings: StreamSettings, params: EngineParams) -> None:
        self.app = app
        self.settings = settings
        self.params = params
        self.limits = OutputLimits(settings.max_message_bytes)
        self.policy = expiry_policy(settings)
        # A host's index entry is written again once this old (and on its snapshot pages), so
        # that expiry by time or by pages reads it within an eighth of the span.
        self._index_refresh_ms = INDEX_REFRESH_MS
        if self.policy.ttl_s:
            self._index_refresh_ms = min(INDEX_REFRESH_MS, int(self.policy.ttl_s * 1000 / 8))
        self._index_refresh_pages = max(1, self.policy.ttl_pages // 8) if self.policy.ttl_pages else 0
        self._expires = self.policy.expires  # (the policy is frozen)
        self.layout = StateLayout(
            params,
            settings.snapshot_every,
            max_record_bytes=settings.max_message_bytes - RECORD_OVERHEAD_BYTES - MAX_KEY_BYTES,
            max_table_entries=self.policy.max_table_entries,
        )
        self.stats = WorkerStats()
        self._logged = WorkerStats()
        self.hosts: OrderedDict[str, HostState] = OrderedDict()  # LRU of live hosts
        self.progress = app.progress
        self.start_offset: dict[TP, int] = {}
        self.metrics = Metrics()
        self._assigned = False
        self._assigned_at = time.monotonic()
        self._last_sweep = time.monotonic()
        self._scan_s = 0.0  # how long the last sweep took to read the index entries and choose
        self._last_message: dict[TP, float] = {}  # when each partition last had a message handled
        # When `_watch_stalls` last looked at each idle partition: its own clock, apart from
        # `_last_message`, which says how long a partition has been idle (`_release_idle`).
        self._stall_checked: dict[TP, float] = {}
        self._persisted: dict[TP, int] = {}  # changelog offsets acknowledged, not yet given to the store
        self._engine_cpu = 0.0  # the engine's CPU in the page under way, not counted yet (see handle)
        self._partitions: dict[tuple[str, bytes], int] = {}  # (output topic, key) -> partition
        # Every record the worker sends, a record batch a topic partition, handed to the producer
        # after each fetch's pages (detemplate.stream.outbox; `_hand_over`).
        self.outbox = Outbox(self._producer, self._on_batch_sent)
        # Each partition's hosts' first pages waiting for their second (engine/firstpages.py),
        # by pages.raw partition; their offsets hold the partition's commit back (`Progress.hold`).
        self.first_pages: dict[int, FirstPages] = {}
        # Counted when scraped (in the metrics server's thread; `list` copies the values at once).
        self.metrics.count_first_pages_held(lambda: sum(len(f) for f in list(self.first_pages.values())))
        self._deciding = asyncio.Lock()  # a batch's pages, or the held pages an idle partition publishes

        def topic(name: str, partitions: int) -> Any:
            return app.topic(
                name,
                partitions=partitions,
                key_type=bytes,
                value_type=bytes,
                key_serializer="raw",
                value_serializer="raw",
            )

        self.raw_topic = topic(settings.topic_raw, settings.partitions)
        self.inbox = app.inbox = Inbox({settings.topic_raw})
        self.clean_topic = topic(settings.topic_clean, settings.out_partitions)
        self.events_topic = topic(settings.topic_events, settings.out_partitions)
        self.dead_topic = topic(settings.topic_dead, settings.out_partitions)
        changelog = app.topic(
            settings.topic_state,
            partitions=settings.partitions,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            compacting=True,
            deleting=False,
        )
        self.state = app.Table(
            TABLE_NAME,
            default=None,
            partitions=settings.partitions,
            key_type=bytes,  # bytes -> the "raw" serializer: records are our own byte layouts
            value_type=bytes,
            changelog_topic=changelog,
            store=store_url(TABLE_NAME),  # Faust's rocksdb store; a corrupt partition is moved aside, recovered
            options={  # Faust's defaults: a 2 GB block cache and 64 MB write buffers a partition
                "block_cache_size": settings.rocksdb_cache_mb * 1024 * 1024,
                "write_buffer_size": settings.rocksdb_write_buffer_mb * 1024 * 1024,
            },
        )
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # mode types handlers narrowly
        app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]  # same
        # pages.raw is subscribed to, but not read through an agent's stream: the consumer hands
        # its records to the inbox a fetch at a time, and one task decides them in order.
        app.topics.add(self.raw_topic)
        app.task(self._take_batches)
        app.timer(2.0)(self._log_stats)
        app.timer(1.0)(self._update_metrics)
        app.timer(1.0)(self._watch_stalls)
        app.timer(1.0)(self._release_idle)
        app.timer(heap.TRIM_EVERY_S)(self._trim_heap)
        app.task(self._on_start)

    async def _on_start(self) -> None:
        # `kill -USR1 <pid>` logs where every task of the event loop waits (a stuck worker, say).
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, self._log_waits)

    def _log_waits(self) -> None:
        """Where the worker waits: each partition's position, the consumer's flow and its
        client's fetch positions, every task (diagnostics: private fields of Faust and aiokafka)."""
        consumer = self.app.consumer

        def tps(items: Any) -> list[str]:
            return sorted(f"{tp.topic}/{tp.partition}" for tp in items or ())

        client: dict[str, object] = {}
        try:
            kafka = consumer._thread._ensure_consumer()  # type: ignore[attr-defined]
            assignment = kafka._subscription.subscription.assignment
            for tp in kafka.assignment():
                st = assignment.state_value(tp)
                client[f"{tp.topic}/{tp.partition}"] = (
                    st.position if st.has_valid_position else None, st.paused, st.awaiting_reset, st.highwater,
                )
        except Exception as exc:  # diagnostics only
            client["error"] = repr(exc)
        logger.warning(
            "positions %s waiting %s; consumer flow_active=%s active=%s paused=%s; rebalancing=%s recovery=%s; "
            "client (position, paused, awaiting_reset, highwater) %s",
            {tp.partition: n for tp, n in self.progress._next.items()},
            {tp.partition: w.offset for tp, w in self.progress._waits.items()},
            getattr(consumer, "flow_active", "?"),
            tps(getattr(consumer, "_active_partitions", None)),
            tps(getattr(consumer, "_paused_partitions", None)),
            self.app.rebalancing, self.app.in_recovery, client,
        )
        _log_tasks()

    @property
    def store(self) -> CheckedRocksDBStore:
        store = self.state.data
        assert isinstance(store, CheckedRocksDBStore)
        return store

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self._assigned = False
        self.inbox.clear()  # fetched in the old generation: read again from the committed offsets
        self.metrics.set_ready(False)
        self._forget()

    async def _on_assigned(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self._forget()
        assigned = args[0] if args else kwargs.get("assigned", ())
        self._assigned = True
        mine = sorted(tp.partition for tp in assigned if tp.topic == self.settings.topic_raw)
        logger.info("assigned partitions=%s of %s", mine, self.settings.topic_raw)

    def _forget(self) -> None:
        # Partitions may have moved and Faust recovers the table's store from the
        # changelog: live tables are rebuilt from the store on each host's next page, and
        # each partition starts again from its committed offset.
        self.hosts.clear()
        self.first_pages.clear()  # not committed: the partitions' next owner reads them again
        self.progress.forget()
        self.start_offset.clear()
        self._last_message.clear()
        self._stall_checked.clear()
        self._partitions.clear()
        self._assigned_at = time.monotonic()
        self.metrics.forget_partitions()

    async def _watch_stalls(self) -> None:
        """Fetch again a partition that has messages past its position but delivers none.

        Records fetched and never processed leave a gap: a batch stopped or dropped at a
        rebalance, records of an older generation (and, before the worker took pages.raw a
        fetch at a time, the records Faust dropped below its own read offset after a seek
        back: measured, positions 80, the worker waiting at 40, for ever). A later
        message of the partition shows the gap again, but when none comes, nothing would:
        a restarted worker waited for ever in 2 of 16 runs of the snapshot-window test and
        1 of 2 of the corrupt-state test under load. So a partition behind its end (high
        watermark) with no message handled for STALL_S is sought back to its first
        unprocessed offset (or its committed one, when nothing was read in this assignment),
        with nothing else in flight, and the client fetches it again. Not while the inbox
        holds records of it: a batch that takes the worker longer than STALL_S (a loaded
        machine) is no stall, and seeking back then had every record of the partition the
        worker held delivered twice (a 300,000-host run: 952,099 of 1,226,233 pages
        fetched again and skipped)."""
        if not self._assigned or self.app.rebalancing or self.app.in_recovery:
            return
        now = time.monotonic()
        consumer = self.app.consumer
        inbox = self.inbox
        checked = self._stall_checked
        idle = [tp for tp in consumer.assignment() if tp.topic == self.settings.topic_raw
                and now - max(self._last_message.get(tp, self._assigned_at), checked.get(tp, 0.0)) >= STALL_S
                and not (inbox is not None and inbox.holds(tp))]
        if not idle:
            return
        for tp in idle:  # checked again after another STALL_S
            # Not by moving the partition's last message: that is how long it has been idle,
            # which releases its held first pages (`_release_idle`). Moved every STALL_S, it
            # held a lone first page for ever whenever hold_idle_s was not under STALL_S (at
            # the defaults, both 5 s, whenever this timer ran first in the second they met).
            checked[tp] = now
        try:
            ends = await asyncio.wait_for(consumer.highwaters(*idle), timeout=STALL_S)
        except Exception as exc:  # the broker is away: the next round asks again
            logger.debug("high watermarks of idle partitions not known: %r", exc)
            return
        for tp in idle:
            end = ends.get(tp)
            nxt = self.progress.next_offset(tp)
            if nxt is None:
                if end is None or end <= 0:
                    continue
                start = await self._start_offset(tp, int(end))  # the committed offset (the end when none)
                if not self.progress.started(tp):  # the batch task may have started it meanwhile
                    self.progress.start(tp, start)
                    self.start_offset[tp] = start
                nxt = self.progress.next_offset(tp)
            if end is None or nxt is None or nxt >= int(end):
                continue
            logger.warning("partition=%d: offsets %d..%d not delivered for %.0f s: fetching them again",
                           tp.partition, nxt, int(end) - 1, STALL_S)
            self.metrics.order("refetched")
            await consumer.seek(tp, nxt)

    async def _update_metrics(self) -> None:
        m = self.metrics
        m.beat()
        m.observe_tables(hs.table for hs in self.hosts.values())
        m.set_ready(self._assigned and not self.app.rebalancing and not self.app.in_recovery)
        m.set_waiting_partitions(self.progress.waiting())
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]  # TableManager has it, TableManagerT not
        m.set_standby_remaining(recovery.standby_tps, recovery.standby_highwaters, recovery.standby_offsets)
        for tp in list(self.start_offset):
            nxt = self.progress.next_offset(tp)
            try:
                hw = self.app.consumer.highwater(tp)
            except Exception:
                continue
            if hw is not None and nxt is not None:
                m.set_consumer_lag(tp.partition, int(hw) - nxt)

    async def _trim_heap(self) -> None:
        """The heap's free pages back to the system (stream/heap.py): what a flushed memtable
        left among small allocations, and a fetch's buffers beyond the ones kept for the next."""
        heap.trim_heap()

    async def _log_stats(self) -> None:
        if self.stats == self._logged:
            return
        self._logged = replace(self.stats)
        logger.info("stats %s hosts_live=%d", self.stats, len(self.hosts))

    async def _take_batches(self) -> None:
        """The one task that decides pages.raw: a batch at a time from the inbox, in fetch order."""
        inbox = self.inbox
        while True:
            batch = await inbox.get()
            try:
                async with self._deciding:
                    await self.handle_batch(batch)
            finally:
                inbox.done()

    async def handle_batch(self, batch: Batch) -> None:
        """One fetch's pages.raw records, each partition's in offset order; stopped before the
        next page when a rebalance began (the consumer's flow stopped, or a new generation):
        the partitions' next owner, this worker or another, reads on from the committed offsets."""
        app = self.app
        consumer = cast(Consumer, app.consumer)
        self.metrics.batch_in(len(batch))

        def current() -> bool:
            return app.consumer_generation_id == batch.generation and consumer.flow_active

        await self._start_partitions(batch, current)
        for n, (tp, rec) in enumerate(batch.items(current), 1):
            if n % YIELD_EVERY == 0:
                # A batch runs without waiting (sends go to aiokafka's accumulator): let the
                # producer's sender, the commit timer and the rest of the loop run between pages.
                await asyncio.sleep(0)
            try:
                stamp_ms = rec.timestamp if rec.timestamp and rec.timestamp > 0 else int(time.time() * 1000)
                await self.handle(rec.key, rec.value, tp, rec.offset, stamp_ms)
            except Exception as exc:
                # Bad input never gets here (it is a dead letter), nor does an output too large
                # to send. Anything else is a bug or a broken setup: stop the process at once,
                # before any commit: a restarted worker reads the message again.
                if is_corruption(exc):
                    # A damaged block of the partition's RocksDB: move it aside first, so the
                    # restart rebuilds the partition from the changelog instead of failing again.
                    store = self.state.data
                    if isinstance(store, CheckedRocksDBStore):
                        store.quarantine(tp.partition, f"a read failed: {exc}")
                logger.critical(
                    "partition=%d offset=%d: unexpected error, exiting so that the message is read again",
                    tp.partition, rec.offset, exc_info=True,
                )
                logging.shutdown()
                os._exit(70)
        # Every output and state record of the batch's pages to the producer, after which the
        # commit may pass the pages (`Progress.sent`); then the batch's state records into the
        # store's databases at once (store.py; a read, a persisted offset or a revocation writes
        # them sooner). A failure of either (the producer's, or a full disk, a damaged database)
        # stops the process as a failed page does (exit 70): no commit passed those pages, and
        # the store's persisted offset has not passed those records, so the restart reads them
        # again.
        try:
            await self._hand_over()
            self.store.flush()
        except Exception:
            logger.critical("handing the batch's records to the producer or writing its state records failed, "
                            "exiting", exc_info=True)
            logging.shutdown()
            os._exit(70)
        # What Faust's stream tells its monitor, whose check for stalled partitions reads it.
        now = time.monotonic()
        for tp in batch.records:
            app.monitor.stream_inbound_time[tp] = now

    # -- in order, every message once ------------------------------------------------------

    async def handle(self, key: bytes | None, value: bytes | None, tp: TP, offset: int, now_ms: int) -> None:
        """One pages.raw message: processed in offset order (see detemplate.stream.commits)."""
        progress = self.progress
        self._last_message[tp] = time.monotonic()
        if not progress.started(tp):
            start = await self._start_offset(tp, offset)
            progress.start(tp, start)
            self.start_offset[tp] = start
        position = progress.position(tp, offset)
        if position is Position.AGAIN:
            self.stats.skipped += 1
            self.metrics.order("skipped")
            return
        if position is Position.AHEAD:
            seek, hole = progress.wait(tp, time.monotonic())
            missing = progress.next_offset(tp)
            if not hole:
                self.stats.deferred += 1
                self.metrics.order("deferred")
                if seek and missing is not None:
                    logger.warning(
                        "partition=%d offset=%d: offsets from %d not processed yet (skipped by the consumer "
                        "around a rebalance): fetching them again first", tp.partition, offset, missing,
                    )
                    await self.app.consumer.seek(tp, missing)
                return
            logger.warning(
                "partition=%d: offsets %s..%d never came for %.0f s: taken for a hole in the log",
                tp.partition, missing, offset - 1, progress.hold_s,
            )
            progress.skip_to(tp, offset)
        if self._expires:
            await self._maybe_sweep(now_ms)
        first_pages = self.first_pages.get(tp.partition)
        if first_pages is not None and first_pages.held:
            # Held first pages whose second page did not come within the bound: as decided alone.
            due = first_pages.due(offset)
            await self._release(tp, due, len(due), "alone")
        await self.process(key, value, tp, offset, now_ms)
        progress.done(tp, offset)
        if self._engine_cpu:
            # The engine's CPU in the page (its decision, a held first page's, freeing them), counted once.
            self.metrics.add_decide_cpu(self._engine_cpu)
            self._engine_cpu = 0.0

    async def _start_partitions(self, batch: Batch, current: Callable[[], bool]) -> None:
        """Where each partition of the batch new to this assignment starts, asked all at once: each
        ask of the group coordinator waits behind the fetch the consumer thread has under way (up
        to a second), so one at a time, as the batch reached each partition, a batch of eight
        partitions waited up to eight seconds (seen: 40 pages in 2 s)."""
        firsts = [(tp, recs[0].offset) for tp, recs in batch.records.items() if recs and not self.progress.started(tp)]
        if not firsts:
            return
        starts = await asyncio.gather(*(self._start_offset(tp, offset) for tp, offset in firsts))
        if not current():  # a rebalance meanwhile: the next assignment asks again
            return
        for (tp, _), start in zip(firsts, starts, strict=True):
            if not self.progress.started(tp):
                self.progress.start(tp, start)
                self.start_offset[tp] = start

    async def _start_offset(self, tp: TP, offset: int) -> int:
        """Where a partition starts in this assignment: its committed offset, or its first one."""
        consumer = self.app.consumer
        try:
            committed = await consumer.start_offset(tp)  # type: ignore[attr-defined]  # SafeCommitConsumer
        except Exception as exc:  # the broker is unreachable: Faust's copy, else the message's own offset
            committed = getattr(consumer, "_committed_offset", {}).get(tp)
            logger.warning("partition=%d: no committed offset from the broker (%r); starting at %s",
                           tp.partition, exc, offset if committed is None else committed)
        # A first message below the committed offset (read again): start there, it is processed again.
        return offset if committed is None else min(int(committed), offset)

    # -- one page --------------------------------------------------------------------------

    async def process(self, key: bytes | None, value: bytes | None, tp: TP, offset: int, now_ms: int) -> None:
        """Decide one message and send its outputs; its state records before them."""
        self.metrics.page_in()
        raw = value or b""  # a dead letter carries the message's bytes (empty for a tombstone)
        source = f"{tp.topic}/{tp.partition}/{offset}"
        page = decode_message(key, value, source)
        if isinstance(page, DeadPage):
            await self._send_dead(page, raw)
            return
        host = page.host
        hs = self.hosts.get(host)
        if hs is None:
            hs = await self._load_host(host, tp.partition)
        else:
            self.hosts.move_to_end(host)
        table = hs.table
        if offset <= table.source_offset:
            await self._again(page, raw, tp, offset, hs)
            return
        outcome, _ballot, walked = self._decide(page, table)
        if outcome.dead is not None or outcome.clean is None:
            await self._send_dead(outcome.dead or DeadPage(page.url, host, "bad_record", "no outcome", source), raw)
            return
        table.source_offset = offset
        events = list(outcome.events)
        dropped = table.evict_oldest(self.policy.max_table_entries)
        if dropped:
            events.append(self._capped(page, table, dropped))
        snapshot = self.layout.is_snapshot_page(table.pages)
        if snapshot:
            await self._before_snapshot(host, table.pages, tp, hs)
        writes: list[tuple[bytes, bytes | None]] = []
        for suffix, record in self.layout.records(table, outcome):
            writes += self.layout.physical(host, suffix, record, hs)
        if snapshot:
            hs.snapshot_page, hs.snapshot_offset = table.pages, offset
        writes += self._index_records(host, hs, offset, now_ms, force=table.pages == 1 or len(writes) > 1)
        await self._put_state(tp.partition, writes)
        self.stats.pages += 1
        if len(events) != len(outcome.events):
            outcome = dataclasses.replace(outcome, events=tuple(events))
        await self._decided(page, outcome, tp, offset, raw, walked)
        # The page, its parse tree, walk, ballot and outcome are freed here (unless a held first
        # page keeps them), and that is counted as the engine's CPU, as `run` counts it: its
        # engine loop frees each page's before it takes the next. Left to the return, it went
        # into the worker's own costs (0.019 ms a page on small pages, docs/stream.md).
        c0 = time.thread_time()
        del page, outcome, _ballot, walked, events
        self._engine_cpu += time.thread_time() - c0

    async def _decided(
        self, page: RawPage, outcome: Outcome, tp: TP, offset: int, raw: bytes | None, walked: WalkedPage | None
    ) -> None:
        """Publish what a live page's decision lets out: nothing for a host's first page (held
        for its second), the held first page then this one for a second page, else this one."""
        first_pages = self.first_pages.get(tp.partition)
        if first_pages is None:
            first_pages = self.first_pages[tp.partition] = FirstPages(self.params, self.settings.with_html)
        c0 = time.thread_time()
        decided = first_pages.decided(page, outcome, None, offset, raw, walked)  # a held first page decided again
        self._engine_cpu += time.thread_time() - c0
        await self._release(tp, decided, sum(d.page is not page for d in decided))

    async def _release(self, tp: TP, decided: list[Decided], released: int, how: str = "second") -> None:
        """Publish decided pages (their events with them; `released` of them held first pages,
        published `how`), and let the partition's commit move up to its oldest page still held."""
        for d in decided:
            clean = d.outcome.clean
            assert clean is not None  # FirstPages holds and hands back live pages only
            await self._publish(d.page.host, clean, d.outcome.events, d.page.source, d.tag)
        first_pages = self.first_pages.get(tp.partition)
        self.progress.hold(tp, None if first_pages is None else first_pages.oldest())
        if released:
            self.metrics.first_pages_released(released, how)

    async def _release_idle(self) -> None:
        """Publish, as decided alone, the first pages held by a partition that had no message
        for `hold_idle_s` (their second page may never come; `run` does this at the end of its input)."""
        if not self.first_pages:
            return
        now = time.monotonic()
        async with self._deciding:
            for tp in list(self.progress.partitions()):
                first_pages = self.first_pages.get(tp.partition)
                if first_pages is None or not first_pages.held:
                    continue
                if now - self._last_message.get(tp, now) < self.settings.hold_idle_s or self.inbox.holds(tp):
                    continue
                idle = first_pages.flush()
                await self._release(tp, idle, len(idle), "alone")
            await self._hand_over()  # before the lock goes: the commit may pass those pages then

    def _decide(self, page: RawPage, table: HostTable) -> Decision:
        """`decide`, timed: its latency and the event loop thread's CPU in it (the engine's share)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        decision = decide_page(page, table, self.params, self.settings.with_html)
        self._engine_cpu += time.thread_time() - c0
        self.metrics.observe_decision(decision.outcome, time.perf_counter() - t0)
        return decision

    def _capped(self, page: RawPage, table: HostTable, dropped: int) -> TemplateEvent:
        self.stats.capped_tables += 1
        self.metrics.table_capped()
        logger.warning("host=%s: table bounded to %d entries (%d dropped, the least recently seen)",
                       page.host, len(table), dropped)
        return capped_event(page.host, table.pages, "", dropped, len(table), self.policy.max_table_entries)

    async def _again(self, page: RawPage, raw: bytes | None, tp: TP, offset: int, hs: HostState) -> None:
        """A page at or below the table's source_offset: a replay, a dead page again, or an old one."""
        host = page.host
        try:
            loaded = self.layout.load_before(self._records(tp.partition, host), offset)
        except StateError as exc:
            logger.error("host=%s partition=%d offset=%d: the state before the page does not load: %s",
                         host, tp.partition, offset, exc)
            loaded = None
        if loaded is not None:
            self.stats.replayed += 1
            self.metrics.order("replayed")
            table, delta = loaded
            outcome, _ballot, walked = self._decide(page, table)
            cluster = -1 if outcome.cluster is None else outcome.cluster
            if outcome.applied != delta.keys or cluster != delta.cluster or outcome.clean is None:
                logger.error(
                    "host=%s partition=%d offset=%d: replayed page decided differently than the first time",
                    host, tp.partition, offset,
                )
            if outcome.clean is None:
                await self._send_dead(outcome.dead or DeadPage(page.url, host, "bad_record", "", page.source), raw)
                return
            events = list(outcome.events)
            dropped = table.evict_oldest(self.policy.max_table_entries)
            if dropped:
                events.append(capped_event(host, table.pages, "", dropped, len(table), self.policy.max_table_entries))
                outcome = dataclasses.replace(outcome, events=tuple(events))
            await self._decided(page, outcome, tp, offset, raw, walked)  # a first page is held again
            return
        # No delta has this offset. A dead page leaves none: deciding it again gives the same
        # dead letter (a page's deadness does not depend on the table). Otherwise the page is
        # older than the retained deltas or was never applied: decide it against a copy of
        # the current table, so that it has an output, and leave the state as it is.
        work = HostTable.from_bytes(hs.table.to_bytes(), self.params.table)
        outcome = self._decide(page, work).outcome
        if outcome.clean is None:
            await self._send_dead(outcome.dead or DeadPage(page.url, host, "bad_record", "", page.source), raw)
            return
        self.stats.redecided += 1
        self.metrics.order("redecided")
        logger.warning(
            "host=%s partition=%d offset=%d: a page at or below the state's last offset %d without a delta "
            "(older than the retained deltas, or never applied): decided against the current table, not applied",
            host, tp.partition, offset, hs.table.source_offset,
        )
        await self._publish(host, outcome.clean, (), page.source, raw)

    async def _load_host(self, host: str, partition: int) -> HostState:
        """A host that is not live: its state loaded from the partition's store (a new one where
        it has none), and made live (`process` looks the live ones up itself)."""
        try:
            loaded = self.layout.host_state(host, self._records(partition, host))
        except StateError as exc:
            # Records that do not decode or do not join up (never written by this layout): the
            # host starts afresh rather than stopping the partition; its old records go first.
            logger.error("host=%s partition=%d: its state does not load (%s): dropped, the host starts afresh",
                         host, partition, exc)
            self.metrics.order("state_reset")
            keys = [*self.store.keys_with_prefix(partition, host_prefix(host)), index_key(host)]
            await self._put_state(partition, [(k, None) for k in keys])
            loaded = None
        hs = loaded if loaded is not None else HostState(HostTable(self.params.table))
        index = self.store.get_record(partition, index_key(host))
        if index is not None and loaded is not None:
            try:
                entry = IndexEntry.from_bytes(host, index)
                hs.index_page, hs.index_ms = entry.last_page, entry.last_ms
            except StateError:
                pass  # rewritten on this page
        self.hosts[host] = hs
        self.stats.rebuilt_hosts += 1
        if len(self.hosts) > self.settings.cache_hosts:
            self.hosts.popitem(last=False)  # its state is in the store already
        return hs

    def _records(self, partition: int, host: str) -> dict[bytes, bytes]:
        """A host's records in the partition's store, by suffix (one range scan)."""
        prefix = host_prefix(host)
        return {k[len(prefix) :]: v for k, v in self.store.scan(partition, prefix).items()}

    def _index_records(
        self, host: str, hs: HostState, offset: int, now_ms: int, force: bool
    ) -> list[tuple[bytes, bytes | None]]:
        """The host's index entry, when it is due: its first page, a snapshot page, or stale
        (older than `_index_refresh_ms`, or `_index_refresh_pages` offsets behind)."""
        if not (
            force or hs.index_page < 0 or now_ms - hs.index_ms >= self._index_refresh_ms
            or (self._index_refresh_pages and offset - hs.index_page >= self._index_refresh_pages)
        ):
            return []
        key = index_key(host)
        entry = IndexEntry(host, offset, now_ms, hs.state_bytes + len(key) + 36, hs.table.pages)
        hs.index_page, hs.index_ms = offset, now_ms
        return [(key, entry.to_bytes())]

    async def _before_snapshot(self, host: str, page_no: int, tp: TP, hs: HostState) -> None:
        """Make sure the pages the older snapshot covers are committed before it is dropped.
        `hs`: the host's live state, which knows the input offset of the page of its last
        snapshot when this process wrote it (else that page's delta is read from the store)."""
        old = page_no - self.layout.k
        if old <= 0:
            return
        if hs.snapshot_page == old:
            old_offset: int | None = hs.snapshot_offset
        else:
            old_offset = self._page_offset(tp.partition, host, old)
        if old_offset is None or self._committed(tp, old_offset):
            return
        if self.settings.commit_before_snapshot:
            # The outbox's records first: a commit passes only pages whose records are in the producer.
            await self._hand_over()
            for _ in range(COMMIT_TRIES):
                # A commit already under way (the timer's) makes this one wait for it and return
                # without committing, and that one may have been computed before the page was
                # done (seen: a batch's pages of another partition first): commit again.
                self.stats.forced_commits += 1
                await self.app.consumer.commit()
                if self._committed(tp, old_offset):
                    break
        if not self._committed(tp, old_offset):
            # A replay of that page after a crash now finds no snapshot to rebuild it from: it
            # is decided against the current table (`_again`), so it still has an output.
            logger.warning(
                "host=%s partition=%d offset=%d: page %d not committed before its snapshot was replaced",
                host, tp.partition, old_offset, old,
            )

    def _page_offset(self, partition: int, host: str, page_no: int) -> int | None:
        """The input offset of one of the host's retained pages, from its delta record alone
        (point reads of the record and its parts, not a scan of all the host's records)."""
        records = get_record(
            partial(self.store.get_record, partition), host_prefix(host), self.layout.delta_suffix(page_no)
        )
        return self.layout.offset_of_page(records, page_no)

    def _committed(self, tp: TP, offset: int) -> bool:
        """Whether `offset` of `tp` is committed (will not be read again after a restart)."""
        committed = self.app.monitor.tp_committed_offsets.get(tp, -1)
        # Offsets below the one this worker started the partition at were committed before.
        return offset < max(committed, self.start_offset.get(tp, 0))

    # -- whole hosts leave -------------------------------------------------------------------

    async def _maybe_sweep(self, now_ms: int) -> None:
        """Sweep the expired hosts when one is due (called only where hosts expire: `_expires`)."""
        now = time.monotonic()
        # A sweep reads every host's index entry: its time grows with the hosts held (0.8 s for
        # 190,000 in the million-host benchmark). The next one waits at least SWEEP_SPACING times
        # as long as that reading took, so that it takes at most a twentieth of the worker's time
        # at any size. (Dropping the hosts it chose is not counted: that work follows the pages
        # that brought new hosts, and counting it would space the sweeps further the more there is
        # to drop, letting the state run further over its budget each time.)
        if now - self._last_sweep < max(self.settings.expiry_sweep_s, SWEEP_SPACING * self._scan_s):
            return
        self._last_sweep = now
        await self.sweep(int(time.time() * 1000))

    async def sweep(self, now_ms: int) -> list[Expired]:
        """Drop the hosts of this worker's partitions that expiry or the byte budget picks."""
        t0 = time.perf_counter()
        entries: list[IndexEntry] = []
        partition_of: dict[str, int] = {}
        page_now: dict[str, int] = {}
        committed: dict[str, int] = {}
        raw_tps = [tp for tp in self.app.consumer.assignment() if tp.topic == self.settings.topic_raw]
        for tp in raw_tps:
            done = max(self.app.monitor.tp_committed_offsets.get(tp, -1), self.start_offset.get(tp, 0))
            nxt = self.progress.next_offset(tp)
            after: bytes | None = None
            while True:
                # A chunk at a time, the event loop between them: the consumer's heartbeats and
                # timers go on while a sweep reads hundreds of thousands of entries.
                chunk = self.store.scan_chunk(tp.partition, INDEX_PREFIX, after, SWEEP_CHUNK)
                for key, value in chunk:
                    host = host_of(key)
                    if host is None:
                        continue
                    entries.append(IndexEntry.from_bytes(host, value))
                    partition_of[host] = tp.partition
                    page_now[host] = nxt if nxt is not None else done
                    committed[host] = done
                if len(chunk) < SWEEP_CHUNK:
                    break
                after = chunk[-1][0]
                await asyncio.sleep(0)
                if tp.partition not in self._raw_partitions():
                    break  # revoked meanwhile: its entries are left out below
        # A host whose last page is not committed yet is never dropped: a replay of that page
        # after a crash would find no state and decide it as a new host's first page.
        candidates = [e for e in entries if e.last_page < committed[e.host]]
        expired = choose_expired(candidates, self.policy, now_ms, page_now)
        self._scan_s = time.perf_counter() - t0
        dropped: list[Expired] = []
        for x in expired:
            partition = partition_of[x.entry.host]
            # The event loop ran between chunks and between drops: a partition revoked meanwhile
            # is another worker's now, and so are its hosts (their tombstones would reach its
            # changelog).
            if partition not in self._raw_partitions():
                continue
            await self._drop_host(partition, x)
            dropped.append(x)
            if len(dropped) % SWEEP_DROPS == 0:
                await asyncio.sleep(0)  # a sweep that drops tens of thousands of hosts lets the loop run
        kept = len(entries) - len(dropped)
        kept_bytes = sum(e.state_bytes for e in entries) - sum(x.entry.state_bytes for x in dropped)
        self.metrics.set_store_size(kept, kept_bytes)
        if dropped or entries:
            logger.info("expiry sweep: %d hosts in %d partitions, %d dropped, %d bytes kept, %.3f s",
                        len(entries), len(raw_tps), len(dropped), kept_bytes, time.perf_counter() - t0)
        return dropped

    def _raw_partitions(self) -> set[int]:
        """The pages.raw partitions assigned to this worker now."""
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == self.settings.topic_raw}

    async def _drop_host(self, partition: int, x: Expired) -> None:
        host = x.entry.host
        prefix = host_prefix(host)
        records = self.store.scan(partition, prefix)
        # The event says what the host held now (its index entry may be a few pages old).
        logical = assemble({k[len(prefix) :]: v for k, v in records.items()})
        pages = max((d.page_no for d in self.layout.deltas(logical).values()), default=x.entry.pages)
        nbytes = sum(len(k) + len(v) for k, v in records.items())
        x = replace(x, entry=replace(x.entry, pages=pages, state_bytes=nbytes + len(index_key(host)) + 36))
        await self._put_state(partition, [(k, None) for k in [*records, index_key(host)]])
        self.hosts.pop(host, None)
        self.stats.expired_hosts += 1
        self.metrics.host_expired(x.reason)
        await self._publish_events(host, [expired_event(x)], f"expiry of {host}")

    # -- writing ---------------------------------------------------------------------------

    async def _put_state(self, partition: int, writes: list[tuple[bytes, bytes | None]]) -> None:
        """Write state records (None: a tombstone) to the partition's store and its changelog partition.

        Not through the Faust table's own changelog path (`table[key] = value`): that goes
        through Faust's ProducerBuffer, whose flush returns after 0.1 s without a message
        sent, or as soon as the last message has left its queue but before it reached
        aiokafka, so the offset commit that follows a flush could overtake the changelog
        record (measured: committed pages missing from the state after SIGKILL under load).
        Added to the outbox here, the record is in aiokafka's accumulator once the fetch's
        pages are done (`_hand_over`), before the commit may pass this page, so the flush
        Faust runs before committing its offset covers it.
        """
        if not writes:
            return
        self.store.write(partition, writes)
        topic = self.settings.topic_state
        outbox = self.outbox
        nbytes = 0
        for key, value in writes:
            if not outbox.append(topic, partition, key, value):  # its batch is full: handed over first
                await outbox.add_to_fresh(topic, partition, key, value)
            nbytes += len(key) + len(value or b"")
        self.stats.state_records += len(writes)
        self.stats.state_bytes += nbytes
        self.metrics.changelog_records(len(writes))

    def _producer(self) -> Any:
        """aiokafka's producer under Faust's (Faust's Topic.send, and even its Producer.send, cost
        more per message than the page's own JSON): the same producer, which Faust flushes before
        it commits input offsets."""
        return self.app.producer._ensure_producer()  # type: ignore[attr-defined]  # Faust's aiokafka Producer

    async def _hand_over(self) -> None:
        """Every record in the outbox to the producer; then the commit may pass the pages
        processed so far (their outputs and state records are in the producer)."""
        await self.outbox.flush()
        self.progress.sent()

    def _on_batch_sent(self, fut: Any, count: int) -> None:
        """A batch of the outbox acknowledged (or failed: the process exits before any commit
        passes its records' pages). A state batch: the store's changelog offset moves up to its
        last record, once for all the batches a produce request acknowledged."""
        _exit_on_send_error(fut)
        if fut.cancelled() or fut.exception() is not None:
            return
        md = fut.result()
        if md.topic != self.settings.topic_state:
            return
        tp = TP(md.topic, md.partition)
        if not self._persisted:
            asyncio.get_running_loop().call_soon(self._persist_offsets)
        self._persisted[tp] = max(md.offset + count - 1, self._persisted.get(tp, -1))

    def _persist_offsets(self) -> None:
        """What Faust's table does for its own changelog records: remember the offset the local
        store holds, so a restart on this directory reads only what follows. Once for all the
        records a produce request acknowledged (their callbacks run together), not once each."""
        persisted, self._persisted = self._persisted, {}
        for tp, offset in persisted.items():
            self.state.data.set_persisted_offset(tp, offset)  # type: ignore[attr-defined]  # on every Faust store

    async def _send(self, topic: str, key: bytes, value: bytes) -> None:
        # To the outbox, in the partition aiokafka would choose (`_partition`). Every value here
        # was sized against the limit first (detemplate.stream.outputs).
        part = self._partitions.get((topic, key))
        if part is None:
            part = await self._partition(topic, key)
        if not self.outbox.append(topic, part, key, value):  # its batch is full: handed over first
            await self.outbox.add_to_fresh(topic, part, key, value)

    async def _partition(self, topic: str, key: bytes) -> int:
        """aiokafka's choice of a partition for `key` (murmur2 of the key, in Python: its default
        partitioner), remembered per key; the topic's metadata awaited first when it is not in."""
        producer = self._producer()
        if not producer._metadata.partitions_for_topic(topic):
            await producer.partitions_for(topic)
        if len(self._partitions) >= PARTITION_CACHE_KEYS:
            self._partitions.clear()
        part = self._partitions[(topic, key)] = int(producer._partition(topic, None, key, None, key, None))
        return part

    async def _publish(
        self, host: str, clean: CleanPage, events: Iterable[TemplateEvent], source: str, raw: bytes | None
    ) -> None:
        """A page's clean record (or the dead letter that replaces it) and its events."""
        key = output_key(host)
        fitted = fit_clean(clean, key, self.limits, source)
        if fitted.value is None:
            assert fitted.dead is not None
            logger.warning("host=%s %s: %s", host, source, fitted.dead.detail)
            await self._send_dead(fitted.dead, raw)
        else:
            if fitted.omitted:
                self.stats.reduced += 1
                logger.info("host=%s %s: clean page of %s sent without %s to fit %d bytes", host, source,
                            clean.url[:200], ", ".join(fitted.omitted), self.limits.max_message_bytes)
            self.metrics.published_clean(fitted.omitted)
            await self._send(self.settings.topic_clean, key, fitted.value)
        if events:
            await self._publish_events(host, events, source, key)

    async def _publish_events(
        self, host: str, events: Iterable[TemplateEvent], source: str, key: bytes | None = None
    ) -> None:
        if key is None:
            key = output_key(host)
        for ev in events:
            fitted = fit_event(ev, key, self.limits, source)
            if fitted.value is None:
                assert fitted.dead is not None
                await self._send_dead(fitted.dead, None)
                continue
            self.metrics.published_event(ev.type)
            await self._send(self.settings.topic_events, key, fitted.value)

    async def _send_dead(self, dead: DeadPage, raw: bytes | None) -> None:
        self.stats.dead += 1
        logger.debug("dead letter %s: %s (%s)", dead.reason, dead.detail[:300], dead.source)
        key, value = fit_dead(dead, raw, self.limits)
        self.metrics.published_dead(dead.reason)
        await self._send(self.settings.topic_dead, key, value)


def _log_tasks() -> None:
    """Log where every task of the running event loop waits (the whole chain of awaits), and
    every thread's stack."""
    import io
    import sys
    import threading
    import traceback

    out = io.StringIO()
    for task in asyncio.all_tasks():
        out.write(f"task {task.get_name()}:\n")
        for line in _await_chain(task.get_coro()):
            out.write(f"  {line}\n")
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.write(f"thread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame, limit=12))}")
    logger.warning("tasks and threads:\n%s", out.getvalue())


def _await_chain(obj: Any, depth: int = 40) -> list[str]:
    """Where a coroutine (or async generator) waits: each frame down its chain of awaits."""
    lines = []
    while obj is not None and depth > 0:
        depth -= 1
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "ag_frame", None) or getattr(obj, "gi_frame", None)
        if frame is not None:
            lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        nxt = getattr(obj, "cr_await", None) or getattr(obj, "ag_await", None) or getattr(obj, "gi_yieldfrom", None)
        if nxt is None and isinstance(obj, asyncio.Future) and not isinstance(obj, asyncio.Task):
            lines.append(f"a future: {obj!r}"[:300])
        obj = nxt
    return lines


def _exit_on_send_error(fut: Any) -> None:
    """A message the producer gave up on: stop the process at once, before any offset commit.

    This callback runs before Faust's flush-then-commit can go on, so the input offsets
    of the lost message are not committed: a restarted worker reads them again, as after
    SIGKILL (which the state design recovers from with nothing lost). Outputs are sized
    before they are sent, so a message too large for the producer never gets here; one
    the broker refuses as too large means the broker's limit is below the worker's.
    """
    if fut.cancelled() or fut.exception() is None:
        return
    exc = fut.exception()
    if "TooLarge" in type(exc).__name__:
        logger.critical(
            "the broker refused a message as too large: DETEMPLATE_MAX_MESSAGE_BYTES must not exceed the "
            "brokers' message.max.bytes (or the topics' max.message.bytes): %r", exc,
        )
    logger.critical("a message could not be sent, exiting so that its input is read again: %r", exc)
    os._exit(70)


def build_app(settings: StreamSettings, params: EngineParams | None = None) -> tuple[DetemplateApp, StreamWorker]:
    """The Faust app and its worker logic, configured from `settings`."""
    app = DetemplateApp(
        settings.app_id,
        tansu=settings.tansu,
        stop_timeout_s=settings.stop_timeout_s,
        broker=settings.faust_broker,
        broker_credentials=settings.broker_credentials(),
        store="rocksdb://",
        datadir=settings.data_dir,
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_s,
        broker_rebalance_timeout=settings.rebalance_timeout_s,
        broker_commit_interval=settings.commit_interval_s,
        producer_linger=settings.linger_ms / 1000.0,
        producer_max_batch_size=min(PRODUCER_BATCH_BYTES, settings.max_message_bytes - RECORD_OVERHEAD_BYTES),
        producer_max_request_size=settings.max_message_bytes,
        table_standby_replicas=settings.standby_replicas,
        consumer_auto_offset_reset="earliest",
        producer_compression_type=settings.compression or None,
        consumer_max_fetch_size=settings.max_fetch_bytes,
        web_enabled=False,
    )
    worker = StreamWorker(app, settings, params or settings.engine_params())
    return app, worker


__all__ = ["DetemplateApp", "StreamWorker", "WorkerStats", "build_app", "check_host", "decode_message"]
