"""Several templates per host: the template-cluster detector (after TEXT-MDL's MinHash/LSH variants).

`HostClusters` is one host's bounded set of template clusters, each a MinHash signature
of its pages' DOM path sets (`page_paths`); an arriving page joins the most similar
cluster that shares an LSH band with it, or opens a new one. It is pure and
serialisable, like the segment table, and lives with it. With clusters.statistics each
segment key is counted again under the page's cluster (`cluster_keys`, tagged keys of
the host's table). The batch clustering of a whole crawl (TEXT-MDL, TEXT-HASH, LSH) is in
detemplate.tools.clusters. See docs/clusters.md.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from xxhash import xxh3_64_intdigest

from ..errors import ConfigError, StateError
from ..keys import U64, mix64, tag
from ..model import Block, RawPage, TemplateEvent
from ..page import compiled
from ..params import LIFETIMES, PAGE_FEATURES, ClusterParams, EngineParams
from ..table import CLUSTERS_MAGIC, HostTable
from .base import Ballot, SegmentKeys, WalkedPage


def path_key(path: str) -> int:
    """Stable 64-bit key of an element path (no NUL, so never equal to a segment key)."""
    key = _PATH_KEYS.get(path)
    if key is None:
        if len(_PATH_KEYS) >= _PATH_KEYS_MAX:
            _PATH_KEYS.clear()
        key = _PATH_KEYS[path] = xxh3_64_intdigest(path.encode())
    return key


_PATH_OF = itemgetter(0)  # a Block's path
# A host's pages repeat their block paths: their keys are cached (bounded).
_PATH_KEYS: dict[str, int] = {}
_PATH_KEYS_MAX = 1 << 16


def page_paths(blocks: Sequence[Block], features: str = "both") -> frozenset[int]:
    """A page's set of path keys from its segmented blocks (`page.segment_tree`)."""
    if features not in PAGE_FEATURES:
        raise ConfigError(f"features must be one of {PAGE_FEATURES}, not {features!r}")
    keys: set[int] = set()
    if features != "segments":
        kernel = compiled.kernel("path_keys")  # the same keys, hashed in C (page/_walk.pyx)
        if kernel is not None:
            keys = kernel(blocks, xxh3_64_intdigest)
        else:
            cached = _PATH_KEYS.get
            # `or` also covers a path whose key is 0: path_key gives 0 again.
            keys = {cached(path) or path_key(path) for path in set(map(_PATH_OF, blocks))}
    if features != "blocks":
        keys.update(seg.key for b in blocks for seg in b.segments)
    return frozenset(keys)


class MinHasher:
    """MinHash over 64-bit keys with numpy: `num_perm` seeded mixes of splitmix64's finaliser.

    Each hash function is h_i(x) = mix(x XOR s_i) with a fixed random 64-bit s_i; the
    signature keeps each function's minimum over the set, as uint64 (empty set: all ones).
    """

    def __init__(self, num_perm: int = 128, seed: int = 1) -> None:
        if num_perm < 1:
            raise ConfigError("num_perm must be at least 1")
        self.num_perm = num_perm
        self.seed = seed
        rng = np.random.default_rng(seed)
        self._salt = rng.integers(0, 2**63, size=num_perm, dtype=np.int64).astype(U64) * U64(2) + U64(1)
        self.salts = self._salt.astype("<u8").tobytes()  # for minhash32

    def signature(self, keys: Iterable[int]) -> NDArray[np.uint64]:
        return min_hash(keys, self._salt)


def min_hash(keys: Iterable[int], salt: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """For each salt s, the minimum over the keys of mix64(key XOR s) (all ones for no keys)."""
    arr = np.fromiter(keys, dtype=U64)
    if arr.size == 0:
        return np.full(salt.size, np.iinfo(np.uint64).max, dtype=U64)
    out = np.empty(salt.size, dtype=U64)
    step = max(1, 65536 // salt.size)  # bound the (keys x perms) scratch to ~0.5 MB
    for i in range(0, arr.size, step):
        low = mix64(arr[i : i + step, None] ^ salt[None, :]).min(axis=0)
        if i == 0:
            out[:] = low
        else:
            np.minimum(out, low, out=out)
    return out


@dataclass(slots=True)
class StreamCluster:
    """One template cluster of a host: id, representative signature, pages, last page seen."""

    cid: int
    signature: bytes  # num_perm u32 slots, little-endian
    pages: int
    last_seen: int
    bands: frozenset[int] = frozenset()  # its LSH band hashes (band number mixed in)


# Wire layout (little-endian): magic "DTC1", clock u64, next_id u32, num_perm u32, n u32,
# then per cluster: cid u32, pages u64, last_seen u64, signature num_perm x u32.
_HEAD = struct.Struct("<4sQIII")
_ENTRY = struct.Struct("<IQQ")
EVICTED = "evicted"  # a new cluster needed the place of the least recently seen one
EXPIRED = "expired"  # unseen for its lifetime (ClusterParams.lifetime of its pages)


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one page went.

    cid: its cluster. new: the page opened that cluster. similarity: estimated Jaccard
    coefficient to the closest candidate (0 when none shared a band). dropped: the
    clusters that went on this page, each (cid, pages, EXPIRED or EVICTED).
    signature: the page's signature (u32 little-endian slots) when the host's state took
    it in (a new cluster, or every page with `follow`), else empty; `HostClusters.replay`
    needs it. pages: the cluster's pages, this one included.
    """

    cid: int
    new: bool
    similarity: float
    dropped: tuple[tuple[int, int, str], ...]
    signature: bytes = b""
    pages: int = 1


class HostClusters:
    """One host's template clusters for the stream: pure, bounded, serialisable.

    The clock is the host's page count, as in the segment table. Each cluster keeps a
    MinHash signature (its representative: the first member's, or the latest's with
    `follow`), its page count and the page number it was last chosen on. Memory:
    max_clusters x (num_perm x 4 + 20) bytes. `assign` decides a page; `replay` repeats
    what `assign` did from the Assignment's cid and signature alone (the stream worker's
    changelog), so a replayed host ends in the same state.
    """

    __slots__ = ("_hasher", "_life", "clock", "clusters", "next_id", "params")

    def __init__(self, params: ClusterParams) -> None:
        self.params = params
        self.clock = 0
        self.next_id = 0
        self.clusters: list[StreamCluster] = []
        self._hasher = _hasher(params.num_perm, params.seed)
        self._life = params.lifetimes()  # shared, never changed

    def lifetime(self, pages: int) -> int:
        return self._life[pages] if pages < LIFETIMES else self._life[-1]

    def signature(self, keys: Iterable[int]) -> bytes:
        """The page's signature: num_perm u32 slots (the high halves of MinHasher's), as bytes."""
        return kernels().minhash32(keys, self._hasher.salts)  # type: ignore[no-any-return]

    def get(self, cid: int) -> StreamCluster | None:
        for c in self.clusters:
            if c.cid == cid:
                return c
        return None

    def _tick(self) -> list[tuple[int, int, str]]:
        """Advance the clock one page and drop the clusters that expire on it."""
        self.clock = page = self.clock + 1
        dropped = [(c.cid, c.pages, EXPIRED) for c in self.clusters if page - c.last_seen > self.lifetime(c.pages)]
        if dropped:
            gone = {d[0] for d in dropped}
            self.clusters = [c for c in self.clusters if c.cid not in gone]
        return dropped

    def _open(self, sig: bytes, bands: frozenset[int], dropped: list[tuple[int, int, str]]) -> int:
        if len(self.clusters) >= self.params.max_clusters:
            victim = min(self.clusters, key=lambda c: (c.last_seen, c.cid))
            self.clusters.remove(victim)
            dropped.append((victim.cid, victim.pages, EVICTED))
        cid = self.next_id
        self.next_id += 1
        self.clusters.append(StreamCluster(cid, sig, 1, self.clock, bands))
        return cid

    def assign(self, keys: Iterable[int]) -> Assignment:
        """Assign one page (its path keys) to a cluster, opening one if none is close enough."""
        p = self.params
        dropped = self._tick()
        sig = self.signature(keys)
        k = kernels()
        bands = k.bands32(sig, p.bands, _BAND_MULT, _BAND_SALT)
        agree = k.agree32
        best: StreamCluster | None = None
        best_sim = -1.0
        for c in self.clusters:
            if c.bands.isdisjoint(bands):  # shares no LSH band with the page
                continue
            sim = agree(c.signature, sig) / p.num_perm
            if sim > best_sim:  # ties: the older cluster (lower cid, listed first) wins
                best, best_sim = c, sim
        if best is not None and best_sim >= p.threshold:
            best.pages += 1
            best.last_seen = self.clock
            if p.follow:
                best.signature = sig
                best.bands = bands
                return Assignment(best.cid, False, best_sim, tuple(dropped), sig, best.pages)
            return Assignment(best.cid, False, best_sim, tuple(dropped), b"", best.pages)
        cid = self._open(sig, bands, dropped)
        return Assignment(cid, True, max(best_sim, 0.0), tuple(dropped), sig)

    def replay(self, cid: int, signature: bytes) -> None:
        """Repeat an `assign` that put its page in `cid` (with the Assignment's signature)."""
        sig = None
        if signature:
            if len(signature) != 4 * self.params.num_perm:
                raise StateError(f"cluster delta has a signature of {len(signature)} bytes")
            sig = bytes(signature)
        dropped = self._tick()
        c = self.get(cid)
        if c is None:
            if sig is None or cid != self.next_id:
                raise StateError(f"cluster delta opens cluster {cid}, the host's next is {self.next_id}")
            self._open(sig, kernels().bands32(sig, self.params.bands, _BAND_MULT, _BAND_SALT), dropped)
            return
        c.pages += 1
        c.last_seen = self.clock
        if sig is not None:
            c.signature = sig
            c.bands = kernels().bands32(sig, self.params.bands, _BAND_MULT, _BAND_SALT)

    def to_bytes(self) -> bytes:
        p = self.params
        parts = [_HEAD.pack(CLUSTERS_MAGIC, self.clock, self.next_id, p.num_perm, len(self.clusters))]
        for c in self.clusters:
            parts.append(_ENTRY.pack(c.cid, c.pages, c.last_seen))
            parts.append(c.signature)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, params: ClusterParams) -> HostClusters:
        try:
            magic, clock, next_id, num_perm, n = _HEAD.unpack_from(data, 0)
        except struct.error as exc:
            raise StateError(f"cluster state too short ({len(data)} bytes)") from exc
        if magic != CLUSTERS_MAGIC:
            raise StateError(f"cluster state has magic {magic!r}, not {CLUSTERS_MAGIC!r}")
        if num_perm != params.num_perm:
            raise StateError(f"cluster state has {num_perm} MinHash slots, params want {params.num_perm}")
        width = num_perm * 4
        if len(data) != _HEAD.size + n * (_ENTRY.size + width):
            raise StateError(f"cluster state of {len(data)} bytes does not hold {n} clusters")
        self = cls(params)
        self.clock, self.next_id = clock, next_id
        off = _HEAD.size
        for _ in range(n):
            cid, pages, last = _ENTRY.unpack_from(data, off)
            off += _ENTRY.size
            sig = bytes(data[off : off + width])
            off += width
            bands = kernels().bands32(sig, params.bands, _BAND_MULT, _BAND_SALT)
            self.clusters.append(StreamCluster(cid, sig, pages, last, bands))
        return self


_CLUSTER_SALT = 0xC2B2AE3D27D4EB4F


def cluster_keys(keys: list[int], cid: int) -> list[int]:
    """Each segment key as counted under template cluster `cid` (clusters.statistics): a
    tagged key of the host's table (so it never counts as a segment), distinct per cluster."""
    if not keys:
        return []
    salt = U64(((cid + 1) * _CLUSTER_SALT) & 0xFFFFFFFFFFFFFFFF)
    return tag(mix64(np.array(keys, dtype=U64) ^ salt)).tolist()  # type: ignore[no-any-return]


_HASHERS: dict[tuple[int, int], MinHasher] = {}


def _hasher(num_perm: int, seed: int) -> MinHasher:
    h = _HASHERS.get((num_perm, seed))
    if h is None:
        h = _HASHERS[(num_perm, seed)] = MinHasher(num_perm, seed)
    return h


def minhash32_python(keys: Iterable[int], salts: bytes) -> bytes:
    """`HostClusters.signature` in numpy (the reference for the compiled `minhash32`): for
    each salt, the high 32 bits of MinHasher's minimum, as u32 little-endian bytes."""
    low = min_hash(keys, np.frombuffer(salts, dtype="<u8").astype(U64))
    return bytes((low >> U64(32)).astype("<u4").tobytes())


def bands32_python(sig: bytes, bands: int, mult: bytes, salt: bytes) -> frozenset[int]:
    """The signature's LSH band hashes (the reference for the compiled `bands32`): `bands`
    bands of num_perm // bands slots; a band's hash is the sum of its slots times odd
    constants plus the band's own constant (u64, wrapping), so equal hashes mean (with
    odds of 2^-64) the same band with the same slots: two signatures share a band exactly
    when their sets intersect."""
    s = np.frombuffer(sig, dtype="<u4").astype(U64)
    rows = s.size // bands
    m = s[: rows * bands].reshape(bands, rows)
    h = (m * np.frombuffer(mult, dtype="<u8")[:rows]).sum(axis=1, dtype=U64)
    return frozenset((h + np.frombuffer(salt, dtype="<u8")[:bands]).tolist())


def agree32_python(a: bytes, b: bytes) -> int:
    """How many u32 slots of two signatures are equal (the reference for `agree32`)."""
    return int(np.count_nonzero(np.frombuffer(a, dtype="<u4") == np.frombuffer(b, dtype="<u4")))


_BAND_RNG = np.random.default_rng(0x5EED)
_BAND_MULT = (
    (_BAND_RNG.integers(0, 2**63, size=1024, dtype=np.int64).astype(U64) * U64(2) + U64(1)).astype("<u8").tobytes()
)


_BAND_SALT = (_BAND_RNG.integers(0, 2**63, size=1024, dtype=np.int64).astype(U64) * U64(2)).astype("<u8").tobytes()


class Kernels(NamedTuple):
    """The per-page loops of the clusters: compiled, or numpy's (the reference)."""

    minhash32: Any
    bands32: Any
    agree32: Any


def _compiled() -> Kernels:
    """The compiled signature, band and agreement functions when they give the numpy
    ones' results on a probe, else the numpy ones."""
    python = Kernels(minhash32_python, bands32_python, agree32_python)
    mod = compiled.module()
    if mod is None or not hasattr(mod, "minhash32"):
        return python
    rng = np.random.default_rng(7)
    keys = [int(k) for k in rng.integers(0, 2**63, size=50, dtype=np.int64)] + [2**64 - 1, 0]
    salts = MinHasher(64, 1).salts
    try:
        sig = mod.minhash32(keys, salts)
        other = mod.minhash32(keys[:30], salts)
        same = (
            sig == minhash32_python(keys, salts)
            and mod.minhash32([], salts) == minhash32_python([], salts)
            and mod.bands32(sig, 16, _BAND_MULT, _BAND_SALT) == bands32_python(sig, 16, _BAND_MULT, _BAND_SALT)
            and mod.agree32(sig, other) == agree32_python(sig, other)
        )
    except Exception:  # a build that does not fit this source
        same = False
    return Kernels(mod.minhash32, mod.bands32, mod.agree32) if same else python


_kernels: Kernels | None = None


def kernels() -> Kernels:
    """The signature, band and agreement functions, chosen on first use with the page walk."""
    global _kernels
    if _kernels is None:
        _kernels = _compiled()
    return _kernels


# -- the detector ---------------------------------------------------------------------------

CLUSTER_NEW = "template.cluster_new"
CLUSTER_DROPPED = "template.cluster_dropped"


class ClusterPage(NamedTuple):
    """The cluster detector's state for one page."""

    assignment: Assignment  # the page's cluster
    live: int  # the host's clusters after the assignment
    keys: list[int]  # clusters.statistics: the page's segment keys counted under its cluster; else none
    segment_keys: list[int]  # the page's segment keys, in the order of `keys`


def host_clusters(table: HostTable, params: ClusterParams) -> HostClusters:
    """The host's cluster assigner, kept in `table.clusters` (parsed on first use).

    A stored state that these params cannot read (another clusters.num_perm) starts the
    host's clusters again: cluster ids are per host and only compared within it.
    """
    hc = table.clusters
    if isinstance(hc, HostClusters):
        return hc
    if hc is None:
        hc = HostClusters(params)
    else:
        try:
            hc = HostClusters.from_bytes(hc, params)
        except StateError:
            hc = HostClusters(params)
    table.clusters = hc
    return hc


class Clusters:
    """The template clusters' part in a page's decision: the page's cluster, assigned before
    the table update, and with clusters.statistics a vote on segment keys by the cluster's
    own DFs."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        return False

    def prepare(
        self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams
    ) -> ClusterPage | None:
        cp = params.clusters
        if not cp.enabled:
            return None
        clusters = host_clusters(table, cp)
        assignment = clusters.assign(page_paths(page.blocks, cp.features))
        keys = cluster_keys(segments.keys, assignment.cid) if cp.statistics else []
        return ClusterPage(assignment, len(clusters.clusters), keys, segments.keys)

    def vote(self, mine: ClusterPage, dfs: list[int], ballot: Ballot) -> None:
        # A segment is also template when its cluster's pages make it so.
        if not mine.keys or not ballot.warm:
            return
        tparams = ballot.params.table
        cpages = mine.assignment.pages
        cthreshold = tparams.threshold(cpages)
        if cpages >= cthreshold:
            ballot.vote_keys({key for key, df in zip(mine.segment_keys, dfs, strict=True) if df >= cthreshold})


CLUSTERS = Clusters()


def cluster_events(page: RawPage, page_no: int, mine: ClusterPage, params: ClusterParams) -> tuple[TemplateEvent, ...]:
    """``template.cluster_dropped`` for each cluster that went, then ``template.cluster_new``
    (not for the host's first cluster); none without clusters.events."""
    a = mine.assignment
    if not params.events or not (a.dropped or (a.new and a.cid > 0)):
        return ()
    events = [
        TemplateEvent(
            CLUSTER_DROPPED, page.host, page_no, page.url,
            {"dropped_cluster": gone, "cluster_pages": pages, "reason": reason, "clusters": mine.live},
            None, a.cid,
        )
        for gone, pages, reason in a.dropped
    ]
    if a.new and a.cid > 0:
        details = {"similarity": round(a.similarity, 4), "clusters": mine.live}
        events.append(TemplateEvent(CLUSTER_NEW, page.host, page_no, page.url, details, None, a.cid))
    return tuple(events)
