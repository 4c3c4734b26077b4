"""The per-host state of the stream worker, as records of a changelog (pure: no Kafka here).

A host's table is never written as one entry per segment (hundreds per page, which caps
Faust at a few pages per second). Instead each page writes one record, and every K-th
page of the host one more:

    b"d/<slot>/<host>"   -> the page's delta: page_no, input offset, the sorted distinct
                            segment keys the page added (Outcome.applied), slot = page_no mod 2K
    b"s/<parity>/<host>" -> a full HostTable.to_bytes() after page_no, for page_no a multiple
                            of K, parity = (page_no // K) mod 2

Keys repeat, so a compacted changelog keeps at most 2K + 2 records per host, and the
logistic expiry bounds every snapshot: the state per host is bounded whatever the
crawl size. A table is rebuilt from the newest usable snapshot plus the deltas after it,
in page order (`HostTable.observe` then `take_event`, exactly what `decide` did).

Why 2K deltas and two snapshots: a page replayed after a crash (input offset at or
below the table's `source_offset`) must have its output sent again, so the worker
rebuilds the table as of just before that page and decides the page again. With this
layout that is possible for any of the host's last K pages; the worker makes sure, before
a snapshot drops the older one, that the pages it covered are committed (so they are
never replayed).

Delta record layout (little-endian): magic "DTD2", u64 page_no, i64 source offset,
u32 n, i32 cluster (-1: clusters off), u32 m, then n x u64 keys (Outcome.applied), then
m x u32: the page's MinHash signature when the host's cluster state took it in (the page
opened a cluster, or clusters.follow), else m = 0. A "DTD1" delta (no cluster fields,
written before clusters existed) is still read.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..engine.errors import StateError
from ..engine.model import Outcome
from ..engine.params import EngineParams
from ..engine.pipeline import replay_page
from ..engine.table import HostTable

_DELTA_MAGIC = b"DTD2"
_DELTA = struct.Struct("<4sQqIiI")
_DELTA_V1 = struct.Struct("<4sQqI")

Getter = Callable[[bytes], bytes | None]


@dataclass(frozen=True, slots=True)
class Delta:
    """What one page did to its host's table."""

    page_no: int
    source_offset: int
    keys: tuple[int, ...]
    cluster: int = -1  # the page's template cluster; -1 when clusters were off
    signature: bytes = b""  # Outcome.cluster_signature: u32 little-endian slots, or empty


def encode_delta(
    page_no: int, source_offset: int, keys: Sequence[int], cluster: int = -1, signature: bytes = b""
) -> bytes:
    head = _DELTA.pack(_DELTA_MAGIC, page_no, source_offset, len(keys), cluster, len(signature) // 4)
    return head + array("Q", keys).tobytes() + signature


def decode_delta(data: bytes) -> Delta:
    if data[:4] == b"DTD1":
        try:
            _, page_no, offset, n = _DELTA_V1.unpack_from(data)
        except struct.error as exc:
            raise StateError(f"page delta too short ({len(data)} bytes)") from exc
        if len(data) != _DELTA_V1.size + 8 * n:
            raise StateError(f"page delta of {len(data)} bytes does not hold {n} keys")
        keys = array("Q")
        keys.frombytes(data[_DELTA_V1.size :])
        return Delta(page_no, offset, tuple(keys))
    try:
        magic, page_no, offset, n, cluster, m = _DELTA.unpack_from(data)
    except struct.error as exc:
        raise StateError(f"page delta too short ({len(data)} bytes)") from exc
    end = _DELTA.size + 8 * n
    if magic != _DELTA_MAGIC or len(data) != end + 4 * m:
        raise StateError(f"not a page delta (magic {magic!r}, {len(data)} bytes for {n} keys)")
    keys = array("Q")
    keys.frombytes(data[_DELTA.size : end])
    return Delta(page_no, offset, tuple(keys), cluster, bytes(data[end:]))


def apply_delta(table: HostTable, delta: Delta, params: EngineParams) -> None:
    """Replay one page on a table: what `pipeline.decide` did to it, without the HTML."""
    if delta.page_no != table.pages + 1:
        raise StateError(f"delta of page {delta.page_no} does not follow page {table.pages}")
    replay_page(table, delta.keys, None if delta.cluster < 0 else delta.cluster, delta.signature, params)
    table.source_offset = delta.source_offset


class StateLayout:
    """Record keys and the rebuild of tables, for snapshots every `snapshot_every` pages."""

    def __init__(self, params: EngineParams, snapshot_every: int) -> None:
        if snapshot_every < 2:
            raise StateError("snapshot_every must be at least 2")
        self.params = params
        self.k = snapshot_every

    def delta_key(self, host: str, page_no: int) -> bytes:
        return b"d/%d/%s" % (page_no % (2 * self.k), host.encode())

    def snapshot_key(self, host: str, page_no: int) -> bytes:
        return b"s/%d/%s" % ((page_no // self.k) % 2, host.encode())

    def records(self, host: str, table: HostTable, outcome: Outcome) -> list[tuple[bytes, bytes]]:
        """The records for the page `decide` just applied to `table` (its source_offset set)."""
        page_no = table.pages
        cluster = -1 if outcome.cluster is None else outcome.cluster
        delta = encode_delta(page_no, table.source_offset, outcome.applied, cluster, outcome.cluster_signature)
        out = [(self.delta_key(host, page_no), delta)]
        if page_no % self.k == 0:
            out.append((self.snapshot_key(host, page_no), table.to_bytes()))
        return out

    def is_snapshot_page(self, page_no: int) -> bool:
        return page_no % self.k == 0

    # -- rebuilding -------------------------------------------------------------------

    def deltas(self, get: Getter, host: str) -> dict[int, Delta]:
        """The host's retained deltas by page number."""
        out = {}
        for slot in range(2 * self.k):
            data = get(b"d/%d/%s" % (slot, host.encode()))
            if data is not None:
                d = decode_delta(data)
                out[d.page_no] = d
        return out

    def snapshots(self, get: Getter, host: str) -> list[HostTable]:
        """The host's retained snapshots, newest first, then an empty table (page 0)."""
        tables = []
        for parity in (0, 1):
            data = get(b"s/%d/%s" % (parity, host.encode()))
            if data is not None:
                tables.append(HostTable.from_bytes(data, self.params.table))
        tables.sort(key=lambda t: t.pages, reverse=True)
        tables.append(HostTable(self.params.table))
        return tables

    def load(self, get: Getter, host: str) -> HostTable | None:
        """The host's newest table, or None when the host has no state."""
        deltas = self.deltas(get, host)
        snaps = self.snapshots(get, host)
        if not deltas and len(snaps) == 1:
            return None
        for table in snaps:
            # The newest snapshot wins unless a delta right after it is missing (then it
            # cannot be the base: try the older one, which the deltas must reach).
            if table.pages + 1 in deltas or table.pages >= max(deltas, default=0):
                page = table.pages + 1
                while page in deltas:
                    apply_delta(table, deltas[page], self.params)
                    page += 1
                return table
        raise StateError(f"host {host}: no snapshot that the retained deltas continue")

    def load_before(self, get: Getter, host: str, source_offset: int) -> tuple[HostTable, Delta] | None:
        """The host's table as of just before the page read at `source_offset`, and that page's delta.

        None when no retained delta has that offset (the page was dead, or is older than
        the retained window).
        """
        deltas = self.deltas(get, host)
        target = next((d for d in deltas.values() if d.source_offset == source_offset), None)
        if target is None:
            return None
        for table in self.snapshots(get, host):
            if table.pages >= target.page_no:
                continue
            if all(p in deltas for p in range(table.pages + 1, target.page_no)):
                for p in range(table.pages + 1, target.page_no):
                    apply_delta(table, deltas[p], self.params)
                return table, target
        return None

    def offset_of_page(self, get: Getter, host: str, page_no: int) -> int | None:
        """The input offset of one of the host's retained pages."""
        data = get(self.delta_key(host, page_no))
        if data is None:
            return None
        d = decode_delta(data)
        return d.source_offset if d.page_no == page_no else None
