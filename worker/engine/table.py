"""The per-host text segment table (Wang et al., WWW 2008), pure Python over plain data.

For each segment key the table keeps its document frequency (DF: on how many of the
host's pages it was seen) and the number of the host's page on which it was last seen.
The host's own page counter is the clock. A page goes through: expansion (DF + 1 for
every distinct segment on it), detection (by the caller, from the returned DFs) and
shrinkage (segments not seen for t(df) pages are dropped, t logistic in df).

The table also holds tagged keys, in the same key space: the host's pagelet keys
(detemplate.engine.detectors.pagelets) and, with clusters.statistics, each segment key counted again
under the page's template cluster (detectors/clusters.py cluster_keys). They are 64-bit values
whose low TAG_BITS bits are TAG, so they share the DF, the expiry, the serialisation and
the stream's per-page deltas, while `template_count` and the template events count
segment keys only. (A segment key ends in the tag with odds of 2^-20; such a key would
be left out of those counts.)

`clusters` is the host's template-cluster assigner (detemplate.engine.detectors.clusters.HostClusters):
kept with the table so that one value per host holds the host's whole state. It is
stored as its bytes after the entries, and parsed by the pipeline on first use (None
before the host's first page with clusters on).

Expiry costs O(expired) per page, never a scan of the table: a timing wheel maps a
page number to the keys that may expire there. Each key is in the wheel exactly once,
at a page no later than its true expiry (seeing a key again only moves its expiry
later), so a popped key is either dead (deleted) or rescheduled at its true expiry.
The wheel is derived state: it is rebuilt from the entries on load, and deletions
happen on exactly the same pages either way, so a restored table behaves identically.

Where the compiled extension is in use, the entries and the wheel are its `Entries`
(page/_walk.pyx): the same entries in the same order in C arrays, the wheel a heap, about 40
to 70 bytes an entry in memory against 105 to 205 in the dicts' Python objects (measured:
docs/measurements.md, "A host table's entries in C" and "Soak"), and a table loaded
or saved with one copy of its columns. `observe_python` and the dicts are the reference (a table made
with `python=True`), and the compiled entries are used only after they gave the reference's
DFs, counters and bytes on a probe sequence of pages (`entries_kernel`).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import Any

from .errors import StateError
from .keys import TAG, TAG_MASK
from .model import Block, Segment
from .page import compiled
from .params import LIFETIMES, EventParams, TableParams

# On disk and on the wire (RocksDB values, changelog snapshots):
#   header  = magic "DTT1", then little-endian fields below
#   entries = n x u64 key, then n x u32 df, then n x u32 last_seen (column-wise arrays)
#   then, optionally, the template-cluster state (HostClusters.to_bytes, magic "DTC1")
_MAGIC = b"DTT1"
_HEADER = struct.Struct("<4sQqQQQQQQ")  # magic, pages, source_offset, template_count,
#                                         learned_page, size_at_event, added, removed, n
_DF_SHIFT = 32
_LAST_MASK = (1 << 32) - 1
CLUSTERS_MAGIC = b"DTC1"  # the cluster section: detemplate.engine.detectors.clusters.HostClusters.to_bytes


class HostTable:
    """One host's segment table. Not thread-safe; one owner at a time."""

    __slots__ = (
        "_entries",
        "_life",
        "_wheel",
        "added_since_event",
        "clusters",
        "learned_page",
        "pages",
        "params",
        "removed_since_event",
        "size_at_event",
        "source_offset",
        "template_count",
    )

    def __init__(self, params: TableParams, python: bool = False) -> None:
        """`python`: keep the entries in dicts (the reference) even where the compiled
        `Entries` are in use."""
        self.params = params
        self.pages = 0  # pages observed so far; the current page's number after observe()
        self.source_offset = -1  # last input offset applied (set by the stream shell)
        self.template_count = 0  # segment entries (not pagelet keys) with df >= template_df
        self.learned_page = 0  # page of the template.learned event; 0 before it
        self.size_at_event = 0  # template_count at the last event
        self.added_since_event = 0  # entries that became template since the last event
        self.removed_since_event = 0  # template entries that expired since the last event
        # key -> df << 32 | last_seen: one int per entry keeps the table compact; in C (with
        # the wheel) where the extension is in use, else a dict, and the wheel a dict of lists.
        kernel = None if python else entries_kernel()
        self._entries: Any = {} if kernel is None else kernel.Entries()
        self._wheel: dict[int, list[int]] | None = {} if kernel is None else None
        self._life = params.lifetimes()  # shared, never changed
        # The host's template clusters: None, their bytes (as loaded) or a HostClusters.
        self.clusters: Any = None

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: int) -> bool:
        """Whether the table holds a key (seen on a page it still remembers)."""
        return key in self._entries

    def new_chars(self, blocks: Sequence[Block]) -> list[int]:
        """Each block's characters in segments whose key the table does not hold (new to it)."""
        entries = self._entries
        if self._wheel is None:
            return entries.new_chars(blocks)  # type: ignore[no-any-return]  # the compiled Entries'
        return [sum([seg[2] for seg in block[1] if seg[0] not in entries]) for block in blocks]

    def lifetime(self, df: int) -> int:
        life = self._life
        return life[df] if df < LIFETIMES else life[-1]

    def df(self, key: int) -> int:
        """Current DF of a key (0 when absent)."""
        if self._wheel is None:
            return self._entries.df(key, _DF_SHIFT)  # type: ignore[no-any-return]
        return self._entries.get(key, 0) >> _DF_SHIFT  # type: ignore[no-any-return]

    def observe(self, keys: Sequence[int]) -> list[int]:
        """Add one page's distinct segment keys; return each key's DF including this page.

        Expands the table with the page, then shrinks it by the keys that expire now.
        The loop is compiled (page/_walk.pyx `Entries.observe`) where the entries are the
        extension's, else `observe_python` runs it: the same steps on dicts.
        """
        if self._wheel is not None:
            return self.observe_python(keys)
        self.pages = page = self.pages + 1
        dfs, added, removed = self._entries.observe(
            self._life, page, keys, self.params.template_df, _DF_SHIFT, TAG_MASK, TAG
        )
        self.template_count += added - removed
        self.added_since_event += added
        self.removed_since_event += removed
        return dfs  # type: ignore[no-any-return]  # a list of ints from the extension

    def observe_python(self, keys: Sequence[int]) -> list[int]:
        """`observe` in Python, on a table whose entries are dicts: the reference for the
        compiled loop."""
        wheel = self._wheel
        if wheel is None:
            raise TypeError("observe_python needs a table made with python=True")
        self.pages = page = self.pages + 1
        entries = self._entries
        life = self._life
        last_life = life[-1]
        threshold = self.params.template_df
        dfs: list[int] = []
        append = dfs.append
        for key in keys:
            packed = entries.get(key)
            if packed is None:
                df = 1
                # Schedule a new key once, at its expiry; later sightings only delay it.
                due = page + life[1] + 1
                bucket = wheel.get(due)
                if bucket is None:
                    wheel[due] = [key]
                else:
                    bucket.append(key)
            else:
                df = (packed >> _DF_SHIFT) + 1
            entries[key] = (df << _DF_SHIFT) | page
            if df == threshold and key & TAG_MASK != TAG:
                self.template_count += 1
                self.added_since_event += 1
            append(df)
        due_keys = wheel.pop(page, None)
        if due_keys:
            for key in due_keys:
                packed = entries.get(key)
                if packed is None:
                    continue
                df = packed >> _DF_SHIFT
                expires = (packed & _LAST_MASK) + (life[df] if df < LIFETIMES else last_life) + 1
                if expires <= page:
                    del entries[key]
                    if df >= threshold and key & TAG_MASK != TAG:
                        self.template_count -= 1
                        self.removed_since_event += 1
                else:
                    bucket = wheel.get(expires)
                    if bucket is None:
                        wheel[expires] = [key]
                    else:
                        bucket.append(key)
        return dfs

    def take_event(self, params: EventParams) -> tuple[str, dict[str, int]] | None:
        """The template event the last page caused, if any, and reset the counters."""
        if not self.learned_page:
            if self.template_count < params.min_template_segments:
                return None
            self.learned_page = self.pages
            kind = "template.learned"
        elif self.pages < self.learned_page + params.settle_pages:
            # Still learning: segments keep reaching the DF threshold for a while after
            # the first template is known. That is not a change; re-baseline silently.
            self.size_at_event = self.template_count
            self.added_since_event = 0
            self.removed_since_event = 0
            return None
        else:
            changed = self.added_since_event + self.removed_since_event
            base = max(self.size_at_event, params.min_template_segments)
            if changed < params.change_share * base:
                return None
            kind = "template.changed"
        details = {
            "template_segments": self.template_count,
            "added": self.added_since_event,
            "removed": self.removed_since_event,
            "previous_template_segments": self.size_at_event,
            "table_segments": len(self._entries) - self.tagged_keys(),
        }
        self.size_at_event = self.template_count
        self.added_since_event = 0
        self.removed_since_event = 0
        return kind, details

    def evict_oldest(self, max_entries: int, keep_share: float = 0.9) -> int:
        """Bound a pathological table: when it holds more than `max_entries` entries, drop the
        least recently seen ones (then the lowest DF, then the lowest key: deterministic) down
        to `keep_share` of the bound; the number dropped.

        The shells call it after each page (the stream after each replayed delta too), so a
        table evolves the same way in both. O(entries) when it runs, a comparison otherwise.
        Dropped keys may stay in the timing wheel: expiry skips keys it no longer finds.
        """
        entries = self._entries
        if max_entries <= 0 or len(entries) <= max_entries:
            return 0
        target = max(0, int(max_entries * keep_share))
        drop = len(entries) - target
        items = list(entries.items())
        by_page: dict[int, int] = {}
        for _key, packed in items:
            last = packed & _LAST_MASK
            by_page[last] = by_page.get(last, 0) + 1
        # The last-seen page up to which every entry goes; at that page only some do.
        cutoff = 0
        below = 0
        for last in sorted(by_page):
            if below + by_page[last] >= drop:
                cutoff = last
                break
            below += by_page[last]
        victims = [k for k, v in items if v & _LAST_MASK < cutoff]
        edge = [k for _df, k in sorted((v >> _DF_SHIFT, k) for k, v in items if v & _LAST_MASK == cutoff)]
        victims.extend(edge[: drop - len(victims)])
        threshold = self.params.template_df
        for key in victims:
            df = entries.pop(key) >> _DF_SHIFT
            if df >= threshold and key & TAG_MASK != TAG:
                self.template_count -= 1
                self.removed_since_event += 1
        return len(victims)

    # -- serialisation -------------------------------------------------------------

    def to_bytes(self) -> bytes:
        entries = self._entries
        columns: bytes
        if self._wheel is None:
            columns = entries.columns(_DF_SHIFT)
        else:
            keys = array("Q", entries.keys())
            dfs = array("I", [v >> _DF_SHIFT for v in entries.values()])
            lasts = array("I", [v & _LAST_MASK for v in entries.values()])
            columns = keys.tobytes() + dfs.tobytes() + lasts.tobytes()
        header = _HEADER.pack(
            _MAGIC,
            self.pages,
            self.source_offset,
            self.template_count,
            self.learned_page,
            self.size_at_event,
            self.added_since_event,
            self.removed_since_event,
            len(entries),
        )
        return header + columns + self._cluster_bytes()

    def _cluster_bytes(self) -> bytes:
        c = self.clusters
        if c is None:
            return b""
        return c if isinstance(c, bytes) else c.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes, params: TableParams, python: bool = False) -> HostTable:
        try:
            magic, pages, offset, tcount, learned, size_at, added, removed, n = _HEADER.unpack_from(data)
        except struct.error as exc:
            raise StateError(f"segment table too short ({len(data)} bytes)") from exc
        if magic != _MAGIC:
            raise StateError(f"not a segment table (magic {magic!r})")
        end = _HEADER.size + 16 * n
        if len(data) < end or (len(data) > end and data[end : end + 4] != CLUSTERS_MAGIC):
            raise StateError(f"segment table of {n} entries has {len(data)} bytes")
        table = cls(params, python)
        table.pages = pages
        table.source_offset = offset
        table.template_count = tcount
        table.learned_page = learned
        table.size_at_event = size_at
        table.added_since_event = added
        table.removed_since_event = removed
        if len(data) > end:
            table.clusters = bytes(data[end:])
        off = _HEADER.size
        if table._wheel is None:
            try:
                table._entries = table._entries.from_columns(memoryview(data)[off:end], n, table._life, _DF_SHIFT)
            except ValueError as exc:
                raise StateError(f"segment table of {n} entries: {exc}") from exc
            return table
        keys = array("Q")
        keys.frombytes(data[off : off + 8 * n])
        dfs = array("I")
        dfs.frombytes(data[off + 8 * n : off + 12 * n])
        lasts = array("I")
        lasts.frombytes(data[off + 12 * n : off + 16 * n])
        entries = table._entries
        wheel = table._wheel
        for key, df, last in zip(keys, dfs, lasts, strict=True):
            if not df:
                raise StateError(f"segment table of {n} entries: an entry with a DF of 0")
            entries[key] = (df << _DF_SHIFT) | last
            due = last + table.lifetime(df) + 1
            bucket = wheel.get(due)
            if bucket is None:
                wheel[due] = [key]
            else:
                bucket.append(key)
        return table

    def state(self) -> dict[int, tuple[int, int]]:
        """key -> (df, last_seen): the table's content, for tests and inspection."""
        return {k: (v >> _DF_SHIFT, v & _LAST_MASK) for k, v in self._entries.items()}

    def tagged_keys(self) -> int:
        """How many entries are tagged (pagelet and cluster) keys: a scan, for events and reports, not per page."""
        mask = TAG_MASK
        tag = TAG
        if self._wheel is None:
            return self._entries.tagged(mask, tag)  # type: ignore[no-any-return]
        return sum(1 for key in self._entries if key & mask == tag)

    def nbytes(self) -> int:
        """Size of the serialised table."""
        return _HEADER.size + 16 * len(self._entries) + len(self._cluster_bytes())


def entries_kernel() -> Any:
    """The extension module where its `Entries` gave the dict tables' results on a probe
    sequence of pages (`_entries_agree`), else None; chosen once, at first use."""
    return compiled.checked(_checked_entries)


def _checked_entries(mod: Any) -> Any:
    return compiled.agreeing(mod, ("Entries",), _entries_agree)


def _entries_agree(mod: Any) -> bool:
    """Pages of a drifting vocabulary (segment keys, tagged keys, keys over 2^63) through a
    table on dicts and one on `mod.Entries`: the same DFs, counters, new characters of blocks
    of those keys, bytes saved and loaded again, and bound by `evict_oldest`."""
    import random

    rng = random.Random(20261130)
    params = TableParams(template_df=3, tb=3, n=5.0)
    slow = HostTable(params, python=True)
    fast = HostTable(params, python=True)
    fast._entries, fast._wheel = mod.Entries(), None  # (not through entries_kernel: this is its check)
    vocabulary = [rng.getrandbits(64) for _ in range(150)] + [(rng.getrandbits(44) << 20) | TAG for _ in range(20)]
    for page in range(160):
        keys = sorted({rng.choice(vocabulary[: 40 + page // 2]) for _ in range(rng.randint(0, 40))})
        blocks = [Block("/p", [Segment(key, "", 1 + key % 7) for key in keys[i::3]], i) for i in range(3)]
        if fast.new_chars(blocks) != slow.new_chars(blocks) or fast.observe(keys) != slow.observe_python(keys):
            return False
        if page == 80:
            data = slow.to_bytes()
            if fast.to_bytes() != data:
                return False
            slow = HostTable.from_bytes(data, params, python=True)
            fast = HostTable.from_bytes(data, params, python=True)
            columns = memoryview(data)[_HEADER.size :]
            fast._entries, fast._wheel = mod.Entries.from_columns(columns, len(slow), fast._life, _DF_SHIFT), None
        if page == 120 and fast.evict_oldest(30) != slow.evict_oldest(30):
            return False
        if page % 16 == 0 and [fast.df(key) for key in vocabulary] != [slow.df(key) for key in vocabulary]:
            return False
    counters = ("pages", "template_count", "added_since_event", "removed_since_event")
    return (
        [getattr(fast, name) for name in counters] == [getattr(slow, name) for name in counters]
        and fast.to_bytes() == slow.to_bytes()
        and fast.state() == slow.state()
        and fast.tagged_keys() == slow.tagged_keys()
        and len(fast) == len(slow) > 0
    )
