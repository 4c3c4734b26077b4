"""detemplate.stream.commits: messages in offset order, commits never past an unprocessed one."""

from __future__ import annotations

from detemplate.stream.commits import HOLD_S, RESEEK_S, Position, Progress


def test_in_order_messages_move_the_position_and_the_commit() -> None:
    p = Progress()
    assert not p.started("tp") and p.commit_offset("tp") is None  # nothing to commit before the first message
    p.start("tp", 55)  # the committed offset
    for offset in (55, 56, 57):
        assert p.position("tp", offset) is Position.NEXT
        p.done("tp", offset)
    assert p.commit_offset("tp") == 58
    assert p.position("tp", 56) is Position.AGAIN  # a seek back brings it again: processed already


def test_a_message_past_a_gap_waits_and_the_commit_stays_at_the_gap() -> None:
    """Faust skipped 55 (fetched before a rebalance, old generation) and hands 56: the position
    stays at 55, so nothing past it is committed, and the partition is sought back to 55."""
    p = Progress()
    p.start("tp", 55)
    assert p.position("tp", 56) is Position.AHEAD
    assert p.wait("tp", now=100.0) == (True, False)  # seek back to 55 now
    assert p.position("tp", 57) is Position.AHEAD
    assert p.wait("tp", now=101.0) == (False, False)  # already sought: wait
    assert p.commit_offset("tp") == 55 and p.waiting() == 1
    # 55 comes (the seek), then 56 and 57 again, in order.
    for offset in (55, 56, 57):
        assert p.position("tp", offset) is Position.NEXT
        p.done("tp", offset)
    assert p.commit_offset("tp") == 58 and p.waiting() == 0


def test_a_long_wait_seeks_again_then_takes_the_offset_for_a_hole() -> None:
    p = Progress()
    p.start("tp", 10)
    assert p.wait("tp", now=0.0) == (True, False)
    assert p.wait("tp", now=RESEEK_S - 0.1) == (False, False)
    assert p.wait("tp", now=RESEEK_S) == (True, False)  # the seek may have been lost in a rebalance: again
    assert p.wait("tp", now=HOLD_S) == (False, True)  # no message at 10 at all: a hole in the log
    p.skip_to("tp", 12)
    assert p.position("tp", 12) is Position.NEXT and p.waiting() == 0


def test_partitions_are_independent_and_forgotten_on_rebalance() -> None:
    p = Progress()
    p.start("a", 0)
    p.start("b", 100)
    p.done("a", 0)
    p.done("b", 100)
    p.done("b", 105)  # not the position: ignored
    assert (p.commit_offset("a"), p.commit_offset("b")) == (1, 101)
    p.forget()
    assert not p.started("a") and p.commit_offset("b") is None


def test_read_offsets_are_kept_for_every_topic_but_the_ordered_ones() -> None:
    """Faust drops a fetched record below its read offset; for pages.raw, read in offset order
    by the worker, it keeps none, so records fetched again after a seek back are handed out."""
    from collections import namedtuple

    from detemplate.stream.commits import ReadOffsets

    TP = namedtuple("TP", "topic partition")
    ordered = {"pages.raw"}
    offsets = ReadOffsets(lambda tp: tp.topic in ordered)  # always transparent here; the worker: while waiting
    raw, state = TP("pages.raw", 0), TP("detemplate.state", 0)
    assert offsets[raw] is None and offsets[state] is None  # never read: None, as Faust's defaultdict
    offsets[raw] = 80
    offsets[state] = 46
    assert offsets[raw] is None and offsets[state] == 46
    get = offsets.__getitem__  # what Faust's fetch loop binds once
    offsets.update({raw: 12})  # perform_seek's update
    assert get(raw) is None and get(state) == 46
    offsets.pop(state)
    assert get(state) is None


def test_a_partition_is_transparent_only_while_it_waits_for_a_missing_offset() -> None:
    from detemplate.stream.commits import Progress, ReadOffsets

    progress = Progress()
    offsets = ReadOffsets(lambda tp: progress.is_waiting(tp))
    progress.start("p0", 40)
    offsets["p0"] = 39
    assert offsets["p0"] == 39 and not progress.is_waiting("p0")
    progress.wait("p0", 0.0)  # offset 65 came, 40 did not: the worker seeks back to 40
    assert progress.is_waiting("p0") and offsets["p0"] is None
    offsets["p0"] = 80  # the rest of Faust's batch: not kept, so 40.. fetched again are handed out
    progress.done("p0", 40)
    assert not progress.is_waiting("p0") and offsets["p0"] is None  # 41.. too, until one is read again
    offsets["p0"] = 41
    assert offsets["p0"] == 41
