"""A client-side workaround for the Tansu test broker; only active with `StreamSettings.tansu`.

Tansu (the broker bundled for tests and the local demo) answers ListOffsets "latest"
with the base offset of the newest record batch plus one, which is too low whenever
that batch holds more than one record; the high watermark in its Fetch responses is
right. Faust reads end offsets (`Consumer.highwaters`) when it recovers a table, so
with the wrong value a worker that restarts over its own RocksDB state crashes with
ConsistencyError ("persisted offset ... higher than ... highwater").

The fix: ask ListOffsets for its (low) answer, then Fetch from there with a one-byte
partition limit and take the high watermark of the Fetch response
(`kafka_io.fetch_highwaters`, which `detemplate consume` uses against any broker). Against
Apache Kafka this is not needed by Faust and stays off.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Transport
from faust.types import TP

from .commits import SafeCommitConsumer, StoppingConsumerThread
from .kafka_io import fetch_highwaters

logger = logging.getLogger(__name__)


class TansuConsumerThread(StoppingConsumerThread):
    """The worker's consumer thread with end offsets from Fetch (see module docstring)."""

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

