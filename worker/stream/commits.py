"""Pages in order, and offset commits that never pass over a page without its output.

Faust can hand the worker a partition's messages out of order around a rebalance: records
fetched from the old position with the new generation arrive before the seek to the
committed offset takes effect, while an older message fetched before the rebalance is
skipped for its old generation (never processed). The worker then applied a later page of a
host before an earlier one, and when the earlier one came again (after the seek) the
state already covered its offset: it was taken for a replay, found no delta, and was
acknowledged without an output. Faust also commits straight over a single un-acked
offset just past the last commit (faust-streaming issue #606).

The worker therefore keeps, per partition since it was assigned, the next offset it has
not processed (`Progress`), starting at the committed offset (or the partition's first
offset when nothing is committed):

- a message at that offset is processed, and the position moves on;
- a message below it was processed already in this assignment (a seek back brings it
  again): its outputs are in the producer, it is skipped;
- a message past it (a gap: the ones between were skipped by Faust) is not processed yet:
  the worker seeks the partition back to the position, so the missing messages come, then
  this one again, in order. Its output comes then; until then it has none, and
- the commit of a partition never goes past the position (`SafeCommitConsumer`), whatever
  Faust acked, nor past a page held without its output (a host's first page waiting for its
  second: engine/firstpages.py), nor past a page whose records are still in the worker's
  outbox (detemplate.stream.outbox): it moves up to the position, and a held page's hold is
  lifted, only when the worker has handed the outbox to the producer (`sent`): nothing is
  committed that has no output in the producer.

An offset with no message at all (a hole left by compaction or transaction markers; not
expected on pages.raw) would hold a partition for ever; after `HOLD_S` seconds of seeking
back to it the worker takes it for such a hole, with a warning, and goes on.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Consumer, Transport

from .eager import EagerWaitFirst
from .inbox import Batch, Inbox

logger = logging.getLogger(__name__)

HOLD_S = 30.0  # a missing offset is taken for a hole in the log after this long
RESEEK_S = 5.0  # while a partition waits for a missing offset, seek back again this often
COMMITTED_TIMEOUT_S = 15.0  # asking the group coordinator for a committed offset takes at most this
# The commits a stop makes (Faust makes two) wait this long at most in all, a revocation's this
# long: aiokafka's commit waits for the group coordinator for as long as it takes, so with the
# broker unreachable a worker told to stop never ended.
LAST_COMMIT_TIMEOUT_S = 10.0


class Position(enum.Enum):
    NEXT = "next"  # the offset to process now
    AGAIN = "again"  # processed already in this assignment
    AHEAD = "ahead"  # past a gap: messages before it were not processed yet


@dataclass(slots=True)
class _Wait:
    """A partition waiting for the message at `offset`."""

    offset: int
    since: float
    last_seek: float


@dataclass
class Progress:
    """Per partition (any hashable: Faust's TP): the next offset not processed since it was assigned."""

    hold_s: float = HOLD_S
    reseek_s: float = RESEEK_S
    _next: dict[Any, int] = field(default_factory=dict)
    _waits: dict[Any, _Wait] = field(default_factory=dict)
    _held: dict[Any, int] = field(default_factory=dict)  # the oldest offset held without its output
    _sent: dict[Any, int] = field(default_factory=dict)  # the position when the outbox was last handed over
    _lifts: dict[Any, int | None] = field(default_factory=dict)  # holds moved on, applied at the next `sent`

    def started(self, tp: Any) -> bool:
        return tp in self._next

    def start(self, tp: Any, offset: int) -> None:
        """The partition's first offset to process: its committed offset, or its first one."""
        self._next[tp] = offset
        self._sent[tp] = offset
        self._waits.pop(tp, None)
        self._held.pop(tp, None)
        self._lifts.pop(tp, None)

    def position(self, tp: Any, offset: int) -> Position:
        nxt = self._next[tp]
        if offset == nxt:
            return Position.NEXT
        return Position.AGAIN if offset < nxt else Position.AHEAD

    def done(self, tp: Any, offset: int) -> None:
        """`offset` of `tp` was processed (its outputs are in the outbox, or the producer)."""
        if self._next.get(tp) == offset:
            self._next[tp] = offset + 1
            self._waits.pop(tp, None)

    def wait(self, tp: Any, now: float) -> tuple[bool, bool]:
        """A message past the position came: (seek back now, give the missing offset up as a hole)."""
        nxt = self._next[tp]
        w = self._waits.get(tp)
        if w is None or w.offset != nxt:
            self._waits[tp] = _Wait(nxt, now, now)
            return True, False
        if now - w.since >= self.hold_s:
            return False, True
        if now - w.last_seek >= self.reseek_s:
            w.last_seek = now
            return True, False
        return False, False

    def skip_to(self, tp: Any, offset: int) -> None:
        """Take the offsets before `offset` for a hole in the log."""
        self._next[tp] = offset
        self._waits.pop(tp, None)

    def hold(self, tp: Any, offset: int | None) -> None:
        """The oldest message of `tp` processed but without its output yet (a host's first
        page held for its second: engine/firstpages.py), or None: the commit stops there.
        A hold that moves on (the held page's output went to the outbox) takes effect at the
        next `sent`; one that holds more, at once."""
        held = self._held.get(tp)  # (a lift waits only where a page is held)
        if offset is not None and (held is None or offset <= held):
            self._held[tp] = offset
            self._lifts.pop(tp, None)
        elif held is not None:
            self._lifts[tp] = offset

    def sent(self) -> None:
        """The worker handed its outbox to the producer: every page processed so far has its
        outputs there, and each partition's commit may go up to its position (and past the
        held pages that went out)."""
        self._sent.update(self._next)
        for tp, offset in self._lifts.items():
            if offset is None:
                self._held.pop(tp, None)
            else:
                self._held[tp] = offset
        self._lifts.clear()

    def next_offset(self, tp: Any) -> int | None:
        """The next offset of `tp` not processed (None: not started in this assignment)."""
        return self._next.get(tp)

    def commit_offset(self, tp: Any) -> int | None:
        """The offset up to which `tp` may be committed (None: not started in this assignment)."""
        sent = self._sent.get(tp)
        held = self._held.get(tp)
        if sent is None or held is None:
            return sent
        return min(sent, held)

    def forget(self) -> None:
        """Partitions were revoked or assigned: every partition starts again from its committed offset."""
        self._next.clear()
        self._sent.clear()
        self._waits.clear()
        self._held.clear()
        self._lifts.clear()

    def waiting(self) -> int:
        """Partitions waiting for a missing offset now."""
        return len(self._waits)

    def partitions(self) -> list[Any]:
        """The partitions started in this assignment."""
        return list(self._next)


class StoppingConsumerThread(AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread, whose stop ends while the broker cannot be reached.

    aiokafka's consumer, stopping, cancels its fetch requests in flight and awaits each. One
    waiting out its retry backoff (the broker unreachable: always, then) ends in CancelledError,
    which the close let out: the consumer's stop ended there, before it closed its client, and
    so did the thread's, before the thread said it had stopped. The worker then waited out mode's
    timeout for it (60 s) before it exited (tests/integration/test_faults.py)."""

    async def on_thread_stop(self) -> None:
        try:
            await super().on_thread_stop()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this thread's own stop was cancelled: not the fetch request's
            logger.info("the consumer stopped with a fetch request pending (the broker unreachable)")
            client = getattr(self._consumer, "_client", None)  # what the consumer's stop did not reach
            if client is not None:
                try:
                    await client.close()
                except Exception:  # the process is ending: a client that fails to close is let go
                    logger.debug("closing the consumer's client failed", exc_info=True)


class SafeCommitConsumer(EagerWaitFirst, Consumer):
    """Faust's aiokafka consumer whose commit of a partition is the worker's `Progress` position,
    which hands the records of the worker's ordered topics over a fetch at a time
    (detemplate.stream.inbox) and delivers the others without a task each (detemplate.stream.eager)."""

    _stop_commits_until: float | None = None  # when a stop's commits are given up (monotonic clock)

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        """One fetch: the ordered topics' records to the worker's inbox, the rest to Faust's streams.

        Taken here, before Faust's fetcher loop, those records never meet Faust's read offsets
        (below which it drops a fetched record: after the worker sought a partition back over a
        gap, the rest of a batch Faust was still handing out moved that offset past the seek, and
        the records fetched again were dropped), its flow checks or its acks: `Progress` orders
        them and the commits follow it."""
        records = await super()._getmany(active_partitions, timeout)
        inbox: Inbox | None = getattr(self.app, "inbox", None)
        if inbox is None or not records:
            return records
        mine, rest = inbox.split(records)
        if mine and self.flow_active:  # else a rebalance: Faust seeks back to the committed offsets
            await inbox.put(Batch(self.app.consumer_generation_id, mine))
        return rest

    def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
        return StoppingConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def commit_and_end_transactions(self) -> None:
        """The commit of a stop or a revocation (Faust's), given up after LAST_COMMIT_TIMEOUT_S,
        counted for a stop from its first commit: what it would have committed is read again by
        the partitions' next owner, as after a crash (the outputs are at-least-once, the state's
        records idempotent)."""
        timeout = LAST_COMMIT_TIMEOUT_S
        if self.app.should_stop:  # the app is stopping: its commits share one span
            now = time.monotonic()
            deadline = self._stop_commits_until
            if deadline is None:
                deadline = self._stop_commits_until = now + LAST_COMMIT_TIMEOUT_S
            timeout = max(0.0, deadline - now)
        try:
            await asyncio.wait_for(super().commit_and_end_transactions(), timeout=timeout)
        except TimeoutError:
            logger.warning("a commit did not end in time (%.0f s; is the broker reachable?): the pages since the "
                           "last commit will be read again", LAST_COMMIT_TIMEOUT_S)

    async def wait_empty(self) -> None:
        """Faust's wait for every message in processing, and for the worker's page in flight: a
        revocation stops the worker's batch before its next page (the flow is stopped first)."""
        inbox: Inbox | None = getattr(self.app, "inbox", None)
        if inbox is not None:
            await inbox.wait_idle()
        await super().wait_empty()

    def _filter_tps_with_pending_acks(self, topics: Any = None) -> Any:
        """The partitions a commit looks at: those with acks (Faust's), and those the worker
        processed pages of, which are never acked through Faust."""
        tps = set(super()._filter_tps_with_pending_acks(topics))
        progress: Progress | None = getattr(self.app, "progress", None)
        if progress is not None:
            tps.update(tp for tp in progress.partitions()
                       if topics is None or tp in topics or tp.topic in topics)
        return iter(tps)

    async def start_offset(self, tp: Any) -> int | None:
        """Where `tp` starts for the group: its committed offset, asked of the group coordinator
        (Faust's own copy is not set yet when the first messages of an assignment arrive), or
        its first offset when nothing is committed. Raises TimeoutError after COMMITTED_TIMEOUT_S."""
        return await asyncio.wait_for(self._start_offset(tp), timeout=COMMITTED_TIMEOUT_S)

    async def _start_offset(self, tp: Any) -> int | None:
        thread = self._thread
        consumer = thread._ensure_consumer()
        offset = await thread.call_thread(consumer.committed, tp)
        if offset is not None and offset >= 0:
            return int(offset)
        first = (await thread.call_thread(consumer.beginning_offsets, [tp])).get(tp)
        return None if first is None else int(first)

    def _new_offset(self, tp: Any) -> int | None:
        progress: Progress | None = getattr(self.app, "progress", None)
        if progress is None:  # an app without the worker: Faust's own choice
            return super()._new_offset(tp)
        limit = progress.commit_offset(tp)
        acked = self._acked[tp]
        if limit is None:
            return None
        if acked:
            # Faust's bookkeeping of acked offsets: the ones the commit covers are done with.
            keep = [o for o in acked if o >= limit]
            if len(keep) != len(acked):
                self._acked_index[tp].difference_update(o for o in acked if o < limit)
                acked[:] = keep
        return limit


class SafeCommitTransport(Transport):
    """The aiokafka transport with `SafeCommitConsumer`."""

    Consumer = SafeCommitConsumer
