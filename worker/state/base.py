"""The state interface every shell uses to get and keep per-host segment tables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..engine.model import TemplateEvent
from ..engine.pipeline import TableStore
from ..engine.table import HostTable


class SegmentStore(TableStore, Protocol):
    """Per-host segment tables, many hosts in one store.

    `get` returns the live table object; the caller mutates it in place and hands it
    back with `put`, which marks it for writing. `flush` makes every `put` durable.
    """

    def get(self, host: str) -> HostTable | None:
        """The host's table, or None when the host was never seen."""
        ...

    def put(self, host: str, table: HostTable) -> None:
        """Store (or mark dirty) the host's table after a page changed it."""
        ...

    def hosts(self) -> Iterator[str]:
        """Every host with a table."""
        ...

    def flush(self) -> None:
        """Make every table handed to `put` durable."""
        ...

    def advance(self, records: int) -> None:
        """The run has read `records` records of its input: the page clock of whole-host expiry
        (state/expiry.py Ledger; a store that no one advances counts the pages `put` takes)."""
        ...

    def expire(self, now_ms: int | None = None, force: bool = False) -> list[str]:
        """Drop whole hosts by the store's expiry policy, when a sweep is due (or `force`); the
        hosts dropped."""
        ...

    def take_events(self) -> list[TemplateEvent]:
        """Events of the state itself since the last call: `template.table_capped` (after the page
        that `put` just took) and `template.host_expired` (after `expire`)."""
        ...

    def close(self) -> None:
        """Flush and release the store."""
        ...
