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
    assert p.commit_offset("tp") == 55  # their records are in the worker's outbox, not the producer
    p.sent()  # the outbox handed over
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
    p.sent()
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
    p.sent()
    assert (p.commit_offset("a"), p.commit_offset("b")) == (1, 101)
    p.forget()
    assert not p.started("a") and p.commit_offset("b") is None


def test_a_held_page_holds_the_commit_back_until_it_has_its_output() -> None:
    """A host's first page held for its second (engine/firstpages.py) was processed but has no
    output: the commit stops at it, while the position goes on; once it goes out, the commit
    follows the position again."""
    p = Progress()
    p.start("tp", 10)
    for offset in range(10, 20):
        p.done("tp", offset)
    p.hold("tp", 12)
    p.sent()
    assert (p.next_offset("tp"), p.commit_offset("tp")) == (20, 12)
    p.hold("tp", 17)  # the page at 12 went out to the outbox; the one at 17 is the oldest held now
    assert p.commit_offset("tp") == 12  # until the outbox is handed over
    p.sent()
    assert p.commit_offset("tp") == 17
    p.hold("tp", None)
    p.sent()
    assert p.commit_offset("tp") == 20
    p.hold("tp", 15)
    p.forget()  # a rebalance: the held pages are dropped, read again by the next owner
    p.start("tp", 15)
    assert p.commit_offset("tp") == 15 and p.next_offset("tp") == 15
    p.done("tp", 15)
    p.sent()
    assert p.commit_offset("tp") == 16


def test_the_commit_passes_a_page_only_once_the_outbox_was_handed_over_after_it() -> None:
    """A page's records wait in the worker's outbox (detemplate.stream.outbox) until the fetch's
    pages are done: the commit stays where the last hand-over left it, and a hold moves on (the
    held page's output went to the outbox) only with the next hand-over, while a new hold takes
    effect at once."""
    p = Progress()
    p.start("a", 0)
    p.start("b", 50)
    for offset in range(5):
        p.done("a", offset)
    p.sent()
    p.done("a", 5)
    p.done("b", 50)
    assert (p.commit_offset("a"), p.commit_offset("b")) == (5, 50)
    p.hold("a", 3)  # a page held earlier than the commit: at once (a first page's hold never lags)
    assert p.commit_offset("a") == 3
    p.hold("a", None)  # released with the next page: its output is in the outbox
    p.done("a", 6)
    assert p.commit_offset("a") == 3
    p.sent()
    assert (p.commit_offset("a"), p.commit_offset("b")) == (7, 51)
    p.hold("a", 8)
    p.hold("a", 9)  # 8 went out, 9 is held now: the commit stays at 8 until the hand-over
    for offset in range(7, 12):
        p.done("a", offset)
    assert p.commit_offset("a") == 7  # the hand-over before 8 was done
    p.sent()
    assert p.commit_offset("a") == 9
