"""Plain aiokafka helpers behind `detemplate produce` and `detemplate consume` (no Faust).

Every client takes `security`: the aiokafka keyword arguments of the broker security
settings (`StreamSettings.kafka_client_kwargs()`: security_protocol, ssl_context,
sasl_mechanism, sasl_plain_username, sasl_plain_password); None is PLAINTEXT.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]  # no stubs

from ..engine.model import DeadPage, RawPage
from ..io import codec


@dataclass(frozen=True, slots=True)
class Record:
    """One consumed message."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def encode_raw(page: RawPage) -> bytes:
    """The pages.raw message of a page: the JSONL record `detemplate run` reads (with the page's
    meta: date, WARC record id and offset...)."""
    return json.dumps(codec.raw_dict(page), ensure_ascii=False).encode("utf-8")


def producer(bootstrap: str, linger_ms: int = 10, security: Mapping[str, Any] | None = None) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=linger_ms,
        max_batch_size=256 * 1024,
        max_request_size=16 * 1024 * 1024,
        acks=1,
        **(security or {}),
    )


async def produce_pages(
    bootstrap: str,
    items: Iterable[RawPage | DeadPage],
    topic_raw: str,
    topic_dead: str,
    security: Mapping[str, Any] | None = None,
) -> tuple[int, int]:
    """Send raw pages keyed by host; bad input records go straight to the dead-letter topic.

    Returns (pages sent, dead letters sent).
    """
    prod = producer(bootstrap, security=security)
    await prod.start()
    sent = dead = 0
    try:
        for item in items:
            if isinstance(item, DeadPage):
                await prod.send(topic_dead, codec.encode_dead(item), key=item.host.encode())
                dead += 1
            else:
                await prod.send(topic_raw, encode_raw(item), key=item.host.encode())
                sent += 1
        await prod.flush()
    finally:
        await prod.stop()
    return sent, dead


async def produce_raw(
    bootstrap: str,
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes | None]],
    security: Mapping[str, Any] | None = None,
) -> int:
    """Send (key, value) messages as they are (tests send malformed ones this way)."""
    prod = producer(bootstrap, security=security)
    await prod.start()
    n = 0
    try:
        for key, value in messages:
            await prod.send(topic, value, key=key)
            n += 1
        await prod.flush()
    finally:
        await prod.stop()
    return n


async def consume(
    bootstrap: str,
    topic: str,
    count: int | None = None,
    timeout_s: float = 60.0,
    tansu: bool = False,
    security: Mapping[str, Any] | None = None,
) -> list[Record]:
    """Read `topic` from the beginning: `count` records (waiting up to `timeout_s`), or else
    every record up to the end as of the call."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        **(security or {}),
    )
    await consumer.start()
    out: list[Record] = []
    try:
        await consumer.topics()  # loads the metadata of every topic
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not parts:
            return out
        consumer.assign(parts)
        for tp in parts:
            consumer.seek(tp, 0)
        ends: dict[TopicPartition, int] | None = None
        if count is None:
            if tansu:
                from .tansu import fetch_highwaters

                ends = await fetch_highwaters(bootstrap, parts)
            else:
                ends = dict(await consumer.end_offsets(parts))
        deadline = time.monotonic() + timeout_s
        while True:
            if count is not None and len(out) >= count:
                break
            if ends is not None and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                break
            if time.monotonic() > deadline:
                break
            batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
            for tp, msgs in batch.items():
                for m in msgs:
                    if ends is not None and m.offset >= ends[tp]:
                        continue
                    out.append(Record(tp.topic, tp.partition, m.offset, m.key, m.value))
    finally:
        await consumer.stop()
    return out
