"""Run a coroutine's first step at once, in the running task; a task of its own only when it waits.

Faust's consumer hands every fetched record to the streams with
`wait_first(deliver(record), suspend_flow.wait())` (mode's `Service.wait_first`): four
tasks a record (those two, the service's stopped and crashed events), an `asyncio.wait`
and three cancellations, when `deliver` almost always finishes without waiting (a
record put on a stream's queue that has room). Measured in the worker: the largest part
of Faust's own cost a page, when pages went that way; pages.raw now goes to the worker a
fetch at a time (detemplate.stream.inbox), and the records Faust still delivers (the table's
changelog while it recovers) keep this. `EagerWaitFirst.wait_first` (the worker's consumer,
detemplate.stream.commits, has it) first runs the delivery's first step here: when it
finishes, that is the result, as it would have been a loop iteration later; when it waits,
the rest of it runs in a task, awaited beside the other arguments exactly as before. What
Python 3.12 calls an eager task.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any

from mode import Service
from mode.services import WaitResults


def step(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run `coro` to its first wait: (True, its result) when it finished without one, else
    (False, a task that runs the rest of it). An exception of the first step is raised here."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, asyncio.ensure_future(_rest(coro, yielded))


@types.coroutine
def _rest(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Drive `coro`, which has just yielded `yielded` (the future it waits on), to its end,
    passing on whatever the task sends or throws into it (a cancellation included)."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # passed on to the coroutine, as a task would
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


class EagerWaitFirst(Service):
    """A mode Service whose `wait_first` runs its first coroutine's first step at once."""

    async def wait_first(self, *coros: Any, timeout: Any = None) -> WaitResults:
        """mode's `Service.wait_first` when the first coroutine waits; when it finishes without
        waiting (and the service is neither stopped nor crashed), its result, the others closed
        unstarted: they would have lost the race, the first had finished before any of them ran."""
        if coros and asyncio.iscoroutine(coros[0]) and not self._stopped.is_set() and not self._crashed.is_set():
            try:
                finished, value = step(coros[0])
            except BaseException:
                _close(coros[1:])  # as mode cancels them when the first raises
                raise
            if finished:
                _close(coros[1:])
                return WaitResults([coros[0]], [value], False)
            coros = (value, *coros[1:])
        return await super().wait_first(*coros, timeout=timeout)


def _close(coros: Any) -> None:
    for coro in coros:
        if asyncio.iscoroutine(coro):
            coro.close()
