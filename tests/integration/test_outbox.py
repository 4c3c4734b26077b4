"""detemplate.stream.outbox on the real Tansu broker: records a batch a topic partition, in order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from detemplate.stream.kafka_io import producer
from detemplate.stream.outbox import Outbox

from tests.integration.conftest import PARTITIONS, Cluster, run

pytestmark = pytest.mark.broker


def test_records_reach_each_partition_in_order_a_batch_at_a_time(cluster: Cluster) -> None:
    """Records added to the outbox go to the producer as record batches: one when a partition's
    batch is full, the rest at `flush`; each partition's records arrive in the order they were
    added, tombstones included, and each batch's callback gets its record count, whose sum and
    offsets match what the broker holds. Each record goes by `append`, which refuses a record its
    partition's full batch cannot take (then `add_to_fresh` hands that batch over first)."""
    topic = cluster.settings.topic_events
    big = b"x" * 40_000  # a batch holds 256 KB: the partition-0 run fills several
    sent: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    batches: list[tuple[int, int, int]] = []  # (partition, first offset, records)
    refused: list[int] = []  # the records `append` left to `add_to_fresh`

    async def go() -> int:
        prod = producer(cluster.bootstrap)
        await prod.start()
        try:
            def on_batch(fut: Any, count: int) -> None:
                md = fut.result()
                batches.append((md.partition, md.offset, count))

            box = Outbox(lambda: prod, on_batch)
            for i in range(40):
                part = 0 if i < 20 else i % PARTITIONS
                value = big if part == 0 else (None if i % 7 == 0 else b"v%d" % i)
                key = b"k%d" % i
                if not box.append(topic, part, key, value):
                    refused.append(i)
                    await box.add_to_fresh(topic, part, key, value)
                sent[part].append((key, value))
            left = len(box)
            await box.flush()
            assert len(box) == 0
            await prod.flush()
            await asyncio.sleep(0)  # the batches' done-callbacks run
            return left
        finally:
            await prod.stop()

    left = run(go())
    assert 0 < left < 40  # some handed over when full, the rest at the flush
    # Only partition 0's batches fill (its 40 KB records): each record refused was one of its.
    assert refused and all(i < 20 or i % PARTITIONS == 0 for i in refused)
    records = cluster.read(topic)
    for part in range(PARTITIONS):
        got = [(r.key, r.value) for r in sorted((r for r in records if r.partition == part), key=lambda r: r.offset)]
        assert got == sent[part], f"partition {part}"
    assert sum(count for _, _, count in batches) == 40
    assert len([b for b in batches if b[0] == 0]) >= 4  # 20 records of 40 KB in batches of 256 KB
    for part in range(PARTITIONS):
        mine = sorted((offset, count) for p, offset, count in batches if p == part)
        expected = 0
        for offset, count in mine:  # the batches of a partition follow each other, none lost
            assert offset == expected
            expected += count
        assert expected == len(sent[part])
