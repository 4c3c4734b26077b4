"""Pagelets in the host's table (after Bar-Yossef and Rajagopalan, WWW 2002): the pagelet detector.

A page's block tree (the page walk's, no second walk) is cut into pagelets by the paper's
syntactic definition (Definition 2, `block_pagelets`): an element is a pagelet when none
of its child elements holds k or more links and no ancestor is one. Each pagelet with
enough links is fingerprinted by a min-hash of its segment keys (`page_sketches`); the
min-hash values are keys of the host's own table, tagged (engine/keys.py TAG), so they get
the segments' DF and expiry. A pagelet whose DF reaches the threshold is a template
pagelet: its blocks are template (method ``pagelet``) and template events list it.
The paper's batch algorithms over a whole crawl are in detemplate.tools.pagelets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import numpy as np
from selectolax.lexbor import LexborHTMLParser

from ..keys import TAG, TAG_MASK, mix64, tag
from ..model import PageletReport, TemplatePagelet
from ..page import compiled, walk
from ..page.tree import PageTree
from ..params import EngineParams, PageletParams, SegmentParams
from ..table import HostTable
from .base import Ballot, SegmentKeys, WalkedPage

# Min-hash permutations h -> a*h + b (mod 2^64), a odd: fixed, so sketches are stable
# across processes and machines.
PERM_A = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                    0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                   dtype=np.uint64)  # fmt: skip


PERM_B = np.array([0x2545F4914F6CDD1D, 0x9FB21C651E98DF25, 0x60642E2A34326F15, 0x1D8E4E27C47D124F,
                    0x5851F42D4C957F2D, 0x14057B7EF767814F, 0xDA942042E4DD58B5, 0x3C6EF372FE94F82B],
                   dtype=np.uint64)  # fmt: skip


MAX_SKETCH = len(PERM_A)


# Per min-hash: a salt XORed into the minimum before it becomes a table key, so equal
# minima under two permutations give two keys. The segment keys of a w-shingle (w > 1)
# are chained with detemplate.engine.keys.mix64.
_SALT = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                  0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
                 dtype=np.uint64)  # fmt: skip


@dataclass(slots=True)
class PageletSketch:
    """One pagelet of a page as the pipeline sees it: a run of the page's blocks.

    order: position among the page's pagelets (document order).
    node: its element in the page's block tree (`PageTree` of the page-level walk).
    first, end: its blocks are the page's blocks[first:end].
    links: links in it.
    keys: its min-hash values as table keys (tagged).
    """

    order: int
    node: int
    first: int
    end: int
    links: int
    keys: tuple[int, ...] = ()


def block_pagelets(page: PageTree, k: int) -> list[tuple[int, int, int]]:
    """Definition 2 over the page's layout elements: (node, end node, links) of each pagelet
    with text, in document order; its elements are nodes[node:end node].

    The tree is the page-level walk's: every layout element (text-less ones too), each
    with the `<a>` elements directly in it. An element is split (its children are pushed,
    the paper's Figure 3) when a child element holds at least k links; the text directly
    in a split element (its own block) is a pagelet of its own, standing for the inline
    elements the paper would make pagelets there. Cost: O(elements), no second walk.
    """
    end = page.end
    if not end:
        return []
    links = page.links
    chars = page.chars
    acc = list(accumulate(links, initial=0))
    # An element is split when one of its children holds k links or more.
    split = bytearray(len(end))
    if acc[-1] >= k:
        for c, (parent, e) in enumerate(zip(page.parent, end, strict=True)):
            if parent >= 0 and acc[e] - acc[c] >= k:
                split[parent] = 1
    text = list(accumulate(chars, initial=0))
    out: list[tuple[int, int, int]] = []
    # Figure 3's queue, in document order: nodes are in preorder, so after a split node
    # come its children, and after a pagelet's subtree the next child of a split node.
    v = 0
    n = len(end)
    while v < n:
        if split[v]:
            if chars[v]:
                out.append((v, v + 1, links[v]))
            v += 1
        else:
            e = end[v]
            if text[e] > text[v]:
                out.append((v, e, acc[e] - acc[v]))
            v = e
    return out


def sketch_keys(keys: Sequence[int], starts: Sequence[int], size: int, w: int = 1) -> list[list[int]]:
    """Min-hash keys of groups of segment keys: group i is keys[starts[i]:starts[i+1]] (the
    last runs to the end; none is empty), in document order.

    Per group: `size` min-hashes of its w-shingles (w consecutive keys hashed in order; a
    group of w keys or fewer is one shingle; w = 1: the set of its keys), each XORed with
    its permutation's salt (equal minima under two permutations give two keys) and
    tagged as a pagelet key of the host's table (the tag replaces the low 20 bits: 44
    bits tell pagelet keys apart, against a few thousand of them per host).
    """
    # Array arithmetic wraps modulo 2^64 silently (no errstate needed, and it costs 5 us).
    hashes = np.array(keys, dtype=np.uint64)
    offsets = np.array(starts, dtype=np.intp)
    if w > 1:
        # Shingle i of a group starts at its key i; a short group has one shingle.
        lengths = np.diff(offsets, append=len(hashes))
        counts = np.maximum(lengths - (w - 1), 1)
        group_of = np.repeat(np.arange(len(counts)), counts)
        first = np.zeros(len(counts), dtype=np.intp)
        np.cumsum(counts[:-1], out=first[1:])
        pos = offsets[group_of] + (np.arange(len(group_of)) - first[group_of])
        span = lengths[group_of]
        sh = mix64(hashes[pos].copy())
        last = len(hashes) - 1
        for j in range(1, w):
            nxt = mix64(sh ^ hashes[np.minimum(pos + j, last)])
            sh = np.where(j < span, nxt, sh)
        hashes = sh
        offsets = first
    x = np.minimum.reduceat(hashes[:, None] * PERM_A[:size] + PERM_B[:size], offsets, axis=0)
    x ^= _SALT[:size]
    out: list[list[int]] = tag(x).tolist()
    return out


def page_sketches(page: PageTree, params: PageletParams) -> tuple[int, list[PageletSketch]]:
    """The page's pagelets: how many there are, and those fingerprinted (at least
    `min_links` links, at least `min_anchor_share` of their text in links) with the
    min-hash keys of their segment keys in document order (the segment table's notion of
    text identity: DOM path and text).

    Compiled (page/_walk.pyx `pagelet_rows`, `sketch_keys1`) where the page walk is and
    for w = 1; `page_sketches_python` is the reference, with the same results.
    """
    mod = pagelet_kernels()
    if mod is None or params.w != 1:
        return page_sketches_python(page, params)
    return compiled_sketches(mod, page, params)


def compiled_sketches(mod: Any, page: PageTree, params: PageletParams) -> tuple[int, list[PageletSketch]]:
    """`page_sketches` by the extension module `mod` (w = 1)."""
    count, rows, keys, starts = mod.pagelet_rows(
        page.parent, page.end, page.links, page.chars, page.achars, page.node_of_block, page.blocks,
        params.k, params.min_links, params.min_anchor_share,
    )
    if not rows:
        return count, []
    size = params.sketch_size
    sketches = mod.sketch_keys1(keys, starts, size, _PERM_A_BYTES, _PERM_B_BYTES, _SALT_BYTES, _KEEP, TAG)
    return count, [
        PageletSketch(order, node, first, end, links, row_keys)
        for (order, node, first, end, links), row_keys in zip(rows, sketches, strict=True)
    ]


def page_sketches_python(page: PageTree, params: PageletParams) -> tuple[int, list[PageletSketch]]:
    """`page_sketches` in Python and numpy (the reference)."""
    cut = block_pagelets(page, params.k)
    blocks = page.blocks
    nob = page.node_of_block
    min_links = params.min_links
    min_anchor = params.min_anchor_share
    out: list[PageletSketch] = []
    keys: list[int] = []
    starts: list[int] = []
    acc_a: list[int] = []
    acc_c: list[int] = []
    for i, (node, node_end, links) in enumerate(cut):
        if links < min_links:
            continue
        if min_anchor:
            if not acc_a:
                acc_a = list(accumulate(page.achars, initial=0))
                acc_c = list(accumulate(page.chars, initial=0))
            if acc_a[node_end] - acc_a[node] < min_anchor * (acc_c[node_end] - acc_c[node]):
                continue
        first = bisect_left(nob, node)
        end = bisect_left(nob, node_end, first)
        if first == end:
            continue  # text, but no segment to fingerprint (a link run's separators alone)
        out.append(PageletSketch(i, node, first, end, links))
        starts.append(len(keys))
        for block in blocks[first:end]:
            keys.extend([seg[0] for seg in block[1]])
    if out:
        for p, row in zip(out, sketch_keys(keys, starts, params.sketch_size, params.w), strict=True):
            p.keys = tuple(row)
    return len(cut), out


_PERM_A_BYTES = PERM_A.astype("<u8").tobytes()
_PERM_B_BYTES = PERM_B.astype("<u8").tobytes()
_SALT_BYTES = _SALT.astype("<u8").tobytes()
_KEEP = ((1 << 64) - 1) ^ TAG_MASK


def checked_kernels(mod: Any) -> Any:
    """`mod` when its pagelet functions give `page_sketches_python`'s results on the probe
    page (page/compiled.py PROBE_PAGE, a few parameter sets), else None."""
    return compiled.agreeing(mod, ("pagelet_rows", "sketch_keys1"), _sketches_agree)


def _sketches_agree(mod: Any) -> bool:
    probe = walk(LexborHTMLParser(compiled.PROBE_PAGE), SegmentParams())
    for params in (PageletParams(), PageletParams(k=1, sketch_size=8, min_links=0, min_anchor_share=0.0)):
        python = page_sketches_python(probe, params)
        if python[0] == 0 or not python[1]:
            return False  # the probe must exercise them
        if compiled_sketches(mod, probe, params) != python:
            return False
    return True


def pagelet_kernels() -> Any:
    """The extension module where its pagelet functions are in use, else None (then
    `page_sketches_python` runs); chosen once, on first use, with the page walk."""
    return compiled.checked(checked_kernels)


def pagelet_path(page: PageTree, p: PageletSketch) -> str:
    """DOM path of a pagelet's element: its first block's path, cut to the element's depth
    (a path component holding a "/", as a class name may in the class path modes, would
    shift the cut; tag names never do)."""
    path = page.blocks[p.first].path
    if page.node_of_block[p.first] == p.node:
        return path
    return "/".join(path.split("/")[: page.depth[p.node] + 1])


def pagelet_df(dfs: Sequence[int], quorum: int) -> int:
    """A pagelet's DF: the `quorum`-th highest DF of its min-hash keys (0 with fewer keys)."""
    if len(dfs) < quorum:
        return 0
    return sorted(dfs, reverse=True)[quorum - 1]


# -- the detector ---------------------------------------------------------------------------


@dataclass(slots=True)
class PageletPage:
    """The pagelet detector's state for one page."""

    tree: PageTree  # the page's block tree, the pagelets are cut from
    count: int  # pagelets of the page (with text)
    sketches: list[PageletSketch]  # those fingerprinted
    keys: list[int]  # their min-hash keys that are not segment keys of the page, sorted
    template: list[tuple[PageletSketch, int]] = field(default_factory=list)  # template ones and their DF (the vote)


class Pagelets:
    """The pagelets' part in a page's decision: min-hash keys in the host's table, and a vote
    that makes the blocks of template pagelets template outright (pagelets.enabled)."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        return params.pagelets.tracked

    def prepare(
        self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams
    ) -> PageletPage | None:
        pgp = params.pagelets
        if not pgp.tracked or page.cues is None:
            return None
        count, sketches = page_sketches(page.cues, pgp)
        keys = sorted({key for p in sketches for key in p.keys} - segments.distinct)
        return PageletPage(page.cues, count, sketches, keys)

    def vote(self, mine: PageletPage, dfs: list[int], ballot: Ballot) -> None:
        # Template pagelets: a pagelet's DF (the quorum-th highest DF of its min-hash keys)
        # reached the threshold. Only once the table judges at all (a warm host).
        if not mine.sketches or not ballot.warm:
            return
        params = ballot.params
        pgp = params.pagelets
        threshold = params.table.threshold(ballot.pages, pgp.template_df)
        pl_df = dict(zip(mine.keys, dfs, strict=True))
        quorum = pgp.quorum
        for p in mine.sketches:
            pdf = pagelet_df([pl_df.get(key, 0) for key in p.keys], quorum)
            if pdf >= threshold:
                mine.template.append((p, pdf))
        if pgp.enabled:
            for p, _ in mine.template:
                ballot.vote_outright(p.first, p.end)


PAGELETS = Pagelets()


def pagelet_report(mine: PageletPage, texts: list[str], max_listed: int) -> PageletReport:
    """What a template event says about the page's pagelets: how many it has, how many are
    template, and the first `max_listed` template ones."""
    listed = []
    for p, pdf in mine.template[:max_listed]:
        text = " ".join(texts[p.first : p.end])
        path = pagelet_path(mine.tree, p)
        listed.append(TemplatePagelet(p.keys[0], pdf, p.links, p.order, p.first, p.end, path, text))
    return PageletReport(mine.count, len(mine.template), tuple(listed))
