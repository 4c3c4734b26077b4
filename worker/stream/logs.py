"""The Kafka client's repeated log lines, let through once every few seconds each.

While a broker cannot be reached, aiokafka logs each failed connect, metadata update, fetch
and coordinator lookup at ERROR, every retry: about 40 lines a second from one worker
(measured with the bundled broker killed; an hour's outage would be about 144,000 lines).
`RepeatFilter` lets one warning or error of each message (its logger, level and template,
whatever its arguments) through every `every_s` seconds, and the next one it lets through says
how many it held back, so the log still says what failed and how often. Lower levels pass as
they are (a group's joins and assignments are logged at INFO, and each one matters).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

EVERY_S = 10.0  # one line of each repeated message this often
MAX_KEYS = 1024  # messages remembered at once (the client's are a few dozen templates)


class RepeatFilter(logging.Filter):
    """Lets a warning or error through once every `every_s` seconds for each (logger, level,
    template); lower levels always."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s = every_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # key -> (let through at, held since)
        self._lock = threading.Lock()  # the consumer's thread logs too

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        key = (record.name, record.levelno, template)
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.every_s:
                self._seen[key] = (seen[0], seen[1] + 1)
                return False
            if seen is None and len(self._seen) >= MAX_KEYS:
                self._seen.clear()
            self._seen[key] = (now, 0)
        if seen is not None and seen[1]:
            # Appended to the template: the record's arguments still format it as before.
            record.msg = f"{record.msg} ({seen[1]:,} more like it in the last {now - seen[0]:.0f} s)"
        return True


def quiet_repeats(prefix: str = "aiokafka", every_s: float = EVERY_S) -> RepeatFilter:
    """Put one `RepeatFilter` on every logger under `prefix` that exists now (a logger's filters
    see only the records logged on it: the library's modules are imported by then)."""
    repeat = RepeatFilter(every_s)
    names = [name for name in logging.root.manager.loggerDict if name == prefix or name.startswith(prefix + ".")]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(repeat)
    return repeat


__all__ = ["EVERY_S", "RepeatFilter", "quiet_repeats"]
