"""Eager first steps (detemplate.stream.eager): the same results as mode's wait_first, fewer tasks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from detemplate.stream.eager import EagerWaitFirst, step
from mode import Service


async def returns(value: Any) -> Any:
    return value


async def waits_on(fut: asyncio.Future[Any], then: Any = None) -> Any:
    got = await fut
    return (got, then)


def test_a_coroutine_that_never_waits_runs_to_its_end_without_a_task() -> None:
    async def main() -> None:
        tasks = len(asyncio.all_tasks())
        assert step(returns(7)) == (True, 7)
        assert len(asyncio.all_tasks()) == tasks

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_in_a_task_with_results_exceptions_and_cancellation() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        finished, task = step(waits_on(fut, "after"))
        assert not finished and isinstance(task, asyncio.Task) and not task.done()
        fut.set_result("first")
        assert await task == ("first", "after")

        bad: asyncio.Future[Any] = loop.create_future()
        _, task = step(waits_on(bad))
        bad.set_exception(KeyError("boom"))
        with pytest.raises(KeyError):
            await task

        never: asyncio.Future[Any] = loop.create_future()
        _, task = step(waits_on(never))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert never.cancelled()  # the cancellation reached the awaited future, as in a task of its own

    asyncio.run(main())


class Plain(Service):
    """mode's own wait_first, to compare with."""


class Eager(EagerWaitFirst):
    pass


@pytest.mark.parametrize("kind", [Plain, Eager])
def test_wait_first_gives_what_mode_gives(kind: type[Service]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        svc = kind()
        flow = asyncio.Event()

        # The delivery finishes at once: its result wins; the flow's wait never ran.
        first = returns("delivered")
        res = await svc.wait_first(first, flow.wait())
        assert (res.done, res.results, res.stopped) == ([first], ["delivered"], False)

        # The delivery waits and the flow is suspended first: the flow's wait wins, the delivery is cancelled.
        fut: asyncio.Future[Any] = loop.create_future()
        flow_wait = flow.wait()
        loop.call_soon(flow.set)
        res = await svc.wait_first(waits_on(fut), flow_wait)
        assert res.done == [flow_wait] and not res.stopped
        await asyncio.sleep(0)
        assert fut.cancelled()
        flow.clear()

        # The delivery waits, then finishes: its result.
        fut = loop.create_future()
        loop.call_soon(fut.set_result, "late")
        res = await svc.wait_first(waits_on(fut, 1), flow.wait())
        assert res.results == [("late", 1)] and not res.stopped

        # An error of the delivery comes out of wait_first.
        async def fails() -> None:
            raise ValueError("bad record")

        with pytest.raises(ValueError):
            await svc.wait_first(fails(), flow.wait())

        # A stopped service: stopped, whatever the delivery did.
        svc._stopped.set()
        res = await svc.wait_first(returns(1), flow.wait())
        assert res.stopped

    asyncio.run(main())
