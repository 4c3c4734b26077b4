"""Offset commits that do not pass over an unprocessed message (faust-streaming issue #606).

Faust commits, per partition, the end of the first run of consecutive acked offsets.
It withholds the commit when the run starts two or more past the committed offset (a
gap), but not when it starts exactly one past it: then the message at the committed
offset, never acked, is committed over. That message exists and was not processed: a
message fetched before a rebalance and skipped by the stream for its old generation
(measured here: one page of a fault test never came out after a rebalance), or one still
in flight. After a restart or the next rebalance the group resumes past it, and it is lost.

`SafeCommitConsumer` withholds that commit too, unless Faust has recorded the offset as a
gap (a compacted record or a transaction marker, which has no message), and seeks the
partition back to the committed offset, once per hold, so the message is fetched again
(the messages after it come again too: the worker recognises them as replays and sends
their outputs again, identical). The commit resumes as soon as it is processed. A gap
Faust cannot see (no message at exactly the committed offset right after a seek) would
hold commits for ever; after `HOLD_S` seconds the offset is treated as such a gap, with
a warning, and Faust's commit goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, MutableMapping
from typing import Any

from faust.transport.drivers.aiokafka import Consumer, Transport

logger = logging.getLogger(__name__)

HOLD_S = 30.0


def hold_commit(
    acked: list[int],
    committed: int | None,
    is_gap: Callable[[int], bool],
    held: MutableMapping[Any, tuple[int, float]],
    tp: Any,
    now: float,
    hold_s: float = HOLD_S,
) -> bool:
    """Whether to withhold the commit of `tp`: its acked offsets start past `committed` (the
    next offset to process), that offset is no known gap, and it has not been held `hold_s`."""
    if not acked or committed is None or min(acked) <= committed or is_gap(committed):
        held.pop(tp, None)
        return False
    offset, since = held.setdefault(tp, (committed, now))
    if offset != committed:
        held[tp] = (committed, now)
        return True
    if now - since < hold_s:
        return True
    logger.warning(
        "%s: offset %d not processed for %.0f s while later ones were: committing over it as a gap",
        tp, committed, now - since,
    )
    held.pop(tp, None)
    return False


class SafeCommitConsumer(Consumer):
    """Faust's aiokafka consumer with `hold_commit` in front of its choice of commit offset."""

    def _new_offset(self, tp: Any) -> int | None:
        held = self.__dict__.setdefault("_detemplate_held", {})
        gaps = self._gap[tp]
        committed = self._committed_offset[tp]
        before = held.get(tp)
        if hold_commit(self._acked[tp], committed, lambda o: bool(gaps.at(o)), held, tp, time.monotonic()):
            if committed is not None and (before is None or before[0] != committed):
                logger.warning("%s: offset %d not processed while later ones were: fetching it again", tp, committed)
                seeks: set[asyncio.Future[None]] = self.__dict__.setdefault("_detemplate_seeks", set())
                task = asyncio.ensure_future(self.seek(tp, committed))
                seeks.add(task)
                task.add_done_callback(seeks.discard)
            return None
        return super()._new_offset(tp)


class SafeCommitTransport(Transport):
    """The aiokafka transport with `SafeCommitConsumer`."""

    Consumer = SafeCommitConsumer
