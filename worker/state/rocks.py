"""A SegmentStore in a local RocksDB directory (rocksdict): many hosts in one database.

Layout (raw bytes, no pickling):
    b"meta/format"        -> b"1"
    b"t/" + host (UTF-8)  -> HostTable.to_bytes()

Tables in use are kept live in an LRU cache of `cache_hosts` hosts; a changed table is
written back when it leaves the cache and on `flush`, in one WriteBatch. A crawl
interleaves hosts, so this keeps the per-page cost at a dict lookup, not a
deserialisation, while memory stays bounded by the cache size.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

from ..engine.errors import ConfigError, StateError
from ..engine.params import TableParams
from ..engine.table import HostTable

logger = logging.getLogger(__name__)

_FORMAT_KEY = b"meta/format"
_FORMAT = b"1"
_TABLE_PREFIX = b"t/"


class RocksStore:
    """Per-host tables in RocksDB with a write-back LRU cache of live tables."""

    def __init__(self, path: str | Path, params: TableParams, cache_hosts: int = 4096) -> None:
        if cache_hosts < 1:
            raise ConfigError(f"cache_hosts must be at least 1, not {cache_hosts}")
        self.path = Path(path)
        self.params = params
        self.cache_hosts = cache_hosts
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create the state folder {self.path}: {exc}") from exc
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            self._db = Rdict(str(self.path), options)
        except Exception as exc:  # rocksdict raises plain Exception for I/O and corruption
            raise StateError(f"cannot open RocksDB state at {self.path}: {exc}") from exc
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

    def get(self, host: str) -> HostTable | None:
        table = self._cache.get(host)
        if table is not None:
            self._cache.move_to_end(host)
            return table
        try:
            data = self._db.get(_TABLE_PREFIX + host.encode())
        except Exception as exc:  # rocksdict: plain Exception, e.g. "Corruption: block checksum mismatch"
            raise StateError(f"cannot read the table of host {host!r} from {self.path}: {exc}") from exc
        if data is None:
            return None
        try:
            table = HostTable.from_bytes(data, self.params)
        except StateError as exc:
            raise StateError(f"corrupt table of host {host!r} in {self.path}: {exc}") from exc
        self._remember(host, table)
        return table

    def put(self, host: str, table: HostTable) -> None:
        if self._cache.get(host) is not table:
            self._remember(host, table)
        self._dirty.add(host)

    def _remember(self, host: str, table: HostTable) -> None:
        self._cache[host] = table
        self._cache.move_to_end(host)
        if len(self._cache) > self.cache_hosts:
            old, old_table = self._cache.popitem(last=False)
            if old in self._dirty:
                self._dirty.discard(old)
                self._db[_TABLE_PREFIX + old.encode()] = old_table.to_bytes()

    def hosts(self) -> Iterator[str]:
        seen = set(self._cache)
        yield from seen
        try:
            for key in self._db.keys(from_key=_TABLE_PREFIX):
                # raw_mode: every key is bytes (rocksdict's stubs type keys as any value).
                assert isinstance(key, bytes)
                if not key.startswith(_TABLE_PREFIX):
                    break
                host = key[len(_TABLE_PREFIX) :].decode()
                if host not in seen:
                    yield host
        except Exception as exc:  # rocksdict: plain Exception on a corrupt database
            raise StateError(f"cannot list the hosts in {self.path}: {exc}") from exc

    def flush(self) -> None:
        if not self._dirty:
            return
        batch = WriteBatch(raw_mode=True)
        for host in self._dirty:
            batch.put(_TABLE_PREFIX + host.encode(), self._cache[host].to_bytes())
        self._db.write(batch)
        self._dirty.clear()

    def close(self) -> None:
        self.flush()
        self._db.close()

    def disk_bytes(self) -> int:
        """Bytes of the database directory on disk."""
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
