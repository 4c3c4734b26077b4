"""pages.raw records handed from Faust's fetcher to the worker a fetch at a time.

Faust delivers each fetched record on its own: the fetcher's loop (read offsets, a flow
check, the conductor's lock and flow control, an Event, a channel queue), then the agent's
stream (the event's sensors, a context variable, the ack with its lock and bookkeeping).
Measured in the worker, that path cost more a page than the page's own JSON, the state
records and the outputs' sends together. The worker's consumer (detemplate.stream.commits,
`SafeCommitConsumer._getmany`) takes the records of the topics it reads in offset order out
of each fetch, before any of that, and puts them here as one `Batch`; the worker's batch
task takes it and decides the pages in a loop (detemplate.stream.app, `StreamWorker.handle_batch`).
Records of every other topic (the table's changelog while Faust recovers it) go Faust's way.

What Faust's per-event path gave and the batch path keeps:

- order: a partition's records in a batch are in offset order, batches are taken in fetch
  order, one at a time (`Progress` checks every offset, as before);
- rebalances: a batch is of the consumer generation it was fetched in; the worker stops a
  batch before the next page once the generation changed or the consumer's flow stopped
  (what Faust does at a revocation), and a revocation waits for the page in flight
  (`wait_idle`, from the consumer's `wait_empty`) and drops the batches not taken yet (`clear`);
- back-pressure: at most one batch waits here; the fetcher waits to hand over the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Batch:
    """One fetch's records of the ordered topics: TP -> aiokafka ConsumerRecords, in offset order."""

    generation: int  # the consumer generation the records were fetched in
    records: dict[Any, list[Any]]

    def items(self, current: Callable[[], bool]) -> Iterator[tuple[Any, Any]]:
        """(TP, record), each partition's in offset order, while `current()` says the batch still
        stands (asked before each record: a rebalance stops it between two pages)."""
        for tp, records in self.records.items():
            for rec in records:
                if not current():
                    return
                yield tp, rec

    def __len__(self) -> int:
        return sum(len(r) for r in self.records.values())


class Inbox:
    """The hand-over of ordered topics' records from the consumer's fetch to the worker's batch task."""

    def __init__(self, topics: set[str]) -> None:
        self.topics = topics
        self._queue: asyncio.Queue[Batch] = asyncio.Queue(maxsize=1)
        self._idle = asyncio.Event()
        self._idle.set()
        self._pending: list[Batch] = []  # handed over (or being handed over), not taken yet
        self._current: Batch | None = None  # taken, not finished with

    def split(self, records: Mapping[Any, list[Any]]) -> tuple[dict[Any, list[Any]], dict[Any, list[Any]]]:
        """(the records of the ordered topics, the rest) of one fetch."""
        mine: dict[Any, list[Any]] = {}
        rest: dict[Any, list[Any]] = {}
        for tp, recs in records.items():
            (mine if tp.topic in self.topics else rest)[tp] = recs
        return mine, rest

    async def put(self, batch: Batch) -> None:
        """Hand a batch over; waits while the one before it has not been taken."""
        self._pending.append(batch)
        try:
            await self._queue.put(batch)
        except BaseException:  # cancelled while waiting (a shutdown): the batch was never handed over
            self._pending.remove(batch)
            raise

    async def get(self) -> Batch:
        """The next batch; the inbox is busy from here until `done`."""
        batch = await self._queue.get()
        self._pending.remove(batch)
        self._current = batch
        self._idle.clear()
        return batch

    def done(self) -> None:
        """The batch taken last is finished with (processed, or stopped at a rebalance)."""
        self._current = None
        self._idle.set()

    def clear(self) -> int:
        """Drop the batches not taken yet (partitions were revoked); how many records they held."""
        dropped = 0
        while not self._queue.empty():
            batch = self._queue.get_nowait()
            self._pending.remove(batch)
            dropped += len(batch)
        return dropped

    def holds(self, tp: Any) -> bool:
        """Whether records of `tp` were handed over and are not finished with yet (queued, or in
        the batch being processed): the partition is delivering, however long the worker takes."""
        current = self._current
        if current is not None and tp in current.records:
            return True
        return any(tp in batch.records for batch in self._pending)

    async def wait_idle(self) -> None:
        """Wait until no batch is being processed (the page in flight finished)."""
        await self._idle.wait()

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()


__all__ = ["Batch", "Inbox"]
