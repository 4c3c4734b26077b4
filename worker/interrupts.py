"""How a command stops on Ctrl-C and SIGTERM: the same way for both, and between two pages
where it decides pages (`run`).

A leaf, like blas.py: a process-wide concern that the command line and the offline shell
share, importing nothing of the package.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt (`interrupts`)."""


def outcome(exc: KeyboardInterrupt) -> tuple[str, int]:
    """How a command stopped by `exc` says so, and its exit code: 143 for SIGTERM (128 + 15,
    as a shell reports a process that SIGTERM ended), 130 for Ctrl-C (128 + 2)."""
    return ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)


class HeldBack:
    """Whether an interrupt waits (`held`: the code in between must not be cut), and the one
    that came meanwhile (`pending`), to raise once it is done: `offline.run_pages` holds them
    back while it decides a page, so that a stopped run has decided whole pages only."""

    __slots__ = ("held", "pending")

    def __init__(self) -> None:
        self.held = False
        self.pending: KeyboardInterrupt | None = None

    def raise_pending(self) -> None:
        """Raise the interrupt that came while held back, if one did."""
        exc, self.pending = self.pending, None
        if exc is not None:
            raise exc


HELD_BACK = HeldBack()


@contextlib.contextmanager
def held_back() -> Iterator[None]:
    """Interrupts held back for the block (`HELD_BACK`), the one that came raised after it. For
    blocks run now and then (`run --jobs`'s merge, its copy of the tables); `run_pages` sets
    the flag itself around each page, which costs less."""
    was = HELD_BACK.held
    HELD_BACK.held = True
    try:
        yield
    finally:
        HELD_BACK.held = was
    if not was:
        HELD_BACK.raise_pending()


def _interrupt(signum: int, frame: Any) -> None:
    exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    if HELD_BACK.held and HELD_BACK.pending is None:
        HELD_BACK.pending = exc  # (a second one while held back goes through: the user insists)
        return
    raise exc


@contextlib.contextmanager
def interrupts(signals: tuple[int, ...] = (signal.SIGTERM,)) -> Iterator[None]:
    """`signals` (SIGTERM, SIGINT) stop the process as Ctrl-C does, for the block: by
    KeyboardInterrupt (`Terminated` for SIGTERM), unless `HELD_BACK` holds them back, so
    that a stop by a process manager (systemd, Kubernetes, `timeout`, `kill`) goes through
    the same clean-up as Ctrl-C: `run --jobs` stops its jobs and removes their folder, a
    store is closed. `cli.main` has SIGTERM so for every command; `run` adds SIGINT (other
    commands keep Python's own Ctrl-C, which asyncio's runner refines). A command that handles
    them itself replaces the handler (the stream worker's Faust, the broker's wait). The
    handlers before are put back after; only the main thread can set them (elsewhere nothing
    changes), nor a signal the process ignores."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A signal the process was started with ignored stays so (a shell's background job, nohup).
    signals = tuple(signum for signum in signals if signal.getsignal(signum) is not signal.SIG_IGN)
    before = [signal.signal(signum, _interrupt) for signum in signals]
    try:
        yield
    finally:
        for signum, handler in zip(signals, before, strict=True):
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        HELD_BACK.pending = None  # (one held back by code that then failed otherwise)
