"""The worker's outgoing records, appended to one record batch a topic partition and handed to
the producer whole.

aiokafka's `send` does a message's whole bookkeeping for each message: the topic's metadata
awaited, the serialisers and the partitioner called, the accumulator searched for an open
batch, a future made (and a done-callback added by the caller), and, when the broker answers,
a metadata object made and that future resolved, its callback scheduled and run. On small
pages that came to about 0.03 ms of the worker's 0.2 ms of its own a page, for its two messages
(docs/stream.md, "Outputs and state records in batches"). The outbox appends each record to
an aiokafka `BatchBuilder` of its topic partition (`create_batch`: the same record batch the
accumulator would have filled, with the producer's batch size and compression) and hands the
builder over (`send_batch`) when it is full and at `flush`, with one callback a batch.

What goes with it: a record in the outbox is not in the producer yet, so the flush that Faust
runs before it commits input offsets does not cover it. The worker flushes the outbox after
each fetch's pages, and before anything it does that needs a commit to cover the pages before
(docs/stream.md); `Progress` lets a commit pass a page only once a flush of the outbox followed
the page (detemplate.stream.commits, `Progress.sent`). Records of one topic partition reach the
producer in the order they were added, as with `send`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Called with the batch's future (resolved to the batch's RecordMetadata, whose offset is its
# first record's, or failed) and the number of records the batch holds.
OnBatch = Callable[[Any, int], None]


class Outbox:
    """Records for the producer, gathered a record batch a topic partition.

    producer: returns the aiokafka producer (Faust's, made on first use).
    on_batch: a done-callback for each batch handed over, given its record count as well.
    """

    def __init__(self, producer: Callable[[], Any], on_batch: OnBatch) -> None:
        self._producer = producer
        self._on_batch = on_batch
        self._open: dict[tuple[str, int], Any] = {}  # (topic, partition) -> BatchBuilder, in the order opened

    def __len__(self) -> int:
        """Records waiting in the open batches."""
        return sum(int(batch.record_count()) for batch in self._open.values())

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> bool:
        """Append one record (a None value: a tombstone) to its topic partition's open batch,
        opened here when there is none; False, with nothing appended, when that batch is full
        (then `add_to_fresh`). Most records go this way, without a coroutine each."""
        at = (topic, partition)
        batch: Any = self._open.get(at)
        if batch is None:
            batch = self._open[at] = self._producer().create_batch()
            if batch.append(key=key, value=value, timestamp=None) is None:
                # A batch always takes its first record, whatever its size.
                raise RuntimeError(f"an empty record batch refused a record of {len(value or b''):,} bytes")
            return True
        return batch.append(key=key, value=value, timestamp=None) is not None

    async def add_to_fresh(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """A record `append` refused: its topic partition's full batch handed over, then the
        record into a fresh batch, which takes it."""
        at = (topic, partition)
        await self._hand_over(at, self._open.pop(at))
        self.append(topic, partition, key, value)

    async def flush(self) -> None:
        """Hand every open batch over to the producer (it sends them; this does not wait for that)."""
        while self._open:
            at = next(iter(self._open))
            await self._hand_over(at, self._open.pop(at))

    async def _hand_over(self, at: tuple[str, int], batch: Any) -> None:
        count = int(batch.record_count())
        if not count:
            return
        # Waits while the partition's batch before it has not been taken by the producer's sender.
        fut = await self._producer().send_batch(batch, at[0], partition=at[1])
        on_batch = self._on_batch
        fut.add_done_callback(lambda done: on_batch(done, count))


__all__ = ["OnBatch", "Outbox"]
