"""Several templates per host: pages clustered by their DOM path sets (TEXT-MDL, TEXT-HASH, LSH).

After NaveenSundar, Narmadha and Haran, "Performance Intensification for Automatic
Template Using World Wide Web" (itself after Kim and Shim's TEXT): a page is the set of its DOM
paths; a path's *support* is the number of the host's pages that hold it; a page's
*non-content* (essential) paths are those whose support reaches the page's threshold,
the mode of the supports of the page's paths. The pages form the 0/1 matrix ME
(paths x pages). A clustering is a pair of matrices, MT (paths x clusters: the template
paths of each cluster, those that are non-content in more than half of its pages) and
MD (clusters x pages: membership), plus the corrections Delta = ME - MT.MD in
{-1, 0, 1} (a template path missing from a page, a non-content path outside the
template). The paper prints the entropy over {0, 1, -1} but sums only MT and MD; without
Delta one cluster of everything is always cheapest, so the cost here is TEXT's:

    MDL = |MT| H(MT) + |MD| H(MD) + |Delta| H(Delta),   |M| = entries, H = entropy of the values.

Agglomerative clustering starts from one cluster per page (its template = its
non-content paths) and merges, while the cost goes down, the pair whose merge lowers it
most. Three ways to pick the pairs, as the paper compares them:

- ``mdl`` (TEXT-MDL): every pair of clusters is a candidate.
- ``minhash`` (TEXT-HASH): pages with the same MinHash signature are merged first; the
  candidates of a cluster are the clusters with the highest estimated Jaccard
  coefficient to it (a cluster's signature is the slot-wise minimum of its pages').
- ``lsh``: the candidates of a cluster are the clusters sharing an LSH band with it
  (signatures cut into bands of rows), at most `lsh_neighbours` of them, the most similar.

All three score a candidate pair by its exact MDL cost (the paper's TEXT-HASH estimates
the cost from signature counts; exact costs are cheap here, see docs/clusters.md), so
they differ only in which pairs they look at: that is what costs time and memory.

The streaming side is `HostClusters`: one host's bounded set of template clusters, each
a MinHash signature; an arriving page joins the most similar cluster that shares an LSH
band with it, or opens a new one. It is pure and serialisable, like the segment table.

Path keys are 64-bit ints. `page_paths` builds them from `detemplate.engine.page.guards` blocks:
``blocks`` (the DOM path of each layout block with text), ``segments`` (each text
segment's key: its DOM path plus its text, the paper's text paths such as
``Document\\<html>\\<body>Gate``) or ``both`` (the paper: element paths and text paths).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from xxhash import xxh3_64_intdigest

from ..engine.detectors.clusters import MinHasher
from ..engine.errors import ConfigError
from ..engine.keys import U64
from ..engine.params import PAGE_FEATURES

FEATURES = PAGE_FEATURES
METHODS = ("mdl", "minhash", "lsh")


def support(pages: Sequence[Iterable[int]]) -> Counter[int]:
    """Support of each path: on how many pages it occurs."""
    counts: Counter[int] = Counter()
    for keys in pages:
        counts.update(set(keys))
    return counts


def noncontent_paths(pages: Sequence[Iterable[int]], min_support: int = 1) -> list[frozenset[int]]:
    """Each page's non-content paths: support at least the mode of its paths' supports.

    The mode is the most frequent support value among the page's paths; on a tie the
    larger value wins (fewer paths are called non-content). `min_support` raises the
    threshold to at least that value (1: the paper's rule).
    """
    sup = support(pages)
    out: list[frozenset[int]] = []
    for keys in pages:
        ks = set(keys)
        if not ks:
            out.append(frozenset())
            continue
        hist = Counter(sup[k] for k in ks)
        top = max(hist.values())
        threshold = max(min_support, max(s for s, n in hist.items() if n == top))
        out.append(frozenset(k for k in ks if sup[k] >= threshold))
    return out


def jaccard_estimate(a: NDArray[np.uint64], b: NDArray[np.uint64]) -> float:
    """Share of signature slots that agree: an unbiased estimate of the Jaccard coefficient."""
    return float(np.count_nonzero(a == b)) / a.size


def band_hashes(sig: NDArray[np.uint64], bands: int) -> list[int]:
    """One hash per LSH band (`bands` bands of len(sig)//bands rows), tagged with the band number."""
    rows = sig.size // bands
    raw = sig[: rows * bands].tobytes()
    width = rows * 8
    return [xxh3_64_intdigest(raw[i * width : (i + 1) * width], seed=i) for i in range(bands)]


def _h2(ones: float, size: float) -> float:
    """size * H(p) for a 0/1 matrix of `size` entries with `ones` ones (bits)."""
    if size <= 0 or ones <= 0 or ones >= size:
        return 0.0
    p = ones / size
    return size * -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _h3(plus: float, minus: float, size: float) -> float:
    """size * H for a {-1, 0, 1} matrix with `plus` ones and `minus` minus-ones (bits)."""
    if size <= 0:
        return 0.0
    bits = 0.0
    for n in (plus, minus, size - plus - minus):
        if n > 0:
            p = n / size
            bits -= n * math.log2(p)
    return bits


def _h2v(ones: NDArray[np.float64], size: NDArray[np.float64]) -> NDArray[np.float64]:
    """`_h2` over arrays (0 bits where the matrix is empty, all zeros or all ones)."""
    inside = (ones > 0) & (ones < size)
    frac = np.divide(ones, size, out=np.full_like(ones, 0.5), where=inside)
    out = -(ones * np.log2(frac) + (size - ones) * np.log2(1.0 - frac))
    return np.where(inside, out, 0.0)


def _h3v(plus: NDArray[np.float64], minus: NDArray[np.float64], size: float) -> NDArray[np.float64]:
    """`_h3` over arrays of counts, for one matrix size."""
    out = np.zeros_like(plus)
    if size <= 0:
        return out
    for n in (plus, minus, size - plus - minus):
        safe = np.where(n > 0, n, 1.0)
        out -= np.where(n > 0, n * np.log2(safe / size), 0.0)
    return out


@dataclass(frozen=True, slots=True)
class ModelCost:
    """The counts the MDL cost of a clustering depends on."""

    paths: int  # rows of ME: paths that are non-content on at least one page
    pages: int
    clusters: int
    template_ones: int  # ones in MT
    plus: int  # +1 entries in Delta
    minus: int  # -1 entries in Delta

    @property
    def bits(self) -> float:
        return model_bits(self.paths, self.pages, self.clusters, self.template_ones, self.plus, self.minus)


def model_bits(paths: int, pages: int, clusters: int, template_ones: float, plus: float, minus: float) -> float:
    """MDL cost in bits: |MT| H(MT) + |MD| H(MD) + |Delta| H(Delta)."""
    return _h2(template_ones, paths * clusters) + _h2(pages, clusters * pages) + _h3(plus, minus, paths * pages)


def clustering_cost(essential: Sequence[frozenset[int]], labels: Sequence[int]) -> ModelCost:
    """The MDL cost of any assignment of pages to clusters (brute force, for checks and tests)."""
    groups: dict[int, list[frozenset[int]]] = {}
    for keys, label in zip(essential, labels, strict=True):
        groups.setdefault(label, []).append(keys)
    rows = set().union(*essential) if essential else set()
    ones = plus = minus = 0
    for members in groups.values():
        counts = support(members)
        size = len(members)
        temp = {k for k, n in counts.items() if 2 * n > size}
        ones += len(temp)
        for k, n in counts.items():
            if k in temp:
                minus += size - n
            else:
                plus += n
    return ModelCost(len(rows), len(essential), len(groups), ones, plus, minus)


@dataclass(frozen=True, slots=True)
class BatchParams:
    """Knobs of batch clustering (the streaming assigner's are detemplate.engine.params.ClusterParams).

    method: ``mdl``, ``minhash`` or ``lsh`` (module docstring).
    features: which paths describe a page: ``blocks``, ``segments`` or ``both``.
        Measured (docs/clusters.md): block paths, with class names on the path,
        match URL page types best; text paths split one page type into sub-families.
    num_perm: MinHash functions per signature.
    bands: LSH bands (num_perm // bands rows each).
    lsh_neighbours: at most this many LSH bucket mates per cluster are candidates.
    seed: seed of the MinHash functions.
    min_support: a non-content path is on at least this many pages, whatever the mode.
        The paper's rule is 1: on a long article most paths are its own text, the mode
        of supports is 1, and every path, content included, counts as non-content;
        such pages then never merge (measured in docs/clusters.md). 2 excludes paths
        that occur on one page only.
    """

    method: str = "lsh"
    features: str = "blocks"
    num_perm: int = 128
    bands: int = 32
    lsh_neighbours: int = 8
    seed: int = 1
    min_support: int = 2

    def __post_init__(self) -> None:
        if self.min_support < 1:
            raise ConfigError("min_support must be at least 1")
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {METHODS}, not {self.method!r}")
        if self.features not in FEATURES:
            raise ConfigError(f"features must be one of {FEATURES}, not {self.features!r}")
        if self.num_perm < 1 or not 1 <= self.bands <= self.num_perm:
            raise ConfigError("need num_perm >= 1 and 1 <= bands <= num_perm")
        if self.lsh_neighbours < 1:
            raise ConfigError("lsh_neighbours must be at least 1")


@dataclass(frozen=True, slots=True)
class Cluster:
    """One template cluster of a batch: member page indexes and template paths (path id, count)."""

    members: tuple[int, ...]
    template: tuple[tuple[int, int], ...]  # (path key, pages where it is non-content), most common first


@dataclass(frozen=True, slots=True)
class ClusteringResult:
    """What `cluster_pages` found, and what it cost."""

    labels: tuple[int, ...]  # cluster number of each page, clusters numbered by size then first page
    clusters: tuple[Cluster, ...]
    costs: tuple[float, ...]  # MDL cost of the singletons, after the signature pre-merge (if any), after each merge
    pair_evaluations: int  # candidate pairs whose merged cost was computed
    premerged: int  # pages merged before the MDL loop (identical MinHash signatures)
    method: str


class _State:
    """Clusters as rows of a dense count matrix over the shared paths (support >= 2).

    Paths that are non-content on one page only can be template only of that page's
    singleton cluster; they are kept as one count per cluster (`uniq`), which is exact.
    """

    def __init__(self, essential: Sequence[frozenset[int]]) -> None:
        sup = support(essential)
        shared = sorted(k for k, n in sup.items() if n >= 2)
        self.col = {k: i for i, k in enumerate(shared)}
        self.keys = shared
        n = len(essential)
        self.paths = len(sup)
        self.pages = n
        self.counts = np.zeros((n, len(shared)), dtype=np.float32)
        self.uniq = np.zeros(n, dtype=np.float64)
        for i, keys in enumerate(essential):
            idx = [self.col[k] for k in keys if k in self.col]
            self.counts[i, idx] = 1.0
            self.uniq[i] = len(keys) - len(idx)
        self.size = np.ones(n, dtype=np.float64)
        self.active = np.ones(n, dtype=bool)
        self.members: list[list[int]] = [[i] for i in range(n)]
        # Local stats of each cluster: template ones, Delta +1, Delta -1.
        self.t = np.array([len(k) for k in essential], dtype=np.float64)
        self.p = np.zeros(n, dtype=np.float64)
        self.m = np.zeros(n, dtype=np.float64)
        self.clusters = n
        self.evaluations = 0

    def totals(self) -> tuple[float, float, float]:
        a = self.active
        return float(self.t[a].sum()), float(self.p[a].sum()), float(self.m[a].sum())

    def bits(self) -> float:
        t, p, m = self.totals()
        return model_bits(self.paths, self.pages, self.clusters, t, p, m)

    def merged_stats(self, a: int, others: NDArray[np.intp]) -> tuple[NDArray[np.float64], ...]:
        """Local stats (t, p, m) of cluster `a` merged with each of `others`."""
        self.evaluations += len(others)
        if len(others) == 0:
            empty = np.zeros(0)
            return empty, empty, empty
        cnt = self.counts[others] + self.counts[a]
        size = self.size[others] + self.size[a]
        temp = 2.0 * cnt > size[:, None]
        t = temp.sum(axis=1).astype(np.float64)
        total = cnt.sum(axis=1, dtype=np.float64)
        in_temp = np.where(temp, cnt, 0.0).sum(axis=1, dtype=np.float64)
        p = total - in_temp + self.uniq[others] + self.uniq[a]
        m = t * size - in_temp
        return t, p, m

    def delta_bits(
        self,
        a: NDArray[np.intp],
        b: NDArray[np.intp],
        t: NDArray[np.float64],
        p: NDArray[np.float64],
        m: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Cost after merging each pair (a[i], b[i]) whose merged local stats are t, p, m."""
        T, P, M = self.totals()
        nt = T - self.t[a] - self.t[b] + t
        np_ = P - self.p[a] - self.p[b] + p
        nm = M - self.m[a] - self.m[b] + m
        k = self.clusters - 1
        size_t = float(self.paths * k)
        return (
            _h2v(nt, np.full_like(nt, size_t))
            + _h2(self.pages, k * self.pages)
            + _h3v(np_, nm, float(self.paths * self.pages))
        )

    def merge(self, a: int, b: int, t: float, p: float, m: float) -> None:
        """Merge cluster b into a."""
        self.counts[a] += self.counts[b]
        self.counts[b] = 0.0
        self.uniq[a] += self.uniq[b]
        self.size[a] += self.size[b]
        self.t[a], self.p[a], self.m[a] = t, p, m
        self.active[b] = False
        self.members[a].extend(self.members[b])
        self.members[b] = []
        self.clusters -= 1

    def merge_exact(self, a: int, b: int) -> None:
        t, p, m = self.merged_stats(a, np.array([b], dtype=np.intp))
        self.merge(a, b, float(t[0]), float(p[0]), float(m[0]))


def _run_all_pairs(st: _State, costs: list[float]) -> None:
    """TEXT-MDL: every pair is a candidate; pair stats cached and refreshed for the merged cluster."""
    n = st.pages
    T = np.zeros((n, n))
    P = np.zeros((n, n))
    M = np.zeros((n, n))
    for a in range(n - 1):
        others = np.arange(a + 1, n, dtype=np.intp)
        t, p, m = st.merged_stats(a, others)
        T[a, a + 1 :], P[a, a + 1 :], M[a, a + 1 :] = t, p, m
    iu = np.triu_indices(n, 1)
    while st.clusters > 1:
        ok = st.active[iu[0]] & st.active[iu[1]]
        a_idx, b_idx = iu[0][ok], iu[1][ok]
        bits = st.delta_bits(a_idx, b_idx, T[a_idx, b_idx], P[a_idx, b_idx], M[a_idx, b_idx])
        best = int(np.argmin(bits)) if bits.size else -1
        if best < 0 or not bits[best] < costs[-1] - 1e-9:
            break
        a, b = int(a_idx[best]), int(b_idx[best])
        st.merge(a, b, T[a, b], P[a, b], M[a, b])
        costs.append(st.bits())
        others = np.flatnonzero(st.active)
        others = others[others != a]
        t, p, m = st.merged_stats(a, others)
        lo = np.minimum(others, a)
        hi = np.maximum(others, a)
        T[lo, hi], P[lo, hi], M[lo, hi] = t, p, m


def _run_candidates(
    st: _State,
    costs: list[float],
    sigs: NDArray[np.uint64],
    params: BatchParams,
) -> None:
    """TEXT-HASH or LSH: only candidate pairs (by MinHash) are scored; cache per pair."""
    cache: dict[tuple[int, int], tuple[float, float, float]] = {}
    partners: dict[int, set[int]] = {}  # cluster -> clusters it has a cached pair with
    lsh = params.method == "lsh"
    buckets: list[dict[int, set[int]]] = [{} for _ in range(params.bands)]
    bands_of: dict[int, list[int]] = {}

    def index(c: int) -> None:
        hs = band_hashes(sigs[c], params.bands)
        bands_of[c] = hs
        for band, h in zip(buckets, hs, strict=True):
            band.setdefault(h, set()).add(c)

    def unindex(c: int) -> None:
        for band, h in zip(buckets, bands_of.pop(c), strict=True):
            members = band[h]
            members.discard(c)
            if not members:
                del band[h]

    def neighbours(c: int) -> list[int]:
        if lsh:
            mates: set[int] = set()
            for band, h in zip(buckets, bands_of[c], strict=True):
                mates.update(band[h])
            mates.discard(c)
            if not mates:
                return []
            cand = np.fromiter(sorted(mates), dtype=np.intp)
            sim = (sigs[cand] == sigs[c]).sum(axis=1)
            if len(cand) <= params.lsh_neighbours:
                return [int(x) for x in cand]
            order = np.lexsort((cand, -sim))[: params.lsh_neighbours]
            return [int(x) for x in cand[order]]
        act = np.flatnonzero(st.active)
        act = act[act != c]
        if act.size == 0:
            return []
        sim = (sigs[act] == sigs[c]).sum(axis=1)
        return [int(x) for x in act[sim == sim.max()]]

    def score(c: int) -> None:
        todo = [x for x in neighbours(c) if (min(c, x), max(c, x)) not in cache]
        if not todo:
            return
        arr = np.array(todo, dtype=np.intp)
        t, p, m = st.merged_stats(c, arr)
        for x, ti, pi, mi in zip(todo, t, p, m, strict=True):
            cache[(min(c, x), max(c, x))] = (float(ti), float(pi), float(mi))
            partners.setdefault(c, set()).add(x)
            partners.setdefault(x, set()).add(c)

    live = [int(c) for c in np.flatnonzero(st.active)]
    if lsh:
        for c in live:
            index(c)
    for c in live:
        score(c)
    while st.clusters > 1 and cache:
        pairs = list(cache)
        a_idx = np.array([x for x, _ in pairs], dtype=np.intp)
        b_idx = np.array([y for _, y in pairs], dtype=np.intp)
        vals = np.array([cache[q] for q in pairs])
        bits = st.delta_bits(a_idx, b_idx, vals[:, 0], vals[:, 1], vals[:, 2])
        best = int(np.argmin(bits))
        if not bits[best] < costs[-1] - 1e-9:
            break
        a, b = pairs[best]
        t, p, m = cache[(a, b)]
        st.merge(a, b, t, p, m)
        np.minimum(sigs[a], sigs[b], out=sigs[a])
        costs.append(st.bits())
        # Drop the pairs of a and b; the clusters that had one look for candidates again.
        affected: set[int] = set()
        for x in (a, b):
            for y in partners.pop(x, set()):
                cache.pop((min(x, y), max(x, y)), None)
                if y not in (a, b):
                    partners[y].discard(x)
                    affected.add(y)
        if lsh:
            unindex(a)
            unindex(b)
            index(a)
        score(a)
        for c in sorted(affected):
            # TEXT-HASH: a cluster's most similar clusters may have changed. LSH: only a
            # cluster left without any candidate looks again (its buckets are unchanged).
            if not lsh or not partners.get(c):
                score(c)


def cluster_pages(pages: Sequence[Iterable[int]], params: BatchParams | None = None) -> ClusteringResult:
    """Cluster one host's pages (each a set of path keys) by TEXT-MDL or a MinHash/LSH variant."""
    params = params or BatchParams()
    essential = noncontent_paths(pages, params.min_support)
    st = _State(essential)
    premerged = 0
    costs = [st.bits()]
    if params.method != "mdl" and st.pages > 1:
        hasher = MinHasher(params.num_perm, params.seed)
        sigs = np.stack([hasher.signature(k) for k in essential]) if essential else np.zeros((0, params.num_perm), U64)
        # TEXT-HASH: pages with the same signature are merged before the MDL search.
        first: dict[bytes, int] = {}
        for i in range(st.pages):
            key = sigs[i].tobytes()
            if key in first:
                st.merge_exact(first[key], i)
                premerged += 1
            else:
                first[key] = i
        if premerged:
            costs.append(st.bits())
    if st.pages > 1:
        if params.method == "mdl":
            _run_all_pairs(st, costs)
        else:
            _run_candidates(st, costs, sigs, params)
    groups = [sorted(m) for m in st.members if m]
    groups.sort(key=lambda g: (-len(g), g[0]))
    labels = [0] * st.pages
    clusters = []
    for cid, members in enumerate(groups):
        for i in members:
            labels[i] = cid
        counts = support([essential[i] for i in members])
        temp = sorted(((k, n) for k, n in counts.items() if 2 * n > len(members)), key=lambda kn: (-kn[1], kn[0]))
        clusters.append(Cluster(tuple(members), tuple(temp)))
    return ClusteringResult(tuple(labels), tuple(clusters), tuple(costs), st.evaluations, premerged, params.method)
