"""The host's layout and the page's new text: the layout detector.

The template is the site's layout around the content, and repetition is evidence of
template only where the layout is: text that repeats inside the part of a page that
carries the page's own content (member lists, inherited methods, code idioms, attribute
values) is content. This detector learns both sides from the host's pages, in the host's
own table, and hands them to the decision (engine/decision.py):

- the layout: each block's layout path (the tags and classes of the layout elements down
  to it, `keys.layout_key`) gets two tagged keys in the host's table: one counted on every
  page that has the path with text, one on every page where the path had new text (a
  segment the table did not hold). Their DF ratio is the path's novelty: a navigation
  bar's is 0, a paragraph's or a member list's near 1. The first over the host's pages
  is its presence: the layout is on (nearly) every page of a site, a section of repeated
  content (a class page's inherited methods) only on some. Both keys expire like segments.
  A host's first page counts neither (there, all text is new).
- the content region: the deepest layout element that holds `region.share` of the page's
  new plain text (`content_region`: characters of segments the table did not hold before
  this page, outside links). A page's region can be narrower than the part of the page
  that carries its content (new text concentrated in one method's documentation, the rest
  of the page repeated), so the host's own content container widens it: each of the
  region's enclosing elements (and itself) counts, by its container key (told from its
  earlier siblings' with the same key by its place among them: one of several member
  groups), on the host's pages; the page's region is its deepest enclosing element that
  enclosed the region on at least `region.container_share` of the host's pages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from ..keys import TAG, TAG_MASK
from ..page import compiled, walk
from ..page.tree import PageTree
from ..params import EngineParams, SegmentParams
from ..table import HostTable
from .base import Ballot, SegmentKeys, WalkedPage

_NEW_TEXT_SALT = 0x5BD1E9955BD1E995  # the "new text at this path" key of a layout key
_CONTAINER_SALT = 0x27D4EB2F165667C5  # the "enclosed the content region" key of a container key
_PAGES_KEY = 0x5851F42D4C957F2D  # counted on every page that counts containers: their denominator
_U64 = (1 << 64) - 1
_KEEP = _U64 ^ TAG_MASK


def tagged_key(value: int, salt: int = 0) -> int:
    """A 64-bit value (XORed with `salt`) as a tagged table key: `keys.tag(keys.mix64(...))`
    on one Python int (the tests hold the two equal)."""
    x = value ^ salt
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _U64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _U64
    x ^= x >> 31
    return (x & _KEEP) | TAG


# A host's pages repeat their layout paths and containers: their tagged keys are kept, bounded.
_TAGGED_MAX = 1 << 16
_PAGES = tagged_key(_PAGES_KEY)


@lru_cache(maxsize=_TAGGED_MAX)
def _path_keys(path: int) -> tuple[int, int]:
    """A layout key's (seen key, new-text key)."""
    return tagged_key(path), tagged_key(path, _NEW_TEXT_SALT)


@lru_cache(maxsize=_TAGGED_MAX)
def _container_key(container: int) -> int:
    """A container key's tagged "enclosed the content region" key."""
    return tagged_key(container, _CONTAINER_SALT)


def _nth_container(cues: PageTree, node: int) -> int:
    """The node's container key, told from its earlier siblings' with the same key by its
    place among them (the first keeps the key itself)."""
    container, end = cues.container, cues.end
    key = container[node]
    parent = cues.parent[node]
    if parent < 0:
        return key
    nth = 0
    child = parent + 1
    while child < node:
        if container[child] == key:
            nth += 1
        child = end[child]
    return key if not nth else (key ^ (nth * 0x9E3779B97F4A7C15)) & _U64


def content_region(cues: PageTree, novel: list[int], share: float) -> int:
    """The node of the deepest layout element holding at least `share` of the page's new
    plain text (the root when the page has none).

    Compiled where the page walk is (page/_walk.pyx `content_region`, the same doubles in
    the same order; probe-checked against `content_region_python`, the reference).
    """
    kernel = region_kernel()
    if kernel is None:
        return content_region_python(cues, novel, share)
    return int(kernel.content_region(cues.node_of_block, novel, cues.chars, cues.achars, cues.end, share))


def content_region_python(cues: PageTree, novel: list[int], share: float) -> int:
    """`content_region` in Python (the reference)."""
    n = len(cues.parent)
    weight = [0.0] * n  # each node's new plain text: new characters times the share outside links
    chars = cues.chars
    achars = cues.achars
    for node, new in zip(cues.node_of_block, novel, strict=True):
        if new:
            c = chars[node]
            if c:
                weight[node] = new * (1.0 - achars[node] / c)
    acc = [0.0, *accumulate(weight)]  # prefix sums in document order: a subtree is a contiguous range
    ends = cues.end
    whole = acc[ends[0]] - acc[0] if n else 0.0
    if whole <= 0.0:
        return 0
    floor = share * whole
    for node in range(n - 1, -1, -1):
        if acc[ends[node]] - acc[node] >= floor:
            return node
    return 0


@dataclass(slots=True)
class LayoutPage:
    """The layout detector's state for one page.

    keys: the tagged layout keys the page adds (sorted): "seen" for each distinct layout
        path with text, "new text" for those with new text; none on a host's first page.
    paths: each block's layout key (untagged).
    novel: each block's characters in segments the host's table did not hold.
    seen, fresh: the tagged keys of each distinct layout path (seen, new text), by path.
    chain: the page's content region and its enclosing elements (nodes, deepest first).
    enclosing: their tagged container keys, and `pages` the key that counts the pages.
    table: the host's table, for the "new text" DFs of the paths without new text now.
    """

    keys: list[int]
    paths: list[int]
    novel: list[int]
    seen: dict[int, int]
    fresh: dict[int, int]
    chain: list[int]
    enclosing: list[int]
    pages: int
    table: HostTable | None


class Layout:
    """The layout detector's part in a page's decision."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        return params.region.enabled

    def prepare(
        self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams
    ) -> LayoutPage | None:
        cues = page.cues
        if not params.region.enabled or cues is None:
            return None
        layout = cues.layout
        paths = [layout[node] for node in cues.node_of_block]
        novel = table.new_chars(page.blocks)
        if not table.pages:  # a host's first page: all its text is new (the table is empty), and nothing counts
            return LayoutPage([], paths, novel, {}, {}, [content_region(cues, novel, params.region.share)], [], 0, None)
        region = content_region(cues, novel, params.region.share)
        kernel = layout_kernel()
        if kernel is None:
            keys, seen, fresh, chain, enclosing = layout_keys_python(cues, paths, novel, region)
        else:  # the same keys, compiled (page/_walk.pyx layout_keys)
            keys, seen, fresh, chain, enclosing = kernel.layout_keys(
                paths, novel, cues.parent, cues.container, cues.end, region, _NEW_TEXT_SALT, _CONTAINER_SALT, _PAGES,
                _KEEP, TAG,
            )
        return LayoutPage(keys, paths, novel, seen, fresh, chain, enclosing, _PAGES, table)

    def vote(self, mine: LayoutPage, dfs: list[int], ballot: Ballot) -> None:
        ballot.novel = mine.novel
        table = mine.table
        if table is None:
            ballot.region = (mine.chain, [1.0])
            return
        kernel = layout_kernel()
        if kernel is None:
            shares, novelty, presence, pages = layout_shares_python(mine, dfs, table.df)
        else:  # the same shares, compiled (page/_walk.pyx layout_shares)
            shares, novelty, presence, pages = kernel.layout_shares(
                mine.keys, dfs, mine.paths, mine.seen, mine.fresh, mine.enclosing, mine.pages, table.df
            )
        ballot.region = (mine.chain, shares)
        ballot.novelty = novelty
        ballot.presence = presence
        ballot.layout_pages = pages


LAYOUT = Layout()


def layout_shares_python(
    mine: LayoutPage, dfs: list[int], table_df: Callable[[int], int]
) -> tuple[list[float], list[float], list[float], int]:
    """A warm page's layout evidence from the DFs of its keys (the reference for
    page/_walk.pyx `layout_shares`): the share of the host's pages on which each element of
    the region's chain enclosed the region, each block's path's novelty and presence, and
    the pages counted. `table_df`: the DF of a key the page did not add (a path without new
    text on this page: its new-text count so far)."""
    df = dict(zip(mine.keys, dfs, strict=True))
    pages = df[mine.pages]
    shares = [df[key] / pages for key in mine.enclosing]
    novelty: dict[int, float] = {}
    presence: dict[int, float] = {}
    for path, key in mine.seen.items():
        fresh = mine.fresh[path]
        new_df = df.get(fresh)
        if new_df is None:
            new_df = table_df(fresh)
        seen = df[key]
        novelty[path] = new_df / seen
        presence[path] = seen / pages
    return shares, [novelty[path] for path in mine.paths], [presence[path] for path in mine.paths], pages


def layout_keys_python(
    cues: PageTree, paths: list[int], novel: list[int], region: int
) -> tuple[list[int], dict[int, int], dict[int, int], list[int], list[int]]:
    """A warm page's layout keys (the reference for page/_walk.pyx `layout_keys`): the keys
    the page adds (sorted), each distinct layout path's seen and new-text keys, the region's
    chain of enclosing nodes (deepest first) and their container keys."""
    seen: dict[int, int] = {}
    fresh: dict[int, int] = {}
    for path in set(paths):
        seen[path], fresh[path] = _path_keys(path)
    fresh_paths = {path for path, n in zip(paths, novel, strict=True) if n}
    chain = [region]
    parent = cues.parent
    while parent[chain[-1]] >= 0:
        chain.append(parent[chain[-1]])
    enclosing = [_container_key(_nth_container(cues, node)) for node in chain]
    keys = sorted({*seen.values(), *[fresh[path] for path in fresh_paths], *enclosing, _PAGES})
    return keys, seen, fresh, chain, enclosing


def checked_region(mod: Any) -> Any:
    """`mod` when its `content_region` gives `content_region_python`'s node on the probe
    page (page/compiled.py PROBE_PAGE) for several shares of new text, else None."""
    return compiled.agreeing(mod, ("content_region",), _region_agrees)


def _region_agrees(mod: Any) -> bool:
    probe = walk(LexborHTMLParser(compiled.PROBE_PAGE), SegmentParams())
    chars = [sum([seg[2] for seg in block[1]]) for block in probe.blocks]
    return all(
        mod.content_region(probe.node_of_block, novel, probe.chars, probe.achars, probe.end, share)
        == content_region_python(probe, novel, share)
        for novel in (chars, [c if i % 3 else 0 for i, c in enumerate(chars)], chars[:-4] + [0] * 4, [0] * len(chars))
        for share in (0.0, 0.3, 0.5, 0.8, 0.95, 1.0)
    )


def region_kernel() -> Any:
    """The extension module where its `content_region` is in use, else None; chosen once,
    on first use, with the page walk."""
    return compiled.checked(checked_region)


def checked_layout(mod: Any) -> Any:
    """`mod` when its `layout_keys` and `layout_shares` give `layout_keys_python`'s and
    `layout_shares_python`'s results on the probe page (page/compiled.py PROBE_PAGE) for
    several sets of new text, regions and DFs, else None."""
    return compiled.agreeing(mod, ("layout_keys", "layout_shares"), _layout_agrees)


def _layout_agrees(mod: Any) -> bool:
    probe = walk(LexborHTMLParser(compiled.PROBE_PAGE), SegmentParams())
    paths = [probe.layout[node] for node in probe.node_of_block]
    chars = [sum([seg[2] for seg in block[1]]) for block in probe.blocks]
    for novel in (chars, [c if i % 3 else 0 for i, c in enumerate(chars)], [0] * len(chars)):
        for region in {0, *probe.node_of_block, len(probe.parent) - 1}:
            found = layout_keys_python(probe, paths, novel, region)
            if mod.layout_keys(
                paths, novel, probe.parent, probe.container, probe.end, region, _NEW_TEXT_SALT, _CONTAINER_SALT,
                _PAGES, _KEEP, TAG,
            ) != found:
                return False
            keys, seen, fresh, chain, enclosing = found
            mine = LayoutPage(keys, paths, novel, seen, fresh, chain, enclosing, _PAGES, None)
            dfs = [7 + i % 5 for i in range(len(keys))]  # each at most the pages' 7 + 4 ...
            dfs[keys.index(_PAGES)] = 11  # ... and the pages' count
            table_df = {key: i % 4 for i, key in enumerate(fresh.values())}.__getitem__
            if mod.layout_shares(keys, dfs, paths, seen, fresh, enclosing, _PAGES, table_df) != layout_shares_python(
                mine, dfs, table_df
            ):
                return False
    return True


def layout_kernel() -> Any:
    """The extension module where its `layout_keys` and `layout_shares` are in use, else
    None; chosen once, on first use, with the page walk."""
    return compiled.checked(checked_layout)
