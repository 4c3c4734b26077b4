"""The Kafka client's repeated log lines let through once every few seconds each (stream/logs.py)."""

from __future__ import annotations

import logging

import pytest
from detemplate.stream.logs import RepeatFilter, quiet_repeats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, name: str = "aiokafka.client", level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_one_record_of_a_message_every_span_then_the_count_held_back() -> None:
    clock = Clock()
    f = RepeatFilter(every_s=10.0, clock=clock)
    template = "Unable connect to node with id %s: %s"
    passed = []
    for i in range(250):  # 25 s of a client retrying every 0.1 s, each with its own arguments
        clock.now = 100.0 + i * 0.1
        r = record(template, 111, f"attempt {i}")
        if f.filter(r):
            passed.append(r)
    assert len(passed) == 3  # at 0 s, 10 s and 20 s
    assert passed[0].getMessage() == "Unable connect to node with id 111: attempt 0"
    held = "(99 more like it in the last 10 s)"
    assert passed[1].getMessage() == f"Unable connect to node with id 111: attempt 100 {held}"
    assert passed[2].getMessage().endswith("(99 more like it in the last 10 s)")


def test_messages_levels_and_loggers_are_counted_apart() -> None:
    clock = Clock()
    f = RepeatFilter(every_s=10.0, clock=clock)
    assert f.filter(record("Failed fetch messages from %s: %s", 111, "x"))
    assert f.filter(record("Unable to update metadata from %s", [111]))
    assert f.filter(record("Failed fetch messages from %s: %s", 111, "x", level=logging.WARNING))
    assert f.filter(record("Failed fetch messages from %s: %s", 111, "x", name="aiokafka.consumer.fetcher"))
    assert not f.filter(record("Failed fetch messages from %s: %s", 222, "y"))
    clock.now += 10.0
    again = record("Failed fetch messages from %s: %s", 333, "z")
    assert f.filter(again)
    assert again.getMessage() == "Failed fetch messages from 333: z (1 more like it in the last 10 s)"


def test_info_and_debug_are_let_through_every_time() -> None:
    f = RepeatFilter(every_s=10.0, clock=Clock())
    assert all(f.filter(record("Joined group %s", "g", level=logging.INFO)) for _ in range(5))
    assert all(f.filter(record("Sending request %s", i, level=logging.DEBUG)) for i in range(5))


def test_a_message_not_repeated_is_let_through_as_it_is() -> None:
    clock = Clock()
    f = RepeatFilter(every_s=10.0, clock=clock)
    r = record("a %% sign and %s", "an argument")
    assert f.filter(r)
    clock.now += 30.0
    r2 = record("a %% sign and %s", "another")
    assert f.filter(r2)
    assert r2.getMessage() == "a % sign and another"  # nothing held back: nothing appended


@pytest.fixture
def library_loggers() -> list[logging.Logger]:
    loggers = [logging.getLogger(n) for n in ("aiokafka.test_one", "aiokafka.test_two.deeper", "aiokafkaesque")]
    yield loggers
    for logger in loggers:
        logger.filters.clear()


def test_quiet_repeats_filters_the_library_loggers_only_once_each(library_loggers: list[logging.Logger]) -> None:
    one, deeper, other = library_loggers
    quiet_repeats("aiokafka")
    quiet_repeats("aiokafka")  # called again: no second filter
    assert sum(isinstance(f, RepeatFilter) for f in one.filters) == 1
    assert sum(isinstance(f, RepeatFilter) for f in deeper.filters) == 1
    assert not other.filters  # only the library's own loggers
    first = one.makeRecord(one.name, logging.ERROR, __file__, 1, "down %s", (1,), None)
    second = one.makeRecord(one.name, logging.ERROR, __file__, 1, "down %s", (2,), None)
    assert one.filter(first) and not one.filter(second)
