"""detemplate.stream.commits: Faust never commits over a message the worker did not process."""

from __future__ import annotations

from detemplate.stream.commits import HOLD_S, hold_commit


def no_gap(offset: int) -> bool:
    return False


def test_a_missing_message_at_the_committed_offset_holds_the_commit() -> None:
    held: dict[str, tuple[int, float]] = {}
    # Committed 55 (the next offset to process); 56 and 57 acked, 55 not: Faust alone
    # would commit 58 and lose 55.
    assert hold_commit([56, 57], 55, no_gap, held, "tp", now=100.0)
    assert hold_commit([56, 57, 58], 55, no_gap, held, "tp", now=100.0 + HOLD_S - 1)
    # Once 55 is processed (re-fetched after the rebalance's seek), the commit goes on.
    assert not hold_commit([55, 56, 57, 58], 55, no_gap, held, "tp", now=101.0)
    assert held == {}


def test_contiguous_acks_known_gaps_and_first_commits_are_left_to_faust() -> None:
    held: dict[str, tuple[int, float]] = {}
    assert not hold_commit([55, 56], 55, no_gap, held, "tp", now=0.0)
    assert not hold_commit([], 55, no_gap, held, "tp", now=0.0)
    assert not hold_commit([56], None, no_gap, held, "tp", now=0.0)  # nothing committed yet
    assert not hold_commit([56], 55, lambda o: o == 55, held, "tp", now=0.0)  # a recorded gap (marker)
    assert held == {}


def test_an_offset_without_a_message_is_given_up_after_the_hold_time() -> None:
    held: dict[str, tuple[int, float]] = {}
    assert hold_commit([56], 55, no_gap, held, "tp", now=10.0)
    assert hold_commit([56, 57], 55, no_gap, held, "tp", now=10.0 + HOLD_S / 2)
    assert not hold_commit([56, 57], 55, no_gap, held, "tp", now=10.0 + HOLD_S)
    # A later hold starts its own clock, per partition.
    assert hold_commit([60], 59, no_gap, held, "tp", now=50.0)
    assert hold_commit([3], 1, no_gap, held, "other", now=50.0)
    assert held == {"tp": (59, 50.0), "other": (1, 50.0)}


def test_the_worker_uses_the_safe_consumer_with_and_without_the_tansu_workaround() -> None:
    from detemplate.settings import StreamSettings
    from detemplate.stream.app import build_app
    from detemplate.stream.commits import SafeCommitConsumer

    for tansu in (False, True):
        settings = StreamSettings(broker="kafka://127.0.0.1:1", tansu=tansu)
        app, _ = build_app(settings)
        assert issubclass(app.transport.Consumer, SafeCommitConsumer)


def test_the_consumer_withholds_the_commit_and_fetches_the_message_again() -> None:
    import asyncio

    from detemplate.settings import StreamSettings
    from detemplate.stream.app import build_app
    from faust.types import TP

    async def scenario() -> tuple[list[int | None], list[tuple[TP, int]]]:
        app, _ = build_app(StreamSettings(broker="kafka://127.0.0.1:1"))
        consumer = app.consumer
        seeks: list[tuple[TP, int]] = []

        async def seek(tp: TP, offset: int) -> None:
            seeks.append((tp, offset))

        consumer.seek = seek  # type: ignore[method-assign]  # record instead of a broker
        tp = TP("pages.raw", 2)
        consumer._committed_offset[tp] = 55
        consumer._acked[tp] = [56, 57]
        got = [consumer._new_offset(tp), consumer._new_offset(tp)]
        await asyncio.sleep(0)  # the scheduled seek runs
        consumer._acked[tp] = [55, 56, 57]  # 55 came again and was processed
        got.append(consumer._new_offset(tp))
        return got, seeks

    got, seeks = asyncio.run(scenario())
    assert got == [None, None, 58]
    assert seeks == [(("pages.raw", 2), 55)]  # once per hold
