"""Plain aiokafka helpers behind `detemplate produce` and `detemplate consume` (no Faust).

Every client takes `security`: the aiokafka keyword arguments of the broker security
settings (`StreamSettings.kafka_client_kwargs()`: security_protocol, ssl_context,
sasl_mechanism, sasl_plain_username, sasl_plain_password); None is PLAINTEXT.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]  # no stubs

from ..engine.model import DeadPage, RawPage
from ..io import codec
from .outputs import OutputLimits, fit_dead, output_key

logger = logging.getLogger(__name__)


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


def producer(
    bootstrap: str, linger_ms: int = 10, security: Mapping[str, Any] | None = None, max_request_bytes: int = 16 << 20
) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=linger_ms,
        max_batch_size=256 * 1024,
        max_request_size=max_request_bytes,
        acks=1,
        **(security or {}),
    )


async def produce_pages(
    bootstrap: str,
    items: Iterable[RawPage | DeadPage],
    topic_raw: str,
    topic_dead: str,
    security: Mapping[str, Any] | None = None,
    max_message_bytes: int = 1_000_000,
) -> tuple[int, int]:
    """Send raw pages keyed by host; bad input records, and pages whose message would be over
    `max_message_bytes` (`too_large`), go straight to the dead-letter topic.

    Returns (pages sent, dead letters sent).
    """
    limits = OutputLimits(max_message_bytes)
    prod = producer(bootstrap, security=security, max_request_bytes=max_message_bytes)
    await prod.start()
    sent = dead = 0
    try:
        for item in items:
            if isinstance(item, RawPage):
                key = output_key(item.host)
                try:
                    value = encode_raw(item)
                except UnicodeEncodeError as exc:
                    item = DeadPage(item.url, item.host, "undecodable", f"the page cannot be sent as UTF-8: {exc}",
                                    item.source)
                else:
                    if limits.fits(key, value):
                        await prod.send(topic_raw, value, key=key)
                        sent += 1
                        continue
                    item = DeadPage(item.url, item.host, "too_large",
                                    f"its message would be {len(value):,} bytes, over the limit of "
                                    f"{max_message_bytes:,} (DETEMPLATE_MAX_MESSAGE_BYTES)", item.source)
            dkey, dvalue = fit_dead(item, None, limits)
            await prod.send(topic_dead, dvalue, key=dkey)
            dead += 1
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


async def fetch_highwaters(
    bootstrap: str, partitions: Iterable[Any], timeout_s: float = 30.0, security: Mapping[str, Any] | None = None
) -> dict[Any, int]:
    """The high watermark of each partition, from Fetch responses.

    Right on every broker, where ListOffsets "latest" is not on the bundled Tansu broker
    (it answers the newest batch's base offset plus one: detemplate.stream.tansu). Asks
    ListOffsets first, then fetches one record from there and reads the high watermark the
    Fetch response carries. `partitions` are (topic, partition) named tuples; the result is
    keyed by the same objects.
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
        **(security or {}),
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


@dataclass(frozen=True, slots=True)
class Consumed:
    """What `consume` read: the records, and whether it reached what it was asked for."""

    records: list[Record]
    complete: bool  # every record up to the end (or `count` of them) was read
    expected: int | None  # how many records there were up to the end (count None), else None


async def consume(
    bootstrap: str,
    topic: str,
    count: int | None = None,
    timeout_s: float = 60.0,
    security: Mapping[str, Any] | None = None,
) -> Consumed:
    """Read `topic` from the beginning: the first `count` records (waiting up to `timeout_s`),
    or else every record up to the end as of the call (its high watermarks, from Fetch)."""
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
            return Consumed(out, count is None or count == 0, 0 if count is None else None)
        consumer.assign(parts)
        starts = await consumer.beginning_offsets(parts)
        for tp in parts:
            consumer.seek(tp, starts.get(tp, 0))
        ends: dict[Any, int] | None = None
        if count is None:
            ends = await fetch_highwaters(bootstrap, parts, security=security)
        deadline = time.monotonic() + timeout_s
        while True:
            if count is not None and len(out) >= count:
                break
            if ends is not None and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                break
            if time.monotonic() > deadline:
                break
            batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
            for tp, msgs in sorted(batch.items()):
                for m in msgs:
                    if ends is not None and m.offset >= ends[tp]:
                        continue
                    out.append(Record(tp.topic, tp.partition, m.offset, m.key, m.value))
    finally:
        await consumer.stop()
    if count is not None:
        return Consumed(out[:count], len(out) >= count, None)
    expected = sum(end - starts.get(tp, 0) for tp, end in ends.items()) if ends is not None else None
    return Consumed(out, expected is not None and len(out) >= expected, expected)
