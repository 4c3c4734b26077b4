"""detemplate.stream.inbox: pages.raw records handed over a fetch at a time, in order, stopped at a rebalance."""

from __future__ import annotations

import asyncio
from collections import namedtuple

from detemplate.stream.inbox import Batch, Inbox

TP = namedtuple("TP", "topic partition")
Rec = namedtuple("Rec", "offset")


def _fetch() -> dict[TP, list[Rec]]:
    return {
        TP("pages.raw", 0): [Rec(5), Rec(6), Rec(7)],
        TP("detemplate.state", 0): [Rec(40)],
        TP("pages.raw", 1): [Rec(0), Rec(1)],
    }


def test_a_fetch_splits_into_the_ordered_topics_and_the_rest() -> None:
    mine, rest = Inbox({"pages.raw"}).split(_fetch())
    assert list(mine) == [TP("pages.raw", 0), TP("pages.raw", 1)]
    assert list(rest) == [TP("detemplate.state", 0)]  # recovered through Faust's own path


def test_a_batch_gives_each_partition_in_offset_order_and_stops_when_it_no_longer_stands() -> None:
    mine, _ = Inbox({"pages.raw"}).split(_fetch())
    batch = Batch(3, mine)
    assert len(batch) == 5
    seen = [(tp.partition, r.offset) for tp, r in batch.items(lambda: True)]
    assert seen == [(0, 5), (0, 6), (0, 7), (1, 0), (1, 1)]
    # A rebalance after the second page: asked before each record, so the third is never handed out.
    asked: list[int] = []

    def current() -> bool:
        asked.append(1)
        return len(asked) <= 2

    assert [r.offset for _, r in batch.items(current)] == [5, 6]


def test_one_batch_waits_the_revocation_waits_for_the_one_in_flight_and_drops_the_waiting_one() -> None:
    async def main() -> None:
        inbox = Inbox({"pages.raw"})
        mine, _ = inbox.split(_fetch())
        await inbox.put(Batch(1, mine))
        second = asyncio.ensure_future(inbox.put(Batch(1, {TP("pages.raw", 0): [Rec(8)]})))
        await asyncio.sleep(0)
        assert not second.done()  # back-pressure: one batch waits, the fetcher waits to hand the next
        first = await inbox.get()
        assert len(first) == 5 and inbox.busy
        await asyncio.wait_for(second, timeout=10)
        idle = asyncio.ensure_future(inbox.wait_idle())
        await asyncio.sleep(0)
        assert not idle.done()  # a page of the first batch is in flight
        assert inbox.clear() == 1  # the waiting batch is dropped: read again from the committed offsets
        inbox.done()
        await asyncio.wait_for(idle, timeout=10)
        assert not inbox.busy and inbox.clear() == 0

    asyncio.run(main())


def test_the_inbox_holds_a_partition_while_records_of_it_wait_or_are_in_process() -> None:
    # The stall watcher asks: a partition whose records the worker holds is delivering,
    # however long the batch before them takes.
    p0, p1, p2 = TP("pages.raw", 0), TP("pages.raw", 1), TP("pages.raw", 2)

    async def main() -> None:
        inbox = Inbox({"pages.raw"})
        assert not inbox.holds(p0)
        await inbox.put(Batch(1, {p0: [Rec(5)], p1: [Rec(0)]}))
        second = asyncio.ensure_future(inbox.put(Batch(1, {p2: [Rec(9)]})))
        await asyncio.sleep(0)
        assert inbox.holds(p0) and inbox.holds(p1) and inbox.holds(p2)  # queued, and being handed over
        await inbox.get()  # in process
        await asyncio.wait_for(second, timeout=10)
        assert inbox.holds(p0) and inbox.holds(p2)
        inbox.done()
        assert not inbox.holds(p0) and not inbox.holds(p1) and inbox.holds(p2)
        assert inbox.clear() == 1  # a revocation drops the waiting batch: nothing held
        assert not inbox.holds(p2)
        # A hand-over cancelled while it waits (a shutdown) leaves nothing held.
        await inbox.put(Batch(1, {p0: [Rec(6)]}))
        waiting = asyncio.ensure_future(inbox.put(Batch(1, {p1: [Rec(1)]})))
        await asyncio.sleep(0)
        assert inbox.holds(p1)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert not inbox.holds(p1) and inbox.holds(p0)

    asyncio.run(main())
