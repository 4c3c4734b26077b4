"""A client-side workaround for the Tansu test broker; only active with `StreamSettings.tansu`.

Tansu (the broker bundled for tests and the local demo) answers ListOffsets "latest"
with the base offset of the newest record batch plus one, which is too low whenever
that batch holds more than one record; the high watermark in its Fetch responses is
right. Faust reads end offsets (`Consumer.highwaters`) when it recovers a table, so
with the wrong value a worker that restarts over its own RocksDB state crashes with
ConsistencyError ("persisted offset ... higher than ... highwater").

The fix: ask ListOffsets for its (low) answer, then Fetch from there with a one-byte
partition limit and take the high watermark of the Fetch response. Against Apache
Kafka this is not needed and stays off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]  # no stubs
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Transport
from faust.types import TP

from .commits import SafeCommitConsumer

logger = logging.getLogger(__name__)


async def fetch_highwaters(bootstrap: str, partitions: Iterable[Any], timeout_s: float = 30.0) -> dict[Any, int]:
    """The high watermark of each partition, from Fetch responses (ListOffsets is wrong on Tansu).

    `partitions` are (topic, partition) named tuples; the result is keyed by the same objects.
    """
    wanted = {TopicPartition(tp.topic, tp.partition): tp for tp in partitions}
    if not wanted:
        return {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1,  # one record (a broker returns at least one batch)
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        consumer.assign(list(wanted))
        # ListOffsets "latest" is a lower bound on Tansu: fetch from there, not from 0.
        low = await consumer.end_offsets(list(wanted))
        for tp in wanted:
            consumer.seek(tp, low.get(tp, 0))
        deadline = time.monotonic() + timeout_s
        while True:
            await consumer.getmany(timeout_ms=50, max_records=1)
            found = {tp: consumer.highwater(tp) for tp in wanted}
            if all(v is not None for v in found.values()):
                out = {wanted[tp]: int(v) for tp, v in found.items() if v is not None}
                fixed = {str(wanted[tp]): (low.get(tp), v) for tp, v in found.items() if v != low.get(tp)}
                if fixed:
                    logger.debug("high watermarks corrected (list_offsets, fetch): %s", fixed)
                return out
            if time.monotonic() > deadline:
                missing = [str(tp) for tp, v in found.items() if v is None]
                raise TimeoutError(f"no Fetch response for {missing} within {timeout_s} s")
    finally:
        await consumer.stop()


class TansuConsumerThread(AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread with end offsets from Fetch (see module docstring)."""

    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:
        if self.consumer.in_transaction:  # never with detemplate (no exactly_once)
            return await super()._highwaters(partitions)
        bootstrap = ",".join(f"{u.host}:{u.port or 9092}" for u in self.app.conf.broker_consumer)
        return await fetch_highwaters(bootstrap, partitions)


class TansuConsumer(SafeCommitConsumer):
    def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
        return TansuConsumerThread(self, loop=self.loop, beacon=self.beacon)


class TansuTransport(Transport):
    """The aiokafka transport with the Tansu high-watermark fix (and safe commits)."""

    Consumer = TansuConsumer

