"""detemplate.state.changelog: records that fit a message whatever the table, and a bounded table.

Issue 15: a host's snapshot reached 1,176,489 bytes from 64 ordinary pages of 3,500 unique
cells each, over the producer's 1 MB. Records over `max_record_bytes` are split into parts;
a table over `max_table_entries` keeps its most recently seen entries, the same way live
and rebuilt.
"""

from __future__ import annotations

import random
import struct

import pytest
from detemplate.engine.errors import StateError
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.state.changelog import (
    Delta,
    HostState,
    StateLayout,
    apply_delta,
    apply_delta_bytes,
    assemble,
    decode_delta,
    host_keys,
    host_of,
    host_prefix,
    index_key,
    parts_of,
    record_kind,
    split_record,
)

PARAMS = EngineParams()
HOST = "cells.example"


def cells_page(i: int, cells: int, seed: int = 0) -> RawPage:
    """A page of one table of `cells` unique cells (no two pages share a cell), plus a small template."""
    rng = random.Random(f"{seed}:{i}")
    rows = "".join(f"<tr><td>{rng.getrandbits(48):x} {j}</td></tr>" for j in range(cells))
    html = (f"<html><body><nav><a href='/'>Home</a> <a href='/a'>About</a></nav><table>{rows}</table>"
            "<footer><p>Footer of the site</p></footer></body></html>")
    return RawPage(f"https://{HOST}/t/{i}.html", html, HOST)


class Store(dict[bytes, bytes]):
    """What one host's records in a partition's store look like, by suffix."""

    def apply(self, writes: list[tuple[bytes, bytes | None]]) -> None:
        prefix = host_prefix(HOST)
        for key, value in writes:
            if value is None:
                self.pop(key[len(prefix):], None)
            else:
                self[key[len(prefix):]] = value


def run_host(pages: list[RawPage], layout: StateLayout) -> tuple[HostTable, Store, HostState]:
    """Decide pages as the worker does, with the table bound and records split into parts."""
    table = HostTable(PARAMS.table)
    state = HostState(table)
    store = Store()
    for offset, page in enumerate(pages):
        outcome = decide(page, table, PARAMS)
        assert outcome.clean is not None
        table.source_offset = offset
        table.evict_oldest(layout.max_table_entries)
        for suffix, value in layout.records(table, outcome):
            writes = layout.physical(HOST, suffix, value, state)
            assert all(len(v) <= layout.max_record_bytes for _, v in writes if v is not None)
            store.apply(writes)
    return table, store, state


def test_split_and_assemble_round_trip() -> None:
    value = bytes(range(256)) * 40  # 10,240 bytes
    pieces = split_record(b"s0", value, 4096)
    assert [s for s, _ in pieces] == [b"s0#1", b"s0#2", b"s0#3", b"s0"]
    assert parts_of(pieces[-1][1]) == 3 and parts_of(value) == 0
    assert assemble(dict(pieces)) == {b"s0": value}
    assert split_record(b"d1", b"small", 4096) == [(b"d1", b"small")]
    # A part from another version (a crash between two writes): the record is left out, not misread.
    broken = dict(pieces)
    broken[b"s0#2"] = b"x" * 4096
    assert assemble(broken) == {}
    del broken[b"s0#2"]
    assert assemble(broken) == {}


def test_a_table_of_unique_cells_snapshots_in_parts_and_rebuilds_exactly() -> None:
    """64 pages of 3,500 unique cells: the snapshot is over 1 MB, written as parts under 900 KB."""
    layout = StateLayout(PARAMS, 16, max_record_bytes=900_000)
    pages = [cells_page(i, 3_500) for i in range(64)]
    table, store, state = run_host(pages, layout)
    snapshot = assemble(store)[layout.snapshot_suffix(64)]
    assert len(snapshot) > 1_000_000
    assert any(b"#" in s for s in store) and max(len(v) for v in store.values()) <= 900_000
    rebuilt = layout.load(store)
    assert rebuilt is not None and rebuilt.to_bytes() == table.to_bytes()
    # The index entry's size counts the parts.
    assert state.state_bytes >= sum(len(v) for v in store.values())


def test_a_host_loaded_from_its_records_is_the_live_one_with_its_entries_in_c_or_in_dicts() -> None:
    """The deltas since the newest snapshot replayed from their bytes (`load`: the keys read
    into an array, which the compiled entries read as stored) give the live table, as the
    decoded deltas replayed on a table on dicts do."""
    layout = StateLayout(PARAMS, 8)
    pages = [cells_page(i, 40, seed=3) for i in range(21)]
    table, store, _ = run_host(pages, layout)
    rebuilt = layout.load(store)
    assert rebuilt is not None and rebuilt.pages == 21 and rebuilt.to_bytes() == table.to_bytes()
    logical = assemble(store)
    slow = HostTable.from_bytes(logical[layout.snapshot_suffix(16)], PARAMS.table, python=True)
    for page in range(17, 22):
        apply_delta(slow, decode_delta(logical[layout.delta_suffix(page)]), PARAMS)
    assert slow.to_bytes() == table.to_bytes()


def test_a_delta_of_the_first_format_is_read_and_replayed() -> None:
    """Deltas written before clusters (magic DTD1: no cluster, no signature) still load."""
    keys = (3, 1 << 63, 7)
    data = struct.pack("<4sQqI", b"DTD1", 1, 42, len(keys)) + struct.pack("<3Q", *keys)
    assert decode_delta(data) == Delta(1, 42, keys)
    table = HostTable(PARAMS.table)
    apply_delta_bytes(table, data, PARAMS)
    assert (table.pages, table.source_offset, sorted(table.state())) == (1, 42, sorted(keys))
    with pytest.raises(StateError):
        apply_delta_bytes(HostTable(PARAMS.table), data[:-1], PARAMS)


def test_a_record_written_again_with_fewer_parts_deletes_the_old_ones() -> None:
    layout = StateLayout(PARAMS, 4, max_record_bytes=2048)
    state = HostState(HostTable(PARAMS.table))
    store = Store()
    store.apply(layout.physical(HOST, b"s0", b"a" * 5000, state))  # 3 parts
    assert {b"s0#1", b"s0#2", b"s0#3", b"s0"} <= set(store)
    writes = layout.physical(HOST, b"s0", b"b" * 3000, state)  # 2 parts: a tombstone for the third
    assert (host_prefix(HOST) + b"s0#3", None) in writes
    store.apply(writes)
    assert assemble(store) == {b"s0": b"b" * 3000} and b"s0#3" not in store
    store.apply(layout.physical(HOST, b"s0", b"c" * 10, state))  # whole: both parts go
    assert set(store) == {b"s0"}
    # A host loaded from the store knows its parts, stale ones included, to delete them in time.
    table = HostTable(PARAMS.table)
    table.observe([1, 2, 3])
    store.apply(layout.physical(HOST, b"s0", table.to_bytes(), state))
    store[b"s1#4"] = b"left over"
    loaded = layout.host_state(HOST, store)
    assert loaded is not None and loaded.parts == {b"s1": 4} and loaded.table.pages == 1


def test_a_record_is_written_and_sized_alike_with_the_hosts_state_and_without() -> None:
    """`physical` with a host's state (the worker's: a record in one piece whose older version
    was too takes a shorter way) writes what it writes without one, then the tombstones of an
    older version's parts, and keeps the record's bytes and the host's key prefix."""
    layout = StateLayout(PARAMS, 4, max_record_bytes=2048)
    state = HostState(HostTable(PARAMS.table))
    for suffix, value in [(b"d1", b"x" * 100), (b"d1", b"y" * 50), (b"s0", b"a" * 5000), (b"s0", b"c" * 10),
                          (b"s0", b"d" * 20)]:
        stateless = layout.physical(HOST, suffix, value)
        writes = layout.physical(HOST, suffix, value, state)
        assert writes[: len(stateless)] == stateless
        assert all(v is None for _, v in writes[len(stateless) :])
        assert state.sizes[suffix] == sum(len(k) + len(v) for k, v in stateless if v is not None)
    assert state.prefix == host_prefix(HOST) and state.parts == {}


def test_the_table_bound_is_the_same_live_and_rebuilt() -> None:
    """A table bound to 6,000 entries (a pathological host): the rebuilt table (snapshot + deltas,
    the bound applied after each) equals the live one, and keeps the template."""
    layout = StateLayout(PARAMS, 8, max_record_bytes=64_000, max_table_entries=6_000)
    pages = [cells_page(i, 800) for i in range(30)]
    table, store, _ = run_host(pages, layout)
    assert len(table) <= 6_000
    rebuilt = layout.load(store)
    assert rebuilt is not None and rebuilt.to_bytes() == table.to_bytes()
    template = [k for k, (df, _) in table.state().items() if df >= 5]
    assert template, "the site's template (nav, footer) survives the bound"
    # Replays see the same bounded tables.
    loaded = layout.load_before(store, 27)
    assert loaded is not None and loaded[0].pages == 27


def test_evict_oldest_drops_the_least_recently_seen_and_counts_template_entries() -> None:
    table = HostTable(PARAMS.table)
    for page in range(1, 11):
        keys = [1000, 1001] + [10_000 + page * 100 + j for j in range(10)]  # 2 template keys, 10 new a page
        table.observe(sorted(keys))
    assert table.template_count == 2 and len(table) == 2 + 10 * 10
    dropped = table.evict_oldest(50, keep_share=1.0)
    assert dropped == 52 and len(table) == 50
    kept = table.state()
    assert 1000 in kept and 1001 in kept  # seen on every page
    assert all(last >= 6 for _, last in kept.values())  # pages 1-5's keys went first
    assert table.template_count == 2
    assert table.evict_oldest(0) == 0 and table.evict_oldest(1000) == 0


def test_keys_and_kinds() -> None:
    assert host_prefix("a.example") == b"t/a.example\x00"
    assert record_kind(host_prefix("a.example") + b"d17") == "delta"
    assert record_kind(host_prefix("a.example") + b"s1") == "snapshot"
    assert record_kind(host_prefix("a.example") + b"s1#2") == "part"
    assert record_kind(index_key("a.example")) == "index"
    assert record_kind(b"__faust\x00offset__") is None
    assert host_of(host_prefix("ü.example") + b"d1") == "ü.example" == host_of(index_key("ü.example"))
    assert host_keys("a.example", [b"d1", b"s0#1"]) == [b"t/a.example\x00d1", b"t/a.example\x00s0#1",
                                                        b"i/a.example"]
    with pytest.raises(Exception, match="NUL"):
        host_prefix("a\x00b")
