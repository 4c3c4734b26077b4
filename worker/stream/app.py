"""The Faust app: pages.raw -> decide -> pages.clean, templates.events, pages.dead.

One agent (concurrency 1: a host's pages must be decided in input order) reads pages.raw,
keyed by host. For each message it decodes the JSON record exactly as `detemplate run`
decodes a JSONL line, calls `detemplate.engine.pipeline.decide` (the offline command's decision),
and sends the outputs serialised with `detemplate.io.codec`, keyed by host.

State (see detemplate.state.changelog): live `HostTable` objects in memory, backed by a Faust
table in RocksDB whose changelog gets one delta record per page plus one snapshot per
host every K pages. The in-memory tables are dropped at every rebalance and rebuilt
from the Faust table (which Faust recovers from the changelog) on the host's next page.

Delivery is at-least-once with idempotent state. Faust flushes the producer (outputs
and changelog) before it commits input offsets, so after a crash the state may be ahead
of the committed offsets, never behind. A replayed page (input offset <= the table's
`source_offset`) is not applied again; the worker rebuilds the table as of just before
it and decides it again, so its clean page and events are sent again identical to the
first time. The rebuild needs the page among the host's last K pages: before a snapshot
drops the older one, the worker makes sure the pages it covered are committed.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import faust
from aiokafka.errors import MessageSizeTooLargeError  # type: ignore[import-untyped]  # no stubs
from faust.types import TP

from ..engine.model import DeadPage, Outcome, RawPage
from ..engine.params import EngineParams
from ..engine.pipeline import decide
from ..engine.table import HostTable
from ..io import codec
from ..io.sources import decode_record
from ..settings import StreamSettings
from ..state.changelog import StateLayout
from .commits import SafeCommitTransport
from .metrics import Metrics
from .store import CheckedRocksDBStore, is_corruption, store_url

logger = logging.getLogger(__name__)

TABLE_NAME = "hosts"


@dataclass(slots=True)
class WorkerStats:
    """What the worker did, for logs and the benchmark."""

    pages: int = 0
    dead: int = 0
    replayed: int = 0
    unrecoverable: int = 0
    forced_commits: int = 0
    rebuilt_hosts: int = 0
    state_records: int = 0
    state_bytes: int = 0


class DetemplateApp(faust.App):
    """faust.App with safe offset commits, and the Tansu workaround transport when the
    settings ask for it."""

    def __init__(self, *args: Any, tansu: bool = False, **kwargs: Any) -> None:
        self.tansu = tansu  # read when Faust first builds its transport, after __init__
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Any:
        if self.tansu:
            from .tansu import TansuTransport

            return TansuTransport(self.conf.broker_consumer, self)
        # Commits that never pass over an unprocessed message (worker/stream/commits.py).
        return SafeCommitTransport(self.conf.broker_consumer, self)


def decode_message(key: bytes | None, value: bytes | None, source: str) -> RawPage | DeadPage:
    """A pages.raw message -> RawPage, or DeadPage with the reason (never raises for bad input)."""
    if not value:
        return DeadPage("", _text(key), "empty_message", "the message has no value (a tombstone or empty)", source)
    page = decode_record(value, source)
    if isinstance(page, DeadPage):
        if not page.host:
            page = DeadPage(page.url, _text(key), page.reason, page.detail, page.source)
        return page
    if key is None or _text(key) != page.host:
        # Partitioning by host is what keeps a host's pages in order on one worker;
        # a page under another key could be decided out of order against the wrong state.
        return DeadPage(
            page.url,
            page.host,
            "bad_key",
            f"the message key {_text(key)!r} is not the page's host {page.host!r}",
            source,
        )
    return page


def _text(key: bytes | None) -> str:
    if key is None:
        return ""
    return key.decode("utf-8", errors="replace")


class StreamWorker:
    """The agent's logic and the per-host tables of the partitions this worker holds."""

    def __init__(self, app: DetemplateApp, settings: StreamSettings, params: EngineParams) -> None:
        self.app = app
        self.settings = settings
        self.params = params
        self.layout = StateLayout(params, settings.snapshot_every)
        self.stats = WorkerStats()
        self._logged = WorkerStats()
        self.tables: OrderedDict[str, HostTable] = OrderedDict()  # LRU of live tables
        self.first_offset: dict[TP, int] = {}
        self.next_offset: dict[TP, int] = {}
        self.metrics = Metrics()
        self._assigned = False

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
        )
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # mode types handlers narrowly
        app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]  # same
        app.agent(self.raw_topic, name="detemplate.pages", concurrency=1)(self.agent)
        app.timer(2.0)(self._log_stats)
        app.timer(1.0)(self._update_metrics)

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self._assigned = False
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
        # changelog: live tables are rebuilt from the store on each host's next page.
        self.tables.clear()
        self.first_offset.clear()
        self.next_offset.clear()
        self.metrics.forget_partitions()

    async def _update_metrics(self) -> None:
        m = self.metrics
        m.beat()
        m.observe_tables(self.tables)
        m.set_ready(self._assigned and not self.app.rebalancing and not self.app.in_recovery)
        for tp, nxt in list(self.next_offset.items()):
            try:
                hw = self.app.consumer.highwater(tp)
            except Exception:
                continue
            if hw is not None:
                m.set_consumer_lag(tp.partition, int(hw) - nxt)

    async def _log_stats(self) -> None:
        if self.stats == self._logged:
            return
        self._logged = replace(self.stats)
        logger.info("stats %s hosts_live=%d", self.stats, len(self.tables))

    async def agent(self, stream: Any) -> None:
        async for event in stream.events():
            msg = event.message
            try:
                await self.handle(msg.key, msg.value, msg.tp, msg.offset)
            except Exception as exc:
                # Bad input never gets here (it is a dead letter). Anything else is a bug or a
                # broken setup: Faust would restart the agent and go on with the next message,
                # and this one might be committed without its output. Stop the process at once
                # instead, before any commit: a restarted worker reads the message again.
                if is_corruption(exc):
                    # A damaged block of the partition's RocksDB: move it aside first, so the
                    # restart rebuilds the partition from the changelog instead of failing again.
                    store = self.state.data
                    if isinstance(store, CheckedRocksDBStore):
                        store.quarantine(msg.tp.partition, f"a read failed: {exc}")
                logger.critical(
                    "partition=%d offset=%d: unexpected error, exiting so that the message is read again",
                    msg.tp.partition, msg.offset, exc_info=True,
                )
                logging.shutdown()
                os._exit(70)

    def _get(self, key: bytes) -> bytes | None:
        value = self.state.get(key)
        return value if value is None else bytes(value)

    async def handle(self, key: bytes | None, value: bytes | None, tp: TP, offset: int) -> None:
        self.first_offset.setdefault(tp, offset)
        self.next_offset[tp] = offset + 1
        self.metrics.page_in()
        source = f"{tp.topic}/{tp.partition}/{offset}"
        page = decode_message(key, value, source)
        if isinstance(page, DeadPage):
            self.metrics.observe_dead(page)
            await self._send_dead(page, value)
            return
        host = page.host
        table = self.tables.get(host)
        if table is None:
            table = self.layout.load(self._get, host) or HostTable(self.params.table)
            self.tables[host] = table
            self.stats.rebuilt_hosts += 1
            if len(self.tables) > self.settings.cache_hosts:
                self.tables.popitem(last=False)  # its state is in the store already
        else:
            self.tables.move_to_end(host)
        if offset <= table.source_offset:
            await self._replay(page, value, tp, offset)
            return
        t0 = time.perf_counter()
        outcome = decide(page, table, self.params, self.settings.with_html)
        self.metrics.observe_outcome(outcome, time.perf_counter() - t0)
        if outcome.dead is not None:
            await self._send_dead(outcome.dead, value)
            return
        table.source_offset = offset
        if self.layout.is_snapshot_page(table.pages):
            await self._before_snapshot(host, table.pages, tp)
        for rkey, rvalue in self.layout.records(host, table, outcome):
            await self._put_state(rkey, rvalue, tp)
            self.metrics.changelog_records()
            self.stats.state_records += 1
            self.stats.state_bytes += len(rkey) + len(rvalue)
        self.stats.pages += 1
        await self._send_outcome(host, outcome)

    async def _before_snapshot(self, host: str, page_no: int, tp: TP) -> None:
        """Make sure the pages the older snapshot covers are committed before it is dropped."""
        old = page_no - self.layout.k
        if old <= 0:
            return
        old_offset = self.layout.offset_of_page(self._get, host, old)
        if old_offset is None or self._committed(tp, old_offset):
            return
        self.stats.forced_commits += 1
        await self.app.consumer.commit()
        if not self._committed(tp, old_offset):
            logger.warning(
                "host=%s partition=%d offset=%d: page %d not committed before its snapshot was replaced",
                host, tp.partition, old_offset, old,
            )

    def _committed(self, tp: TP, offset: int) -> bool:
        """Whether `offset` of `tp` is committed (will not be read again after a restart)."""
        committed = self.app.monitor.tp_committed_offsets.get(tp, -1)
        # Offsets below the first one this worker read since it got the partition were
        # committed before (a consumer starts at the committed offset).
        return offset < max(committed, self.first_offset.get(tp, 0))

    async def _replay(self, page: RawPage, raw: bytes | None, tp: TP, offset: int) -> None:
        """A page the state already holds: send its outputs again, identical, without applying it."""
        self.stats.replayed += 1
        loaded = self.layout.load_before(self._get, page.host, offset)
        if loaded is None:
            outcome = decide(page, HostTable(self.params.table), self.params, self.settings.with_html)
            if outcome.dead is not None:  # it was dead the first time, too
                self.metrics.observe_dead(outcome.dead)
                await self._send_dead(outcome.dead, raw)
                return
            self.stats.unrecoverable += 1
            logger.error(
                "host=%s partition=%d offset=%d: replayed page older than the retained deltas; not sent again",
                page.host, tp.partition, offset,
            )
            return
        table, delta = loaded
        t0 = time.perf_counter()
        outcome = decide(page, table, self.params, self.settings.with_html)
        self.metrics.observe_outcome(outcome, time.perf_counter() - t0)
        cluster = -1 if outcome.cluster is None else outcome.cluster
        if outcome.applied != delta.keys or cluster != delta.cluster:
            logger.error(
                "host=%s partition=%d offset=%d: replayed page decided differently than the first time",
                page.host, tp.partition, offset,
            )
        await self._send_outcome(page.host, outcome)

    async def _put_state(self, key: bytes, value: bytes, tp: TP) -> None:
        """Write one state record: to the local store, and to the changelog partition of `tp`.

        Not through the Faust table's own changelog path (`table[key] = value`): that goes
        through Faust's ProducerBuffer, whose flush returns after 0.1 s without a message
        sent, or as soon as the last message has left its queue but before it reached
        aiokafka, so the offset commit that follows a flush could overtake the changelog
        record (measured: committed pages missing from the state after SIGKILL under load).
        Sent here, the record is in aiokafka's accumulator before the agent takes the next
        message, so the flush Faust runs before committing this offset covers it.
        """
        self.state.data[key] = value  # the table's store: RocksDB, partition of the current event
        fut = await self.app.producer.send(self.settings.topic_state, key, value, tp.partition, None, None)
        fut.add_done_callback(self._on_state_sent)  # type: ignore[attr-defined]

    def _on_state_sent(self, fut: Any) -> None:
        _exit_on_send_error(fut)
        if not fut.cancelled() and fut.exception() is None:
            md = fut.result()
            # What Faust's table does for its own changelog records: remember the offset
            # the local store holds, so a restart on this directory reads only what follows.
            self.state.data.set_persisted_offset(TP(md.topic, md.partition), md.offset)  # type: ignore[attr-defined]  # on every Faust store

    async def _send(self, topic: str, key: bytes, value: bytes) -> None:
        # Straight to the producer (Faust's Topic.send costs more per message than the
        # page's own JSON). Faust flushes this producer before it commits input offsets.
        fut = await self.app.producer.send(topic, key, value, None, None, None)
        fut.add_done_callback(_exit_on_send_error)  # type: ignore[attr-defined]

    async def _send_outcome(self, host: str, outcome: Outcome) -> None:
        hkey = host.encode()
        assert outcome.clean is not None
        try:
            await self._send(self.settings.topic_clean, hkey, codec.encode_clean(outcome.clean))
        except MessageSizeTooLargeError as exc:  # raised before sending: the page goes on as a dead letter
            clean = outcome.clean
            await self._send_dead(DeadPage(clean.url, host, "output_too_large", str(exc), ""), None)
        for ev in outcome.events:
            await self._send(self.settings.topic_events, hkey, codec.encode_event(ev))

    async def _send_dead(self, dead: DeadPage, raw: bytes | None) -> None:
        self.stats.dead += 1
        logger.debug("dead letter %s: %s (%s)", dead.reason, dead.detail, dead.source)
        await self._send(self.settings.topic_dead, dead.host.encode(), codec.encode_dead(dead, raw or b""))


def _exit_on_send_error(fut: Any) -> None:
    """A message the producer gave up on: stop the process at once, before any offset commit.

    This callback runs before Faust's flush-then-commit can go on, so the input offsets
    of the lost message are not committed: a restarted worker reads them again, as after
    SIGKILL (which the state design recovers from with nothing lost).
    """
    if fut.cancelled() or fut.exception() is None:
        return
    logger.critical("a message could not be sent, exiting so that its input is read again: %r", fut.exception())
    os._exit(70)


def build_app(settings: StreamSettings, params: EngineParams | None = None) -> tuple[DetemplateApp, StreamWorker]:
    """The Faust app and its worker logic, configured from `settings`."""
    app = DetemplateApp(
        settings.app_id,
        tansu=settings.tansu,
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
        table_standby_replicas=settings.standby_replicas,
        consumer_auto_offset_reset="earliest",
        producer_compression_type=settings.compression or None,
        consumer_max_fetch_size=settings.max_fetch_bytes,
        web_enabled=False,
    )
    worker = StreamWorker(app, settings, params or settings.engine_params())
    return app, worker
