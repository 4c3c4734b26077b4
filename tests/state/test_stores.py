"""detemplate.state: MemoryStore and RocksStore (real RocksDB on tmp_path), reopen, LRU write-back, corruption."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from detemplate.engine.errors import StateError
from detemplate.engine.params import EngineParams, TableParams
from detemplate.engine.pipeline import process_page
from detemplate.engine.table import HostTable
from detemplate.state import MemoryStore
from detemplate.state.rocks import RocksStore
from rocksdict import Options, Rdict

from tests.factories import interleave, make_site

PARAMS = EngineParams()


def tables_after(pages: list, store: object) -> None:
    for sp in pages:
        process_page(sp.page, store, PARAMS)  # type: ignore[arg-type]


def test_memory_store_basics() -> None:
    store = MemoryStore()
    assert store.get("a") is None and list(store.hosts()) == []
    table = HostTable(PARAMS.table)
    store.put("a", table)
    assert store.get("a") is table
    store.flush()
    store.close()


def test_rocks_round_trip_across_reopen_goes_on_learning(tmp_path: Path) -> None:
    site = make_site("reopen.example", 30, seed=11)
    straight = MemoryStore()
    straight_out = [process_page(sp.page, straight, PARAMS) for sp in site]

    store = RocksStore(tmp_path / "db", PARAMS.table)
    first = [process_page(sp.page, store, PARAMS) for sp in site[:12]]
    store.close()
    store = RocksStore(tmp_path / "db", PARAMS.table)
    try:
        table = store.get("reopen.example")
        assert table is not None and table.pages == 12
        second = [process_page(sp.page, store, PARAMS) for sp in site[12:]]
        assert store.get("reopen.example").to_bytes() == straight.get("reopen.example").to_bytes()  # type: ignore[union-attr]
    finally:
        store.close()
    # The second run starts where the first stopped: page numbers go on, verdicts are
    # those of one uninterrupted run.
    assert [o.clean for o in first + second] == [o.clean for o in straight_out]
    assert [o.events for o in first + second] == [o.events for o in straight_out]
    assert second[0].clean.page_no == 13  # type: ignore[union-attr]


def test_flush_makes_puts_durable_without_close(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db", PARAMS.table)
    tables_after(make_site("flush.example", 3), store)
    store.flush()
    expected = store.get("flush.example").to_bytes()  # type: ignore[union-attr]
    # Read the database as another process would, from what is on disk.
    store._db.close()
    raw = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    try:
        assert raw[b"t/flush.example"] == expected
    finally:
        raw.close()


def test_lru_eviction_writes_back_dirty_tables(tmp_path: Path) -> None:
    sites = [make_site(f"h{i}.example", 6, seed=i) for i in range(5)]
    pages = interleave(*sites)
    memory = MemoryStore()
    tables_after(pages, memory)
    store = RocksStore(tmp_path / "db", PARAMS.table, cache_hosts=2)
    try:
        tables_after(pages, store)
        assert len(store._cache) == 2  # bounded: only two tables live
        # No flush: the three evicted hosts can only come back from the database.
        for i in range(5):
            host = f"h{i}.example"
            table = store.get(host)
            assert table is not None, host
            assert table.pages == 6
            assert table.to_bytes() == memory.get(host).to_bytes()  # type: ignore[union-attr]
    finally:
        store.close()
    reopened = RocksStore(tmp_path / "db", PARAMS.table, cache_hosts=2)
    try:
        assert sorted(reopened.hosts()) == [f"h{i}.example" for i in range(5)]
        for i in range(5):
            assert reopened.get(f"h{i}.example").pages == 6  # type: ignore[union-attr]
    finally:
        reopened.close()


class CountingDB:
    """Wraps the store's Rdict to count single-key writes (eviction write-backs)."""

    def __init__(self, db: Rdict) -> None:
        self.db = db
        self.writes: list[bytes] = []

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.writes.append(key)
        self.db[key] = value

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


def test_only_dirty_tables_are_written_back_on_eviction(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db", PARAMS.table, cache_hosts=1)
    db = CountingDB(store._db)
    store._db = db  # type: ignore[assignment]
    try:
        tables_after(make_site("a.example", 2), store)
        assert db.writes == []
        tables_after(make_site("b.example", 1), store)  # evicts a, dirty: written
        # The table and its index entry (when it was last seen: whole-host expiry reads it).
        assert db.writes == [b"t/a.example", b"i/a.example"]
        assert store.get("a.example").pages == 2  # type: ignore[union-attr]  # reads a, evicts b (dirty)
        assert db.writes == [b"t/a.example", b"i/a.example", b"t/b.example", b"i/b.example"]
        assert store.get("b.example") is not None  # evicts a, unchanged since read: no write
        assert len(db.writes) == 4
    finally:
        store._db = db.db
        store.close()


def test_many_hosts_in_one_database(tmp_path: Path) -> None:
    hosts = [f"site-{i:03d}.example" for i in range(150)] + ["ünïcode.example", "a/b.example"]
    store = RocksStore(tmp_path / "db", PARAMS.table, cache_hosts=16)
    try:
        for host in hosts:
            tables_after(make_site(host, 2, seed=1, paragraphs=1), store)
        listed = list(store.hosts())
        assert len(listed) == len(hosts) and set(listed) == set(hosts)  # each host once
    finally:
        store.close()
    store = RocksStore(tmp_path / "db", PARAMS.table, cache_hosts=16)
    try:
        assert sorted(store.hosts()) == sorted(hosts)
        assert all(store.get(h).pages == 2 for h in hosts)  # type: ignore[union-attr]
        assert store.get("never.example") is None
        assert store.disk_bytes() > 0
    finally:
        store.close()


def _filled_db(path: Path) -> None:
    store = RocksStore(path, PARAMS.table)
    for h in range(3):
        table = HostTable(PARAMS.table)
        table.observe(list(range(h, 20_000 + h)))
        store.put(f"h{h}.example", table)
    store.close()


@pytest.mark.parametrize("which", ["all", "current", "sst-footer", "sst-middle"])
def test_corrupted_database_raises_state_error(tmp_path: Path, which: str) -> None:
    db = tmp_path / "db"
    _filled_db(db)
    rng = random.Random(which)
    files = [f for f in db.iterdir() if f.is_file() and f.name != "LOCK"]
    assert any(f.suffix == ".sst" for f in files), sorted(f.name for f in files)
    for f in files:
        data = bytearray(f.read_bytes())
        if which == "all":
            data = bytearray(os.urandom(max(len(data), 64)))
        elif which == "current" and f.name == "CURRENT":
            data = bytearray(b"garbage without newline")
        elif which == "sst-footer" and f.suffix == ".sst":
            data[-48:] = rng.randbytes(48)
        elif which == "sst-middle" and f.suffix == ".sst":
            for i in range(100, len(data) // 2, 97):
                data[i] ^= 0xFF
        f.write_bytes(bytes(data))
    with pytest.raises(StateError) as err:
        store = RocksStore(db, PARAMS.table)
        try:
            for h in range(3):
                store.get(f"h{h}.example")
            list(store.hosts())
        finally:
            store._db.close()
    message = str(err.value)
    assert str(db) in message
    assert "corrupt" in message.lower()


def test_a_corrupt_table_value_raises_state_error_naming_the_host(tmp_path: Path) -> None:
    db = tmp_path / "db"
    store = RocksStore(db, PARAMS.table)
    store._db[b"t/bad.example"] = b"DTT1 not a table"
    try:
        with pytest.raises(StateError, match=r"bad\.example"):
            store.get("bad.example")
    finally:
        store.close()


def test_an_unknown_format_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "db"
    RocksStore(db, PARAMS.table).close()
    raw = Rdict(str(db), Options(raw_mode=True))
    raw[b"meta/format"] = b"99"
    raw.close()
    with pytest.raises(StateError, match="format"):
        RocksStore(db, PARAMS.table)


def test_a_file_where_the_state_folder_should_be(tmp_path: Path) -> None:
    path = tmp_path / "state"
    path.write_text("not a folder")
    with pytest.raises(StateError, match="state folder"):
        RocksStore(path, TableParams())


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    # A --state given a folder of one's own data by mistake: RocksDB would write among it.
    path = tmp_path / "data"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    with pytest.raises(StateError, match="holds other files and no state"):
        RocksStore(path, TableParams())
    assert [p.name for p in path.iterdir()] == ["notes.txt"]
    (path / "notes.txt").unlink()
    RocksStore(path, TableParams()).close()  # an empty folder is taken
    RocksStore(path, TableParams()).close()  # and then a state's


def test_a_state_another_process_has_open_says_so(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store = RocksStore(path, TableParams())
    try:
        with pytest.raises(StateError, match="a run or worker with the same state has it open"):
            RocksStore(path, TableParams())
    finally:
        store.close()


class _FullDisk:
    """A database whose writes fail as rocksdict's do on a full disk (a plain Exception)."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def write(self, batch: Any) -> None:
        raise Exception("IO error: No space left on device: While appending to file: x/000004.log")

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.write(None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_a_write_that_fails_is_a_state_error_naming_the_state(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "state", TableParams(), cache_hosts=1)
    real = store._db
    store._db = _FullDisk(real)  # type: ignore[assignment]
    try:
        table = HostTable(TableParams())
        table.observe([1, 2, 3])
        store.put("a.example", table)
        with pytest.raises(StateError, match=r"cannot write the state at .*state: IO error: No space left on device"):
            store.flush()
        with pytest.raises(StateError, match="No space left on device"):
            store.put("b.example", table)  # a.example, still dirty, leaves the cache: its write-back fails alike
    finally:
        store._db = real
        store._dirty.clear()
        store.close()
