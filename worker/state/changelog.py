"""The per-host state of the stream worker, as records of a changelog (pure: no Kafka here).

A host's table is never written as one entry per segment (hundreds per page, which caps
Faust at a few pages per second). Instead each page writes one record, and every K-th
page of the host one more. Keys are bytes; a host's records share one prefix, so the
worker reads (and deletes) a host's state with one range scan of its partition's RocksDB:

    t/<host>\\0d<slot>     the page's delta: page_no, input offset, the sorted distinct keys
                          the page added (Outcome.applied), slot = page_no mod 2K
    t/<host>\\0s<parity>   a full HostTable.to_bytes() after page_no, for page_no a multiple
                          of K, parity = (page_no // K) mod 2
    t/<host>\\0<r>#<i>     part i (1..n) of record <r> when <r> is larger than one message
                          (`max_record_bytes`); <r> itself then holds a part header
    i/<host>              the host's index entry (state/expiry.py IndexEntry): when it was
                          last seen, how many bytes it holds; what whole-host expiry reads

The host is its UTF-8 bytes, which never hold NUL (the worker refuses such a host), so
``t/<host>\\0`` is a prefix no other host's keys share.

Keys repeat, so a compacted changelog keeps at most 2K + 3 records per host (and their
parts), and the logistic expiry (and `max_table_entries`) bound every snapshot. A whole
host leaves with a tombstone on each of its keys (`host_keys`). A table is rebuilt from the
newest usable snapshot plus the deltas after it, in page order (`HostTable.observe` then
`take_event`, exactly what `decide` did, then the same table bound as the shells apply).

Why 2K deltas and two snapshots: a page replayed after a crash (its offset among the
retained deltas) must have its output sent again, so the worker rebuilds the table as of
just before that page and decides the page again. With this layout that is possible for
any of the host's last K pages.

Parts: a record whose value is over `max_record_bytes` (a snapshot of a large table, the
delta of a page with a hundred thousand segments) is written as parts ``<r>#1`` ..
``<r>#n`` of at most that size, then ``<r>`` with the header: magic "DTP1", u32 n, u64 the
whole value's length, u64 its xxh64. Parts go out before the header, in one partition, so a
reader that sees the header has seen the parts; one whose parts do not add up (a crash
between them, an older version's parts) treats the record as absent, which the rebuild
survives (the older snapshot, or a delta of a page that was never committed). Parts of an
older, longer version are deleted with tombstones when a record is written again.

Delta record layout (little-endian): magic "DTD2", u64 page_no, i64 source offset,
u32 n, i32 cluster (-1: clusters off), u32 m, then n x u64 keys (Outcome.applied), then
m x u32: the page's MinHash signature when the host's cluster state took it in (the page
opened a cluster, or clusters.follow), else m = 0. A "DTD1" delta (no cluster fields,
written before clusters existed) is still read.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import xxhash

from ..engine.errors import StateError
from ..engine.model import Outcome
from ..engine.params import EngineParams
from ..engine.pipeline import replay_page
from ..engine.table import HostTable

_DELTA_MAGIC = b"DTD2"
_DELTA = struct.Struct("<4sQqIiI")
_DELTA_V1 = struct.Struct("<4sQqI")
_PARTS_MAGIC = b"DTP1"
_PARTS = struct.Struct("<4sIQQ")

TABLE_PREFIX = b"t/"
INDEX_PREFIX = b"i/"
SEP = b"\x00"

Getter = Callable[[bytes], bytes | None]
HostRecords = Mapping[bytes, bytes]  # one host's records by suffix (b"d3", b"s0", b"d3#1", ...)


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
    page_no, offset, cluster, keys, signature = _delta_parts(data)
    return Delta(page_no, offset, tuple(keys), cluster, signature)


def _delta_parts(data: bytes) -> tuple[int, int, int, array[int], bytes]:
    """A delta's page number, source offset, cluster, keys (an array, as stored) and signature."""
    page_no, offset, cluster, start, end = delta_header(data)
    keys = array("Q")
    keys.frombytes(data[start:end])
    return page_no, offset, cluster, keys, bytes(data[end:])


def delta_header(data: bytes) -> tuple[int, int, int, int, int]:
    """A delta's page number, source offset and cluster, and where its keys start and end (its
    signature follows them); StateError for bytes that are not a delta."""
    if data[:4] == b"DTD1":
        try:
            _, page_no, offset, n = _DELTA_V1.unpack_from(data)
        except struct.error as exc:
            raise StateError(f"page delta too short ({len(data)} bytes)") from exc
        if len(data) != _DELTA_V1.size + 8 * n:
            raise StateError(f"page delta of {len(data)} bytes does not hold {n} keys")
        return page_no, offset, -1, _DELTA_V1.size, len(data)
    try:
        magic, page_no, offset, n, cluster, m = _DELTA.unpack_from(data)
    except struct.error as exc:
        raise StateError(f"page delta too short ({len(data)} bytes)") from exc
    end = _DELTA.size + 8 * n
    if magic != _DELTA_MAGIC or len(data) != end + 4 * m:
        raise StateError(f"not a page delta (magic {magic!r}, {len(data)} bytes for {n} keys)")
    return page_no, offset, cluster, _DELTA.size, end


# -- keys ---------------------------------------------------------------------------------


def host_bytes(host: str) -> bytes:
    """The host in keys: UTF-8, without NUL (the worker dead-letters a host that is not)."""
    data = host.encode("utf-8")
    if SEP in data:
        raise StateError(f"a host with a NUL byte has no state key: {host!r}")
    return data


def host_prefix(host: str) -> bytes:
    """The prefix of every ``t/`` record of the host."""
    return TABLE_PREFIX + host_bytes(host) + SEP


def index_key(host: str) -> bytes:
    return INDEX_PREFIX + host_bytes(host)


def host_of(key: bytes) -> str | None:
    """The host a state key belongs to (None for keys of no host, such as Faust's offset key)."""
    if key.startswith(INDEX_PREFIX):
        return key[len(INDEX_PREFIX) :].decode("utf-8", "replace")
    if key.startswith(TABLE_PREFIX) and SEP in key:
        return key[len(TABLE_PREFIX) : key.index(SEP)].decode("utf-8", "replace")
    return None


def record_kind(key: bytes) -> str | None:
    """What a state key holds: "delta", "snapshot", "part" (of a split record), "index", or None."""
    if key.startswith(INDEX_PREFIX):
        return "index"
    if not key.startswith(TABLE_PREFIX) or SEP not in key:
        return None
    suffix = key[key.index(SEP) + 1 :]
    if b"#" in suffix:
        return "part"
    return {b"d": "delta", b"s": "snapshot"}.get(suffix[:1])


def records_of(host: str, items: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """One host's records by suffix, from any (key, value) pairs of a partition (tests, tools)."""
    prefix = host_prefix(host)
    pairs = items.items() if isinstance(items, Mapping) else items
    return {k[len(prefix) :]: v for k, v in pairs if k.startswith(prefix)}


# -- parts --------------------------------------------------------------------------------


def split_record(suffix: bytes, value: bytes, max_record_bytes: int) -> list[tuple[bytes, bytes]]:
    """(suffix, value) as one record, or as its parts then the part header (see the module)."""
    if len(value) <= max_record_bytes:
        return [(suffix, value)]
    n = (len(value) + max_record_bytes - 1) // max_record_bytes
    out = [(suffix + b"#%d" % (i + 1), value[i * max_record_bytes : (i + 1) * max_record_bytes]) for i in range(n)]
    out.append((suffix, _PARTS.pack(_PARTS_MAGIC, n, len(value), xxhash.xxh64_intdigest(value))))
    return out


def parts_of(value: bytes | None) -> int:
    """How many parts a stored record has (0: it is whole)."""
    if value is None or value[:4] != _PARTS_MAGIC or len(value) != _PARTS.size:
        return 0
    return int(_PARTS.unpack(value)[1])


def assemble(records: HostRecords) -> dict[bytes, bytes]:
    """The host's logical records: parts joined; a record whose parts do not add up is left out."""
    out: dict[bytes, bytes] = {}
    for suffix, value in records.items():
        if b"#" in suffix:
            continue
        if value[:4] == _PARTS_MAGIC and len(value) == _PARTS.size:
            _, n, length, digest = _PARTS.unpack(value)
            pieces = [records.get(suffix + b"#%d" % (i + 1)) for i in range(n)]
            if any(p is None for p in pieces):
                continue
            whole = b"".join(p for p in pieces if p is not None)
            if len(whole) != length or xxhash.xxh64_intdigest(whole) != digest:
                continue
            out[suffix] = whole
        else:
            out[suffix] = value
    return out


# -- what a host holds, for the worker --------------------------------------------------


@dataclass(slots=True)
class HostState:
    """A live host of the worker: its table and what its records in the store are.

    sizes: bytes of each record (key + value, parts included) by suffix, for the index
        entry's state_bytes; parts: the part count of each split record, so that a record
        written again deletes the parts its older version had beyond its own.
    index_page / index_ms: the input offset and time of the host's index entry as last written.
    prefix: the host's key prefix (`host_prefix`), once known.
    snapshot_page / snapshot_offset: the page number and input offset of the host's last
        snapshot written in this process (-1: none), which the next snapshot's check reads
        rather than that page's delta from the store.
    """

    table: HostTable
    sizes: dict[bytes, int] = field(default_factory=dict)
    parts: dict[bytes, int] = field(default_factory=dict)
    index_page: int = -1
    index_ms: int = 0
    prefix: bytes = b""
    snapshot_page: int = -1
    snapshot_offset: int = -1

    @property
    def state_bytes(self) -> int:
        return sum(self.sizes.values())


def apply_delta(table: HostTable, delta: Delta, params: EngineParams, max_table_entries: int = 0) -> None:
    """Replay one page on a table: what `pipeline.decide` did to it, without the HTML, then the
    shells' bound on the table (`HostTable.evict_oldest`)."""
    _replay(table, delta.page_no, delta.source_offset, delta.keys, delta.cluster, delta.signature, params,
            max_table_entries)


def apply_delta_bytes(table: HostTable, data: bytes, params: EngineParams, max_table_entries: int = 0) -> None:
    """`apply_delta` of an encoded delta, its keys read into an array as stored (no int object
    a key: the table's compiled entries read the array itself)."""
    page_no, offset, cluster, keys, signature = _delta_parts(data)
    _replay(table, page_no, offset, keys, cluster, signature, params, max_table_entries)


def _replay(
    table: HostTable, page_no: int, source_offset: int, keys: Sequence[int], cluster: int, signature: bytes,
    params: EngineParams, max_table_entries: int,
) -> None:
    if page_no != table.pages + 1:
        raise StateError(f"delta of page {page_no} does not follow page {table.pages}")
    replay_page(table, keys, None if cluster < 0 else cluster, signature, params)
    table.source_offset = source_offset
    table.evict_oldest(max_table_entries)


class StateLayout:
    """Record keys and the rebuild of tables, for snapshots every `snapshot_every` pages.

    max_record_bytes: a record's value at most; larger ones are split into parts.
    max_table_entries: the bound on a table the shells apply after each page (0: none).
    """

    def __init__(
        self,
        params: EngineParams,
        snapshot_every: int,
        max_record_bytes: int = 900_000,
        max_table_entries: int = 0,
    ) -> None:
        if snapshot_every < 2:
            raise StateError("snapshot_every must be at least 2")
        if max_record_bytes < 1024:
            raise StateError("max_record_bytes must be at least 1024")
        self.params = params
        self.k = snapshot_every
        self.max_record_bytes = max_record_bytes
        self.max_table_entries = max_table_entries

    def delta_suffix(self, page_no: int) -> bytes:
        return b"d%d" % (page_no % (2 * self.k))

    def snapshot_suffix(self, page_no: int) -> bytes:
        return b"s%d" % ((page_no // self.k) % 2)

    def is_snapshot_page(self, page_no: int) -> bool:
        return page_no % self.k == 0

    def records(self, table: HostTable, outcome: Outcome) -> list[tuple[bytes, bytes]]:
        """The logical records (suffix, value) for the page `decide` just applied to `table`
        (its source_offset set): the delta, and on every K-th page the snapshot."""
        page_no = table.pages
        cluster = -1 if outcome.cluster is None else outcome.cluster
        delta = encode_delta(page_no, table.source_offset, outcome.applied, cluster, outcome.cluster_signature)
        out = [(self.delta_suffix(page_no), delta)]
        if self.is_snapshot_page(page_no):
            out.append((self.snapshot_suffix(page_no), table.to_bytes()))
        return out

    def physical(
        self, host: str, suffix: bytes, value: bytes, state: HostState | None = None
    ) -> list[tuple[bytes, bytes | None]]:
        """The store and changelog writes of one logical record: its parts (if any), the record,
        and tombstones (None) for parts an older version had beyond these. Updates `state`."""
        if state is None:
            prefix = host_prefix(host)
        else:
            prefix = state.prefix
            if not prefix:
                prefix = state.prefix = host_prefix(host)
            if len(value) <= self.max_record_bytes and suffix not in state.parts:
                # A record in one piece whose older version was too (nearly every record).
                key = prefix + suffix
                state.sizes[suffix] = len(key) + len(value)
                return [(key, value)]
        pieces = split_record(suffix, value, self.max_record_bytes)
        out: list[tuple[bytes, bytes | None]] = [(prefix + s, v) for s, v in pieces]
        n = len(pieces) - 1 if len(pieces) > 1 else 0
        if state is not None:
            old = state.parts.pop(suffix, 0)
            out += [(prefix + suffix + b"#%d" % i, None) for i in range(n + 1, old + 1)]
            if n:
                state.parts[suffix] = n
            state.sizes[suffix] = sum(len(prefix) + len(s) + len(v) for s, v in pieces)
        return out

    def host_state(self, host: str, records: HostRecords) -> HostState | None:
        """A live host from its records in the store (None when it has none)."""
        table = self.load(records)
        if table is None:
            return None
        state = HostState(table)
        plen = len(host_prefix(host))
        for suffix, value in records.items():
            main = suffix.split(b"#", 1)[0]
            state.sizes[main] = state.sizes.get(main, 0) + plen + len(suffix) + len(value)
            n = parts_of(value) if b"#" not in suffix else 0
            if n:
                state.parts[suffix] = max(n, state.parts.get(suffix, 0))
            elif b"#" in suffix:  # a part, maybe of an older version: delete it with the record
                number = int(suffix.split(b"#", 1)[1])
                state.parts[main] = max(number, state.parts.get(main, 0))
        return state

    # -- rebuilding -------------------------------------------------------------------

    def deltas(self, logical: HostRecords) -> dict[int, Delta]:
        """The host's retained deltas by page number (from assembled records)."""
        out = {}
        for suffix, data in logical.items():
            if suffix[:1] == b"d":
                d = decode_delta(data)
                out[d.page_no] = d
        return out

    def snapshots(self, logical: HostRecords) -> list[HostTable]:
        """The host's retained snapshots, newest first, then an empty table (page 0)."""
        tables = [HostTable.from_bytes(data, self.params.table) for s, data in logical.items() if s[:1] == b"s"]
        tables.sort(key=lambda t: t.pages, reverse=True)
        tables.append(HostTable(self.params.table))
        return tables

    def load(self, records: HostRecords) -> HostTable | None:
        """The host's newest table from its records, or None when the host has none. Every
        retained delta's header is read (and checked); the keys only of those replayed."""
        logical = assemble(records)
        deltas = {delta_header(data)[0]: data for suffix, data in logical.items() if suffix[:1] == b"d"}
        snaps = self.snapshots(logical)
        if not deltas and len(snaps) == 1:
            return None
        for table in snaps:
            # The newest snapshot wins unless a delta right after it is missing (then it
            # cannot be the base: try the older one, which the deltas must reach).
            if table.pages + 1 in deltas or table.pages >= max(deltas, default=0):
                page = table.pages + 1
                while page in deltas:
                    apply_delta_bytes(table, deltas[page], self.params, self.max_table_entries)
                    page += 1
                return table
        raise StateError("no snapshot that the retained deltas continue")

    def load_before(self, records: HostRecords, source_offset: int) -> tuple[HostTable, Delta] | None:
        """The host's table as of just before the page read at `source_offset`, and that page's delta.

        None when no retained delta has that offset (the page was dead, never applied, or is
        older than the retained window).
        """
        logical = assemble(records)
        deltas = self.deltas(logical)
        target = next((d for d in deltas.values() if d.source_offset == source_offset), None)
        if target is None:
            return None
        for table in self.snapshots(logical):
            if table.pages >= target.page_no:
                continue
            if all(p in deltas for p in range(table.pages + 1, target.page_no)):
                for p in range(table.pages + 1, target.page_no):
                    apply_delta(table, deltas[p], self.params, self.max_table_entries)
                return table, target
        return None

    def applied_offsets(self, records: HostRecords) -> set[int]:
        """The input offsets of the host's retained deltas (pages known to be applied)."""
        return {d.source_offset for d in self.deltas(assemble(records)).values()}

    def offset_of_page(self, records: HostRecords, page_no: int) -> int | None:
        """The input offset of one of the host's retained pages."""
        d = self.deltas(assemble(records)).get(page_no)
        return None if d is None else d.source_offset


def host_keys(host: str, stored: Iterable[bytes]) -> list[bytes]:
    """Every key of a host to delete (its records' full keys, then its index entry)."""
    prefix = host_prefix(host)
    return [prefix + s for s in stored] + [index_key(host)]


def get_records(get: Getter, host: str, k: int) -> dict[bytes, bytes]:
    """One host's records through point reads (a store without range scans): every key the
    layout can hold for it, parts included."""
    prefix = host_prefix(host)
    out: dict[bytes, bytes] = {}
    for suffix in [b"d%d" % s for s in range(2 * k)] + [b"s0", b"s1"]:
        out.update(get_record(get, prefix, suffix))
    return out


def get_record(get: Getter, prefix: bytes, suffix: bytes) -> dict[bytes, bytes]:
    """One record of a host through point reads, by suffix, with its parts (empty: none)."""
    value = get(prefix + suffix)
    if value is None:
        return {}
    out = {suffix: value}
    for i in range(1, parts_of(value) + 1):
        part = get(prefix + suffix + b"#%d" % i)
        if part is not None:
            out[suffix + b"#%d" % i] = part
    return out
