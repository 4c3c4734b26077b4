"""Whole hosts leave the state: expiry when unseen, a byte budget, and a cap on one table's entries.

The logistic expiry bounds each host's table, but not how many tables there are: a crawl
sees hundreds of millions of hosts. Both shells drop whole hosts by the same policy:

- unseen for `ttl_pages` pages (the stream: messages of the host's input partition, counted
  by offsets; `run`: records of its input, pages and errors, counted across runs), or for
  `ttl_s` seconds;
- over `budget_bytes` of state, the least recently seen hosts first, down to
  `BUDGET_LOW_WATER` of the budget (the stream: per worker, over its partitions; `run`: the
  state directory);
- and a table that outgrows `max_table_entries` (a pathological host: every page a table of
  thousands of unique cells) keeps its most recently seen entries (`HostTable.evict_oldest`).

Each dropped host gives a `template.host_expired` event and each capped table a
`template.table_capped` event (docs/fields.md), and the stream worker counts both in its
metrics. What a host's "last seen" is, and how many bytes it holds, is kept in an index
entry per host (`IndexEntry`): the stream's `i/<host>` records, `run`'s likewise.
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ..engine.errors import ConfigError, StateError
from ..engine.model import TemplateEvent
from ..engine.table import HostTable

# A table of 200,000 entries is a 3.2 MB snapshot and about 30 MB of live objects. The
# largest tables of real sites measured held 5,543 entries (docs/stream.md); a host whose
# every page is a table of 3,500 unique cells reaches about 70,000 (tb = 20 pages of them).
DEFAULT_MAX_TABLE_ENTRIES = 200_000
BUDGET_LOW_WATER = 0.9  # the budget evicts down to this share of itself, so it does not run every page

EXPIRED = "template.host_expired"
CAPPED = "template.table_capped"


@dataclass(frozen=True, slots=True)
class ExpiryPolicy:
    """When whole hosts leave the state (0 turns each rule off).

    ttl_pages: drop a host unseen for this many pages (stream: messages of its input partition).
    ttl_s: drop a host unseen for this many seconds.
    budget_bytes: keep the state under this many bytes, the least recently seen hosts dropped first.
    max_table_entries: bound one host's table (the least recently seen entries dropped first).
    """

    ttl_pages: int = 0
    ttl_s: float = 0.0
    budget_bytes: int = 0
    max_table_entries: int = DEFAULT_MAX_TABLE_ENTRIES

    def __post_init__(self) -> None:
        if self.ttl_pages < 0 or self.ttl_s < 0 or self.budget_bytes < 0 or self.max_table_entries < 0:
            raise ConfigError("host expiry: ttl_pages, ttl_s, budget_bytes and max_table_entries must not be negative")

    @property
    def expires(self) -> bool:
        """Whether any rule drops whole hosts."""
        return bool(self.ttl_pages or self.ttl_s or self.budget_bytes)


# The index entry of a host, little-endian: magic "DTI1", i64 last page (the stream: the
# input offset of its last page; run: the state's page counter), i64 last seen (Unix ms),
# u64 bytes of state it holds, u64 its pages (table.pages).
_INDEX = struct.Struct("<4sqqQQ")
_INDEX_MAGIC = b"DTI1"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """When a host was last seen, and what it holds."""

    host: str
    last_page: int
    last_ms: int
    state_bytes: int
    pages: int

    def to_bytes(self) -> bytes:
        return _INDEX.pack(_INDEX_MAGIC, self.last_page, self.last_ms, self.state_bytes, self.pages)

    @classmethod
    def from_bytes(cls, host: str, data: bytes) -> IndexEntry:
        try:
            magic, last_page, last_ms, nbytes, pages = _INDEX.unpack(data)
        except struct.error as exc:
            raise StateError(f"index entry of host {host!r}: {len(data)} bytes") from exc
        if magic != _INDEX_MAGIC:
            raise StateError(f"index entry of host {host!r}: magic {magic!r}")
        return cls(host, last_page, last_ms, nbytes, pages)


@dataclass(frozen=True, slots=True)
class Expired:
    """A host to drop, and why."""

    entry: IndexEntry
    reason: str  # "unseen_pages", "unseen_time" or "budget"
    unseen_pages: int
    unseen_s: float


def choose_expired(
    entries: Iterable[IndexEntry],
    policy: ExpiryPolicy,
    now_ms: int,
    page_now: dict[str, int] | int | None = None,
) -> list[Expired]:
    """The hosts to drop among `entries`: those unseen too long, then, over the budget, the least
    recently seen until the rest fits `BUDGET_LOW_WATER` of it (by last-seen time, then host name).

    page_now: the current page count to measure `ttl_pages` against: one number, or per host
    (the stream: the next offset of the host's partition), or None (page rule not applied).
    """
    out: list[Expired] = []
    kept: list[IndexEntry] = []
    for e in entries:
        now_page = page_now.get(e.host) if isinstance(page_now, dict) else page_now
        unseen_pages = now_page - e.last_page if now_page is not None else 0
        unseen_s = max(0.0, (now_ms - e.last_ms) / 1000.0)
        if policy.ttl_pages and now_page is not None and unseen_pages > policy.ttl_pages:
            out.append(Expired(e, "unseen_pages", unseen_pages, unseen_s))
        elif policy.ttl_s and unseen_s > policy.ttl_s:
            out.append(Expired(e, "unseen_time", unseen_pages, unseen_s))
        else:
            kept.append(e)
    if policy.budget_bytes:
        total = sum(e.state_bytes for e in kept)
        if total > policy.budget_bytes:
            goal = policy.budget_bytes * BUDGET_LOW_WATER
            for e in sorted(kept, key=lambda e: (e.last_ms, e.last_page, e.host)):
                if total <= goal:
                    break
                now_page = page_now.get(e.host) if isinstance(page_now, dict) else page_now
                out.append(Expired(e, "budget", now_page - e.last_page if now_page is not None else 0,
                                   max(0.0, (now_ms - e.last_ms) / 1000.0)))
                total -= e.state_bytes
    return out


def expired_event(x: Expired) -> TemplateEvent:
    """The `template.host_expired` event of a dropped host."""
    e = x.entry
    return TemplateEvent(
        type=EXPIRED,
        host=e.host,
        page_no=max(1, e.pages),
        url="",
        details={
            "reason": x.reason,
            "unseen_pages": x.unseen_pages,
            "unseen_s": round(x.unseen_s, 3),
            "state_bytes": e.state_bytes,
        },
    )


def capped_event(host: str, page_no: int, url: str, dropped: int, entries: int, max_entries: int) -> TemplateEvent:
    """The `template.table_capped` event of a page after which its host's table was bounded."""
    return TemplateEvent(
        type=CAPPED,
        host=host,
        page_no=page_no,
        url=url,
        details={"dropped_segments": dropped, "table_segments": entries, "max_table_entries": max_entries},
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The expiry flags of `run` and `worker` (the worker's override its DETEMPLATE_* variables)."""
    g = p.add_argument_group("whole-host expiry", "Drop whole hosts from the state (docs/deploy.md, \"State\").")
    g.add_argument("--host-ttl-pages", type=int, metavar="N",
                   help="drop a host unseen for N pages (worker: messages of its input partition; "
                   "DETEMPLATE_HOST_TTL_PAGES); default 0 = never")
    g.add_argument("--host-ttl-days", type=float, metavar="D",
                   help="drop a host unseen for D days (worker: DETEMPLATE_HOST_TTL_S, in seconds); default 0 = never")
    g.add_argument("--state-budget-mb", type=float, metavar="MB",
                   help="keep the state under MB megabytes, the least recently seen hosts dropped first "
                   "(worker: over its partitions, DETEMPLATE_STATE_BUDGET_BYTES); default 0 = no budget")
    g.add_argument("--max-table-entries", type=int, metavar="N",
                   help=f"bound one host's table to N entries, the least recently seen dropped (default "
                   f"{DEFAULT_MAX_TABLE_ENTRIES:,}; worker: DETEMPLATE_MAX_TABLE_ENTRIES); give `run` and the "
                   "worker the same")


def overrides_from_args(args: argparse.Namespace) -> dict[str, int | float | None]:
    """The worker settings fields the expiry flags set (None where a flag is not given)."""
    days = getattr(args, "host_ttl_days", None)
    mb = getattr(args, "state_budget_mb", None)
    return {
        "host_ttl_pages": getattr(args, "host_ttl_pages", None),
        "host_ttl_s": None if days is None else days * 86400.0,
        "state_budget_bytes": None if mb is None else int(mb * 1024 * 1024),
        "max_table_entries": getattr(args, "max_table_entries", None),
    }


def policy_from_args(args: argparse.Namespace) -> ExpiryPolicy:
    """`run`'s policy: the flags, the defaults for the rest."""
    given = {k: v for k, v in overrides_from_args(args).items() if v is not None}
    return ExpiryPolicy(
        ttl_pages=int(given.get("host_ttl_pages", 0)),
        ttl_s=float(given.get("host_ttl_s", 0.0)),
        budget_bytes=int(given.get("state_budget_bytes", 0)),
        max_table_entries=int(given.get("max_table_entries", DEFAULT_MAX_TABLE_ENTRIES)),
    )


class Ledger:
    """What `run`'s stores (memory.py, rocks.py) keep beside their tables: the page clock, when
    each cached host was last seen, the table bound, the events for the caller, and when to
    sweep (`sweep_every`: a sweep reads every host's index entry).

    clock: `run`'s records of the input, counted across runs (`advance`, which `run` calls for
    every record, a page or an error; the stream likewise counts its partition's messages by
    offsets); a store that no one advances counts the pages it takes (`seen`) instead.
    """

    SWEEP_EVERY_PAGES = 10_000

    def __init__(self, policy: ExpiryPolicy, clock: int = 0) -> None:
        self.policy = policy
        self.base = clock  # the clock when the store was opened: earlier runs' records
        self.clock = clock
        self.scale = 1  # the jobs a run's hosts are split over (`sweep_every`)
        self.advanced = False  # the clock set by `advance` (run), not counted by `seen`
        self.last_seen: dict[str, tuple[int, int]] = {}  # host -> (clock, Unix ms) of its last page
        self.events: list[TemplateEvent] = []
        self._swept_at = clock
        self._sweep_every = self.sweep_every(0)

    def start_at(self, clock: int) -> None:
        """Count on from `clock` (a job of `run --jobs`: the run's state's clock, not its own store's)."""
        self.base = self.clock = self._swept_at = clock

    def advance(self, records: int) -> None:
        """The run has read `records` records of its input: the clock is the base plus them."""
        self.advanced = True
        self.clock = self.base + records

    def seen(self, host: str, table: HostTable, now_ms: int) -> None:
        """A page of `host` changed its table: remember when (ticking the clock where no one
        advances it), bound the table."""
        if not self.advanced:
            self.clock += 1
        self.last_seen[host] = (self.clock, now_ms)
        bound = self.policy.max_table_entries
        dropped = table.evict_oldest(bound)
        if dropped:
            self.events.append(capped_event(host, table.pages, "", dropped, len(table), bound))

    def sweep_every(self, hosts: int) -> int:
        """Pages between sweeps, after a sweep that found `hosts` hosts: SWEEP_EVERY_PAGES, or
        a tenth of `ttl_pages` when hosts are dropped only by the pages they go unseen (a host
        then leaves within 1.1 ttl_pages, and the state holds about the hosts of the last
        1.1 ttl_pages pages, so a sweep reads about 11 entries a page; the sweeps come at the
        same pages however many jobs split the hosts), else a tenth of the hosts (of the whole
        state: `scale` jobs each hold about a share of them), whichever is more."""
        p = self.policy
        if p.ttl_pages and not p.budget_bytes:
            return max(self.SWEEP_EVERY_PAGES, p.ttl_pages // 10)
        return max(self.SWEEP_EVERY_PAGES, hosts * self.scale // 10)

    def due(self) -> bool:
        return self.policy.expires and self.clock - self._swept_at >= self._sweep_every

    def swept(self, hosts: int, expired: list[Expired]) -> None:
        self._swept_at = self.clock
        self._sweep_every = self.sweep_every(hosts)
        self.events.extend(expired_event(x) for x in expired)

    def take_events(self) -> list[TemplateEvent]:
        out, self.events = self.events, []
        return out
