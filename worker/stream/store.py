"""The worker's RocksDB table store: Faust's, plus what to do with a corrupt partition database.

Faust keeps each partition of a table in its own RocksDB directory
(`<data dir>/.../tables/hosts-<partition>.db`). When one of them is corrupt (a garbled or
truncated SST file, MANIFEST or CURRENT), rocksdict raises on open, and Faust's store
treats every open error other than a held lock as fatal: the worker stops, and stops
again at every restart, until someone deletes the directory by hand. Corruption inside
an SST block does not even fail the open; a read of that block raises later, and an
iteration just ends early.

This store adds, for each partition database the process opens for the first time:

- an open that fails with a corruption error (or a missing file the MANIFEST names),
- or a full pass over the database that checks every block's checksum and fails,

moves the directory aside to `<name>.corrupt-<UTC timestamp>` (kept for a post-mortem;
nothing reads it again), logs it at ERROR, and opens a new empty database in its place.
An empty database has no persisted changelog offset, so Faust's recovery reads that
partition's whole changelog into it, as on a worker with an empty data directory: the
state comes back as it was, and nothing else changes. A read that fails with a
corruption error later, while pages flow, is handled by the worker the same way
(`quarantine`, then exit 70 before any commit; the restart recovers the partition).

The checksum pass costs one sequential read of the partition's database per process
(measured in docs/stream.md); the state per host is bounded, so it stays small.

The worker's own state records (`write`) are gathered per partition and written in one
batch when something is about to read that partition's database (`scan`, `get_record`, ...),
before a persisted changelog offset is set (so it never passes a record the database does
not hold: a crash loses only records the changelog still has after that offset, and Faust's
recovery reads them back), before a partition is revoked or the store stops, and at the end
of each fetch's pages (`flush`). A write a page cost the worker more than its own time: the
database's code between two pages left the engine's data out of the caches (docs/stream.md).
"""

from __future__ import annotations

import logging
import os
import time
from itertools import islice
from pathlib import Path
from typing import Any

from faust import stores
from faust.stores.rocksdb import Store as FaustRocksDBStore

logger = logging.getLogger(__name__)

SCHEME = "detemplate-rocksdb"


def store_url(table_name: str) -> str:
    """The store URL of a table: ``detemplate-rocksdb:<table>`` (Faust ignores a table's own
    ``store`` when its URL has no path, and falls back to the app's), the same directory names
    as ``rocksdb://``."""
    return f"{SCHEME}:{table_name}"


def is_corruption(exc: BaseException) -> bool:
    """Whether a RocksDB error says the database files are damaged (not locked, not a full disk)."""
    text = str(exc)
    if "Corruption" in text:
        return True
    if "While lock file" in text or "/LOCK:" in text:
        return False  # another process (or this one's previous assignment) holds it: Faust retries
    # A file the MANIFEST names is gone (an SST or log file deleted under the database).
    return "IO error" in text and "No such file or directory" in text


def verify(db: Any) -> str | None:
    """Read every block of an open database with checksums on; the error, or None when all is sound."""
    import rocksdict

    options = rocksdict.ReadOptions()
    options.set_verify_checksums(True)
    options.fill_cache(False)  # type: ignore[call-arg]  # the stub lacks the argument the binding takes
    it = db.iter(options)
    it.seek_to_first()
    while it.valid():
        it.next()
    try:
        it.status()  # an iterator that met a bad block just stops being valid; its status says why
    except Exception as exc:
        return str(exc)
    return None


def move_aside(path: Path) -> Path:
    """Rename a partition database directory to `<name>.corrupt-<UTC timestamp>`; the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    return target


class CheckedRocksDBStore(FaustRocksDBStore):
    """Faust's rocksdb:// store; a corrupt partition database is moved aside and rebuilt from the changelog."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verified: set[int] = set()  # partitions checked by this process
        self.quarantined: list[Path] = []
        self._pending: dict[int, list[tuple[bytes, bytes | None]]] = {}  # partition -> records not written yet

    def _open_for_partition(self, partition: int) -> Any:
        path = Path(self.partition_path(partition))
        try:
            db = super()._open_for_partition(partition)
        except Exception as exc:
            if not is_corruption(exc):
                raise  # a held lock is retried by Faust; anything else stays fatal
            self.quarantine(partition, f"it does not open: {exc}")
            return super()._open_for_partition(partition)
        if partition in self.verified:
            return db
        t0 = time.perf_counter()
        problem = verify(db)
        if problem is not None:
            db.close()
            self.quarantine(partition, f"a block fails its checksum: {problem}")
            db = super()._open_for_partition(partition)
        else:
            logger.info("state store partition=%d verified in %.3f s (%s)", partition, time.perf_counter() - t0, path)
        self.verified.add(partition)
        return db

    def scan(self, partition: int, prefix: bytes) -> dict[bytes, bytes]:
        """Every record of a partition's database whose key starts with `prefix` (one range scan)."""
        from ..state.rocks import scan_prefix

        self.flush(partition)
        return scan_prefix(self._db_for_partition(partition), prefix)

    def scan_chunk(self, partition: int, prefix: bytes, after: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to `limit` records of a partition's database whose key starts with `prefix`, in key
        order, from the first key after `after` (None: from the start): a scan taken a chunk at
        a time, each with an iterator of its own, so that a caller can give the event loop a turn
        between chunks without holding an iterator across it."""
        from ..state.rocks import iter_prefix

        self.flush(partition)
        return list(islice(iter_prefix(self._db_for_partition(partition), prefix, after), limit))

    def keys_with_prefix(self, partition: int, prefix: bytes) -> list[bytes]:
        """The keys of a partition's database that start with `prefix`."""
        self.flush(partition)
        db = self._db_for_partition(partition)
        out = []
        for key in db.keys(from_key=prefix):
            if not key.startswith(prefix):
                break
            out.append(bytes(key))
        return out

    def get_record(self, partition: int, key: bytes) -> bytes | None:
        """One record of a partition's database."""
        self.flush(partition)
        value = self._db_for_partition(partition).get(key)
        return None if value is None else bytes(value)

    def write(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Put (or, for None, delete) records in a partition's database, in order: gathered,
        and written in one batch by the next `flush` of the partition (see the module)."""
        pending = self._pending.get(partition)
        if pending is None:
            self._pending[partition] = list(records)
        else:
            pending.extend(records)

    def flush(self, partition: int | None = None) -> None:
        """Write the records gathered for a partition (None: for every partition), in one batch each."""
        if not self._pending:
            return
        import rocksdict

        for p in list(self._pending) if partition is None else [partition]:
            records = self._pending.get(p)
            if not records:
                continue
            batch = rocksdict.WriteBatch(raw_mode=True)
            for key, value in records:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            self._db_for_partition(p).write(batch)
            del self._pending[p]  # only once written: a write that fails keeps them, and raises

    def set_persisted_offset(self, tp: Any, offset: int) -> None:
        """Faust's, after the partition's gathered records are written: the offset never passes
        a record the database does not hold."""
        self.flush(tp.partition)
        super().set_persisted_offset(tp, offset)

    def apply_changelog_batch(self, *args: Any, **kwargs: Any) -> None:
        """Faust's recovery writes; any records gathered before it first (there are none once a
        partition was revoked: revoking writes them)."""
        self.flush()
        super().apply_changelog_batch(*args, **kwargs)

    def revoke_partitions(self, table: Any, tps: Any) -> None:
        for tp in tps:
            if tp.topic in table.changelog_topic.topics:
                self.flush(tp.partition)
        super().revoke_partitions(table, tps)

    async def stop(self) -> None:
        self.flush()
        await super().stop()

    def quarantine(self, partition: int, why: str) -> Path | None:
        """Move a partition's database aside and log it; it is rebuilt from the changelog when next opened."""
        self._pending.pop(partition, None)  # records of the damaged database: the changelog has them
        path = Path(self.partition_path(partition))
        db = self._dbs.pop(partition, None)
        if db is not None:
            try:
                db.close()
            except Exception:  # closing a damaged database may fail too; the rename is what matters
                logger.debug("closing the corrupt database of partition %d failed", partition, exc_info=True)
        if not path.exists():
            return None
        target = move_aside(path)
        self.quarantined.append(target)
        self.verified.discard(partition)
        changelog = self.table.changelog_topic.get_topic_name()
        logger.error(
            "state store CORRUPT: partition=%d %s; moved %s aside to %s, the partition is rebuilt from the "
            "changelog %s", partition, why.replace("\n", " "), path, target.name, changelog,
        )
        return target


stores.STORES.aliases.setdefault(SCHEME, f"{__name__}:CheckedRocksDBStore")
