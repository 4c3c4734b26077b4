"""An in-memory SegmentStore: for tests, `eval` and runs that need no state afterwards."""

from __future__ import annotations

from collections.abc import Iterator

from ..engine.table import HostTable


class MemoryStore:
    """Tables kept as live objects in a dict; nothing survives the process."""

    def __init__(self) -> None:
        self._tables: dict[str, HostTable] = {}

    def get(self, host: str) -> HostTable | None:
        return self._tables.get(host)

    def put(self, host: str, table: HostTable) -> None:
        self._tables[host] = table

    def hosts(self) -> Iterator[str]:
        return iter(list(self._tables))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
