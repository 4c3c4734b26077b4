"""An in-memory SegmentStore: for tests, `eval` and runs that need no state afterwards."""

from __future__ import annotations

import time
from collections.abc import Iterator

from ..engine.model import TemplateEvent
from ..engine.table import HostTable
from .expiry import ExpiryPolicy, IndexEntry, Ledger, choose_expired


class MemoryStore:
    """Tables kept as live objects in a dict; nothing survives the process.

    policy: whole-host expiry and the table bound (state/expiry.py), as `run --state` applies them.
    """

    def __init__(self, policy: ExpiryPolicy | None = None) -> None:
        self._tables: dict[str, HostTable] = {}
        self.ledger = Ledger(policy or ExpiryPolicy())

    def get(self, host: str) -> HostTable | None:
        return self._tables.get(host)

    def put(self, host: str, table: HostTable) -> None:
        self._tables[host] = table
        self.ledger.seen(host, table, int(time.time() * 1000))

    def hosts(self) -> Iterator[str]:
        return iter(list(self._tables))

    def flush(self) -> None:
        pass

    def advance(self, records: int) -> None:
        """The run has read `records` records of its input (the page clock: state/expiry.py Ledger)."""
        self.ledger.advance(records)

    def expire(self, now_ms: int | None = None, force: bool = False) -> list[str]:
        """Drop the hosts the policy picks (when a sweep is due, or `force`); their events follow.
        The hosts dropped."""
        ledger = self.ledger
        if not ledger.policy.expires or not (force or ledger.due()):
            return []
        entries = []
        for host, table in self._tables.items():
            last_page, last_ms = ledger.last_seen.get(host, (0, 0))
            entries.append(IndexEntry(host, last_page, last_ms, table.nbytes(), table.pages))
        now = int(time.time() * 1000) if now_ms is None else now_ms
        expired = choose_expired(entries, ledger.policy, now, ledger.clock)
        for x in expired:
            self._tables.pop(x.entry.host, None)
            ledger.last_seen.pop(x.entry.host, None)
        ledger.swept(len(entries) - len(expired), expired)
        return [x.entry.host for x in expired]

    def take_events(self) -> list[TemplateEvent]:
        """Events of the state itself (a bounded table, an expired host) since the last call."""
        return self.ledger.take_events()

    def close(self) -> None:
        pass
