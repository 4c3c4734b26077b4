"""The worker's RocksDB store (detemplate.stream.store) on real damaged databases, without a broker.

tests/integration/test_faults.py runs the whole story on the broker (damage, restart,
recovery from the changelog); these pin the store's own decisions.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

rocksdict = pytest.importorskip("rocksdict")
pytest.importorskip("faust")

from detemplate.settings import StreamSettings  # noqa: E402  (after the skips)
from detemplate.stream.app import build_app  # noqa: E402
from detemplate.stream.store import CheckedRocksDBStore, is_corruption, verify  # noqa: E402


def store_in(tmp_path: Path) -> CheckedRocksDBStore:
    _, logic = build_app(StreamSettings(data_dir=str(tmp_path), partitions=2, metrics_port=-1))
    store = logic.state.data
    assert isinstance(store, CheckedRocksDBStore)
    return store


def write_db(path: Path, n: int = 3000) -> None:
    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    for i in range(n):
        db.put(b"k%06d" % i, bytes([i % 251]) * 120)
    db.flush()
    db.close()


def garble(path: Path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, end, 7):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def test_a_sound_database_opens_with_its_data_and_is_verified_once(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    path = Path(store.partition_path(0))
    write_db(path)
    db = store._open_for_partition(0)
    assert db.get(b"k000007") is not None
    assert store.verified == {0} and store.quarantined == []
    assert path.exists()


@pytest.mark.parametrize("damage", ["current", "manifest", "sst_cut", "sst_block"])
def test_a_damaged_database_is_moved_aside_and_replaced_by_an_empty_one(tmp_path: Path, damage: str) -> None:
    store = store_in(tmp_path)
    path = Path(store.partition_path(1))
    write_db(path)
    sst = sorted(path.glob("*.sst"))[0]
    if damage == "current":
        (path / "CURRENT").write_bytes(b"\x00garbage")
    elif damage == "manifest":
        manifest = next(path.glob("MANIFEST-*"))
        garble(manifest, 8, manifest.stat().st_size)
    elif damage == "sst_cut":
        os.truncate(sst, sst.stat().st_size // 2)
    else:  # data blocks only: the database still opens, a read of the block fails its checksum
        garble(sst, 64, sst.stat().st_size // 3)
        db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
        assert verify(db) is not None
        db.close()
    db = store._open_for_partition(1)
    assert list(db.keys()) == [], "the new database is empty: Faust recovers it from the changelog"
    [aside] = store.quarantined
    assert aside.name.startswith("hosts-1.db.corrupt-") and aside.is_dir()
    assert (aside / sst.name).exists() or damage == "sst_cut", "the damaged files are kept for a post-mortem"
    assert path.is_dir()


def test_quarantine_of_an_open_database_after_a_failed_read(tmp_path: Path) -> None:
    """What the agent does when a read fails with a corruption error: the open database goes aside."""
    store = store_in(tmp_path)
    path = Path(store.partition_path(0))
    write_db(path)
    store._dbs[0] = store._open_for_partition(0)
    target = store.quarantine(0, "a read failed: Corruption: block checksum mismatch")
    assert target is not None and target.is_dir() and not path.exists()
    assert 0 not in store._dbs and 0 not in store.verified


@pytest.mark.parametrize(
    ("message", "corrupt"),
    [
        ("Corruption: CURRENT file does not end with newline", True),
        ("Corruption: block checksum mismatch: stored = 1, computed = 2 in x/000009.sst", True),
        ("Corruption: Sst file size mismatch: x/000009.sst. Expected 646888, actual size 323444", True),
        ("IO error: No such file or directory: While open a file for random read: x/000009.sst", True),
        ("IO error: No such file or directory: While open a file for random read: /data/blocks/000009.sst", True),
        ("IO error: While lock file: x/LOCK: Resource temporarily unavailable", False),  # Faust retries these
        ("IO error: No space left on device", False),
        ("Invalid argument: x: does not exist (create_if_missing is false)", False),
    ],
)
def test_what_counts_as_corruption(message: str, corrupt: bool) -> None:
    assert is_corruption(Exception(message)) is corrupt


def test_a_scan_taken_a_chunk_at_a_time_reads_every_record_of_its_prefix_once(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    inside = [(b"i/%05d" % n, b"v%d" % n) for n in range(103)]
    store.write(0, [(b"h/a", b"x"), *inside, (b"j/z", b"y")])  # neighbours on both sides of the prefix
    seen: list[tuple[bytes, bytes]] = []
    after = None
    chunks = 0
    while True:
        chunk = store.scan_chunk(0, b"i/", after, 10)
        seen += chunk
        chunks += 1
        if len(chunk) < 10:
            break
        after = chunk[-1][0]
    assert seen == inside and chunks == 11
    assert store.scan_chunk(0, b"i/", None, 1000) == inside
    assert store.scan_chunk(0, b"q/", None, 10) == []


def test_the_next_expiry_sweep_waits_twenty_times_as_long_as_the_last_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import itertools

    from detemplate.stream import app as app_module

    settings = StreamSettings(data_dir=str(tmp_path), partitions=2, metrics_port=-1, host_ttl_pages=100,
                              expiry_sweep_s=1.0)
    _, worker = build_app(settings)
    clock = [1000.0]
    sweeps: list[float] = []

    async def sweep(now_ms: int) -> list[object]:
        sweeps.append(clock[0])
        worker._scan_s = duration[0]  # reading the index entries (what the spacing follows)
        clock[0] += duration[0] + drops[0]  # then dropping what it chose (which it does not)
        return []

    monkeypatch.setattr(app_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(worker, "sweep", sweep)
    worker._last_sweep = clock[0]
    duration, drops = [0.01], [0.0]  # a short sweep: the setting's 1 s apart
    for _ in range(30):
        clock[0] += 0.1
        asyncio.run(worker._maybe_sweep(0))
    assert len(sweeps) == 3 and sweeps[1] - sweeps[0] == pytest.approx(1.0, abs=0.11)
    duration[0], drops[0] = 0.5, 3.0  # half a second of reading, 3 s of drops: 10 s apart from now on
    sweeps.clear()
    for _ in range(400):
        clock[0] += 0.1
        asyncio.run(worker._maybe_sweep(0))
    gaps = [b - a for a, b in itertools.pairwise(sweeps[1:])]  # the first gap follows a short sweep
    assert gaps and all(10.0 <= g <= 10.7 for g in gaps), gaps


def test_each_partition_store_gets_the_block_cache_and_write_buffer_the_settings_give(tmp_path: Path) -> None:
    settings = StreamSettings(data_dir=str(tmp_path), partitions=2, metrics_port=-1, rocksdb_cache_mb=48,
                              rocksdb_write_buffer_mb=8)
    _, logic = build_app(settings)
    store = logic.state.data
    assert isinstance(store, CheckedRocksDBStore)
    assert store.rocksdb_options.block_cache_size == 48 * 1024 * 1024
    assert store.rocksdb_options.write_buffer_size == 8 * 1024 * 1024
    db = store._open_for_partition(0)  # opens with those options
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    default = StreamSettings(data_dir=str(tmp_path / "d"), partitions=2, metrics_port=-1)
    options = build_app(default)[1].state.data.rocksdb_options
    assert options.block_cache_size == 64 * 1024 * 1024
    assert options.write_buffer_size == default.rocksdb_write_buffer_mb * 1024 * 1024


def test_a_sweep_drops_no_host_of_a_partition_revoked_while_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep gives the event loop turns; a rebalance then may take a partition away, and
    its hosts are another worker's: their tombstones must not be written."""
    import asyncio

    from detemplate.state.changelog import index_key
    from detemplate.state.expiry import IndexEntry
    from faust.types import TP

    settings = StreamSettings(data_dir=str(tmp_path), partitions=2, metrics_port=-1, state_budget_bytes=1)
    _, worker = build_app(settings)
    store = worker.state.data
    for partition in (0, 1):
        store.write(partition, [(index_key(f"h{partition}-{n}.example"),
                                 IndexEntry(f"h{partition}-{n}.example", n, 1000 + n, 500, 1).to_bytes())
                                for n in range(600)])
    tps = {TP(settings.topic_raw, 0), TP(settings.topic_raw, 1)}
    assignment = set(tps)
    monkeypatch.setattr(worker.app.consumer, "assignment", lambda: set(assignment))
    monkeypatch.setattr(worker.app.monitor, "tp_committed_offsets", {tp: 10_000 for tp in tps})
    dropped: list[tuple[int, str]] = []

    async def drop(partition: int, x: object) -> None:
        dropped.append((partition, x.entry.host))  # type: ignore[attr-defined]
        if len(dropped) == 100:
            assignment.discard(TP(settings.topic_raw, 1))  # revoked while the sweep runs

    monkeypatch.setattr(worker, "_drop_host", drop)
    out = asyncio.run(worker.sweep(10_000))
    assert len(dropped) > 100 and len(out) == len(dropped)  # the budget wants nearly every host out
    late = [host for partition, host in dropped[100:] if partition == 1]
    assert not late, late[:3]
    assert {partition for partition, _ in dropped[100:]} == {0}


def _on_disk(store: CheckedRocksDBStore, partition: int, key: bytes) -> bytes | None:
    """A record as the partition's database holds it, past the store's own methods."""
    value = store._db_for_partition(partition).get(key)
    return None if value is None else bytes(value)


def test_state_records_are_gathered_and_written_before_anything_reads_or_moves_past_them(tmp_path: Path) -> None:
    from faust.types import TP

    store = store_in(tmp_path)
    store.write(0, [(b"t/a\x00d1", b"one"), (b"t/a\x00d2", b"two")])
    store.write(1, [(b"t/b\x00d1", b"uno")])
    store.write(0, [(b"t/a\x00d1", None)])  # a later tombstone of the same key, in order
    assert _on_disk(store, 0, b"t/a\x00d2") is None  # gathered, not written yet
    # A read of a partition writes its records first (and only its own).
    assert store.scan(0, b"t/a\x00") == {b"t/a\x00d2": b"two"}
    assert _on_disk(store, 1, b"t/b\x00d1") is None
    assert store.get_record(1, b"t/b\x00d1") == b"uno"
    # A persisted changelog offset never passes a record the database does not hold.
    store.write(1, [(b"t/b\x00d2", b"dos")])
    tp = TP(store.table.changelog_topic.get_topic_name(), 1)
    store.set_persisted_offset(tp, 41)
    assert _on_disk(store, 1, b"t/b\x00d2") == b"dos" and store.persisted_offset(tp) == 41
    # A revoked partition's records are written before Faust lets go of its database.
    store.write(0, [(b"t/a\x00d3", b"three")])
    path0 = store.partition_path(0)
    store.revoke_partitions(store.table, {TP(store.table.changelog_topic.get_topic_name(), 0)})
    db = rocksdict.Rdict(str(path0), options=rocksdict.Options(raw_mode=True))
    try:
        assert db.get(b"t/a\x00d3") == b"three" and db.get(b"t/a\x00d1") is None
    finally:
        db.close()
    # The end of a fetch writes what is left.
    store.write(1, [(b"t/b\x00d3", b"tres")])
    store.flush()
    assert _on_disk(store, 1, b"t/b\x00d3") == b"tres" and not store._pending


def test_a_failed_write_keeps_the_records_and_the_persisted_offset_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faust.types import TP

    store = store_in(tmp_path)
    tp = TP(store.table.changelog_topic.get_topic_name(), 0)
    store.set_persisted_offset(tp, 7)
    store.write(0, [(b"t/a\x00d1", b"one")])
    db = store._db_for_partition(0)

    class Full:  # the partition's database, its disk full
        def write(self, batch: object) -> None:
            raise OSError("IO error: No space left on device")

    monkeypatch.setitem(store._dbs, 0, Full())
    with pytest.raises(OSError, match="No space"):
        store.set_persisted_offset(tp, 8)
    monkeypatch.setitem(store._dbs, 0, db)
    assert store.persisted_offset(tp) == 7 and store._pending == {0: [(b"t/a\x00d1", b"one")]}
    store.set_persisted_offset(tp, 8)  # the disk has room again
    assert _on_disk(store, 0, b"t/a\x00d1") == b"one" and store.persisted_offset(tp) == 8
