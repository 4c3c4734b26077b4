"""A SegmentStore in a local RocksDB directory (rocksdict): many hosts in one database.

Layout (raw bytes, no pickling):
    b"meta/format"        -> b"1"
    b"meta/clock"         -> pages the state has taken, across runs (ASCII digits)
    b"t/" + host (UTF-8)  -> HostTable.to_bytes()
    b"i/" + host (UTF-8)  -> the host's index entry (state/expiry.py IndexEntry): the clock and
                             time of its last page, its bytes; what whole-host expiry reads

Tables in use are kept live in an LRU cache of `cache_hosts` hosts; a changed table is
written back when it leaves the cache and on `flush`, in one WriteBatch. A crawl
interleaves hosts, so this keeps the per-page cost at a dict lookup, not a
deserialisation, while memory stays bounded by the cache size.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rocksdict import AccessType, Options, Rdict, WriteBatch

from ..engine.errors import ConfigError, StateError
from ..engine.model import TemplateEvent
from ..engine.params import TableParams
from ..engine.table import HostTable
from .expiry import ExpiryPolicy, IndexEntry, Ledger, choose_expired

logger = logging.getLogger(__name__)

_FORMAT_KEY = b"meta/format"
_FORMAT = b"1"
_TABLE_PREFIX = b"t/"
_INDEX_PREFIX = b"i/"
_CLOCK_KEY = b"meta/clock"
_DROPPED_PREFIX = b"x/"  # a job's store of `run --jobs`: the run's state's hosts it dropped
_COPY_BATCH = 10_000

_F = TypeVar("_F", bound=Callable[..., Any])


def _writes(method: _F) -> _F:
    """A RocksStore method that writes: rocksdict's plain Exception becomes a StateError that
    names the state (the disk full, say), which a run tells in a line rather than a traceback."""

    @functools.wraps(method)
    def wrapper(self: RocksStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            if type(exc) is not Exception:  # ours, or a bug: as it is
                raise
            raise StateError(f"cannot write the state at {self.path}: {exc}") from exc

    return wrapper  # type: ignore[return-value]  # the same signature


def _key(prefix: bytes, host: str) -> bytes:
    # surrogatepass: a host is whatever the input said; a lone surrogate must not stop the run.
    return prefix + host.encode("utf-8", "surrogatepass")


def iter_prefix(db: Rdict, prefix: bytes, after: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
    """The records of a raw-mode database whose key starts with `prefix`, in key order (one
    range scan); with `after`, from the first key past it."""
    for key, value in db.items(from_key=prefix if after is None else after):
        # raw_mode: keys and values are bytes (rocksdict's stubs type them as any value).
        assert isinstance(key, bytes) and isinstance(value, bytes)
        if not key.startswith(prefix):
            return
        if key != after:
            yield key, value


def scan_prefix(db: Rdict, prefix: bytes) -> dict[bytes, bytes]:
    """Every record of a raw-mode database whose key starts with `prefix` (one range scan)."""
    return dict(iter_prefix(db, prefix))


def read_index(db: Rdict) -> list[IndexEntry]:
    """Every host's index entry in a state database."""
    out = []
    for key, value in iter_prefix(db, _INDEX_PREFIX):
        host = key[len(_INDEX_PREFIX) :].decode("utf-8", "surrogatepass")
        out.append(IndexEntry.from_bytes(host, value))
    return out


def read_clock(db: Rdict) -> int:
    """A state database's page clock (state/expiry.py Ledger; 0 in a new one)."""
    clock = db.get(_CLOCK_KEY)
    return int(clock) if isinstance(clock, bytes) else 0


def read_table(db: Rdict, path: Path | str, host: str, params: TableParams) -> HostTable | None:
    """HOST's table in a state database (None: the state has none)."""
    try:
        data = db.get(_key(_TABLE_PREFIX, host))
    except Exception as exc:  # rocksdict: plain Exception, e.g. "Corruption: block checksum mismatch"
        raise StateError(f"cannot read the table of host {host!r} from {path}: {exc}") from exc
    if data is None:
        return None
    try:
        return HostTable.from_bytes(data, params)
    except StateError as exc:
        raise StateError(f"corrupt table of host {host!r} in {path}: {exc}") from exc


class ReadOnlyTables:
    """The host tables of a RocksStore's state directory, opened read-only (several processes
    may read it at once: `run --jobs`)."""

    def __init__(self, path: str | Path, params: TableParams) -> None:
        self.path = Path(path)
        self.params = params
        try:
            self._db = Rdict(str(self.path), Options(raw_mode=True), access_type=AccessType.read_only())
            fmt = self._db.get(_FORMAT_KEY)
        except Exception as exc:  # rocksdict raises plain Exception for I/O and corruption
            raise StateError(f"cannot open RocksDB state at {self.path} read-only: {exc}") from exc
        if fmt not in (None, _FORMAT):
            raise StateError(f"state at {self.path} has format {fmt!r}, this version reads {_FORMAT!r}")

    def get(self, host: str) -> HostTable | None:
        return read_table(self._db, self.path, host, self.params)

    def holds(self, host: str) -> bool:
        """Whether the state has a table for `host`."""
        return self._db.get(_key(_TABLE_PREFIX, host)) is not None

    def clock(self) -> int:
        """The state's page clock (state/expiry.py Ledger)."""
        return read_clock(self._db)

    def index(self) -> list[IndexEntry]:
        """Every host's index entry."""
        return read_index(self._db)

    def close(self) -> None:
        self._db.close()


# What a folder RocksDB has written holds, by name (a damaged one too, which RocksDB then
# tells as corrupt): a folder with files but none of these is someone else's.
_ROCKSDB_NAMES = ("CURRENT", "IDENTITY", "LOCK", "LOG", "MANIFEST-", "OPTIONS-")


class RocksStore:
    """Per-host tables in RocksDB with a write-back LRU cache of live tables.

    policy: whole-host expiry and the table bound (state/expiry.py); `expire` applies it.
    """

    def __init__(
        self, path: str | Path, params: TableParams, cache_hosts: int = 4096, policy: ExpiryPolicy | None = None
    ) -> None:
        if cache_hosts < 1:
            raise ConfigError(f"cache_hosts must be at least 1, not {cache_hosts}")
        self.path = Path(path)
        self.params = params
        self.cache_hosts = cache_hosts
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            names = [entry.name for entry in self.path.iterdir()]
            foreign = bool(names) and not any(name.startswith(_ROCKSDB_NAMES) for name in names)
        except OSError as exc:
            raise StateError(f"cannot create the state folder {self.path}: {exc}") from exc
        if foreign:  # RocksDB would write its files among someone else's
            raise StateError(
                f"the state folder {self.path} holds other files and no state: give a new or empty folder, "
                "or the --state of an earlier run"
            )
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            self._db = Rdict(str(self.path), options)
        except Exception as exc:  # rocksdict raises plain Exception for I/O and corruption
            held = " (a run or worker with the same state has it open)" if "lock" in str(exc).lower() else ""
            raise StateError(f"cannot open RocksDB state at {self.path}: {exc}{held}") from exc
        try:
            fmt = self._db.get(_FORMAT_KEY)
        except Exception as exc:  # corruption is often found on the first read, not on open
            self._db.close()
            raise StateError(f"cannot read RocksDB state at {self.path}: {exc}") from exc
        if fmt is None:
            self._db[_FORMAT_KEY] = _FORMAT
        elif fmt != _FORMAT:
            raise StateError(f"state at {self.path} has format {fmt!r}, this version reads {_FORMAT!r}")
        self._cache: OrderedDict[str, HostTable] = OrderedDict()
        self._dirty: set[str] = set()
        self.ledger = Ledger(policy or ExpiryPolicy(), read_clock(self._db))
        self._clock_written = self.ledger.clock

    def get(self, host: str) -> HostTable | None:
        table = self._cache.get(host)
        if table is not None:
            self._cache.move_to_end(host)
            return table
        table = read_table(self._db, self.path, host, self.params)
        if table is not None:
            self._remember(host, table)
        return table

    def put(self, host: str, table: HostTable) -> None:
        if self._cache.get(host) is not table:
            self._remember(host, table)
        self._dirty.add(host)
        self.ledger.seen(host, table, int(time.time() * 1000))

    def _records(self, host: str, table: HostTable) -> list[tuple[bytes, bytes]]:
        """A dirty host's table and index entry, to write back."""
        data = table.to_bytes()
        key = _key(_TABLE_PREFIX, host)
        out = [(key, data)]
        seen = self.ledger.last_seen.pop(host, None)
        if seen is not None:
            index = _key(_INDEX_PREFIX, host)
            entry = IndexEntry(host, seen[0], seen[1], len(key) + len(data) + len(index) + 36, table.pages)
            out.append((index, entry.to_bytes()))
        return out

    def _remember(self, host: str, table: HostTable) -> None:
        self._cache[host] = table
        self._cache.move_to_end(host)
        if len(self._cache) > self.cache_hosts:
            old, old_table = self._cache.popitem(last=False)
            if old in self._dirty:
                self._dirty.discard(old)
                self._write_back(old, old_table)

    @_writes
    def _write_back(self, host: str, table: HostTable) -> None:
        """A dirty table leaving the cache, written."""
        for key, value in self._records(host, table):
            self._db[key] = value

    def hosts(self) -> Iterator[str]:
        seen = set(self._cache)
        yield from seen
        try:
            for key in self._db.keys(from_key=_TABLE_PREFIX):
                # raw_mode: every key is bytes (rocksdict's stubs type keys as any value).
                assert isinstance(key, bytes)
                if not key.startswith(_TABLE_PREFIX):
                    break
                host = key[len(_TABLE_PREFIX) :].decode("utf-8", "surrogatepass")
                if host not in seen:
                    yield host
        except Exception as exc:  # rocksdict: plain Exception on a corrupt database
            raise StateError(f"cannot list the hosts in {self.path}: {exc}") from exc

    @_writes
    def flush(self) -> None:
        if not self._dirty:
            if self.ledger.clock != self._clock_written:
                self._db[_CLOCK_KEY] = str(self.ledger.clock).encode()
                self._clock_written = self.ledger.clock
            return
        batch = WriteBatch(raw_mode=True)
        for host in self._dirty:
            for key, value in self._records(host, self._cache[host]):
                batch.put(key, value)
        batch.put(_CLOCK_KEY, str(self.ledger.clock).encode())
        self._db.write(batch)
        self._dirty.clear()
        self._clock_written = self.ledger.clock

    def index(self) -> list[IndexEntry]:
        """Every host's index entry (a scan of the state; hosts written before index entries existed have none)."""
        return read_index(self._db)

    def advance(self, records: int) -> None:
        """The run has read `records` records of its input (the page clock: state/expiry.py Ledger)."""
        self.ledger.advance(records)

    @_writes
    def expire(
        self, now_ms: int | None = None, force: bool = False,
        others: Callable[[set[str]], list[IndexEntry]] | None = None,
    ) -> list[str]:
        """Drop the hosts the policy picks (when a sweep is due, or `force`); their events follow.
        The hosts dropped. `others`: given the hosts this store holds, the index entries of hosts
        it stands for that another state holds (a job of `run --jobs`: the run's state's hosts
        it has not loaded), weighed with its own."""
        ledger = self.ledger
        if not ledger.policy.expires or not (force or ledger.due()):
            return []
        self.flush()
        entries = self.index()
        if others is not None:
            entries += others({e.host for e in entries})
        now = int(time.time() * 1000) if now_ms is None else now_ms
        expired = choose_expired(entries, ledger.policy, now, ledger.clock)
        if expired:
            batch = WriteBatch(raw_mode=True)
            for x in expired:
                host = x.entry.host
                batch.delete(_key(_TABLE_PREFIX, host))
                batch.delete(_key(_INDEX_PREFIX, host))
                self._cache.pop(host, None)
            self._db.write(batch)
        ledger.swept(len(entries) - len(expired), expired)
        return [x.entry.host for x in expired]

    # -- a job's store of `run --jobs` and the run's state it goes back into -------------------

    @_writes
    def drop(self, host: str) -> None:
        """Mark a host of the run's state as dropped by this job's expiry (the parent deletes it
        there: `take_from`)."""
        self._db[_key(_DROPPED_PREFIX, host)] = b""

    @_writes
    def take_from(self, other: RocksStore) -> None:
        """A job's hosts into this state: the hosts it dropped deleted, then its tables and
        index entries copied as they are (when each host was last seen, in the run's clock)."""
        self.flush()
        self._cache.clear()  # nothing dirty after the flush: a host is read back from the copy
        batch = WriteBatch(raw_mode=True)
        for key, _ in iter_prefix(other._db, _DROPPED_PREFIX):
            host = key[len(_DROPPED_PREFIX) :]
            batch.delete(_TABLE_PREFIX + host)
            batch.delete(_INDEX_PREFIX + host)
        self._db.write(batch)
        for prefix in (_TABLE_PREFIX, _INDEX_PREFIX):
            batch = WriteBatch(raw_mode=True)
            for n, (key, value) in enumerate(iter_prefix(other._db, prefix), 1):
                batch.put(key, value)
                if n % _COPY_BATCH == 0:  # a batch at a time, not a job's whole state in memory
                    self._db.write(batch)
                    batch = WriteBatch(raw_mode=True)
            self._db.write(batch)

    def set_clock(self, clock: int) -> None:
        """The state's page clock (after `run --jobs`: its clock before the run plus the run's records)."""
        self.ledger.clock = clock
        self.flush()

    def take_events(self) -> list[TemplateEvent]:
        """Events of the state itself (a bounded table, an expired host) since the last call."""
        return self.ledger.take_events()

    @_writes
    def close(self) -> None:
        self.flush()
        self._db.close()

    def disk_bytes(self) -> int:
        """Bytes of the database directory on disk."""
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
