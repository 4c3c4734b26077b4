"""Page-level templateness of layout blocks, from the page alone (Chakrabarti, Kumar, Punera, WWW 2007).

One walk over the lexbor tree cuts the page into exactly the blocks of
`detemplate.engine.page.guards.segment_tree` (same block tags, same segment keys, same order) and,
on the way, collects per-block cues: text and anchor text, links, segments, tag,
nesting, position in document order, class/id hints, and the semantic elements and
lists/forms that enclose the block. Text-less layout elements stay in the block tree
(they are the internal nodes the smoothing needs) but get no weight of their own.

A logistic-regression model (weights in worker/data/pagelevel.json, trained by
`detemplate train-pagelevel`, see detemplate.tools.train) scores every block's
probability of being template; the scores are then smoothed over the block tree by
the regularised isotonic regression of detemplate.engine.detectors.isotonic (a block is template
only if its child blocks are), and a block is template when its smoothed score is
above `PageLevelParams.threshold`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from selectolax.lexbor import LexborHTMLParser, LexborNode
from xxhash import xxh3_64_intdigest

from ..errors import BadInputError, ConfigError
from ..model import Block, Segment
from ..page.compiled import walker
from ..page.guards import _BLOCK, _INLINE, _MAX_STATIC_TAG_ID, _SKIP, _TEXT_ID, _component, block_links
from ..params import PageLevelParams, SegmentParams
from .isotonic import isotonic_tree

# Class/id words that mark template regions, and words that mark the main content.
TEMPLATE_WORDS = frozenset(
    """nav navbar navigation menu menubar submenu footer foot header head masthead topbar sidebar
    side aside breadcrumb breadcrumbs crumbs comment comments share sharing social related
    widget widgets ad ads advert advertisement banner promo sponsor sponsored subscribe
    newsletter signup login search cookie cookies copyright legal skip pagination pager pages
    tags tagcloud toolbar toc util utility links more popular trending recommended disclaimer""".split()
)
CONTENT_WORDS = frozenset(
    """content article post entry main body story text prose markdown blog single page document
    doc section itemprop articlebody""".split()
)
# Substrings that give the same hints inside compound names (mainContent, site-footer2).
_TEMPLATE_PARTS = (
    "footer",
    "header",
    "sidebar",
    "navbar",
    "breadcrumb",
    "comment",
    "social",
    "widget",
    "banner",
    "menu",
)
_CONTENT_PARTS = ("content", "article", "story", "entry")

# Flag bits: on the element itself, and inherited from any enclosing element.
F_THINT = 1  # template word in the element's own class/id
F_CHINT = 2  # content word in the element's own class/id
F_IN_THINT = 4  # some enclosing element has a template word
F_IN_CHINT = 8  # some enclosing element has a content word
F_IN_NAV = 16
F_IN_HEADER = 32
F_IN_FOOTER = 64
F_IN_ASIDE = 128
F_IN_FORM = 256
F_IN_LIST = 512
F_IN_MAIN = 1024  # main or article element
F_IN_TABLE = 2048
F_IN_A = 4096  # (walk only) inside an anchor
_INHERIT = {
    "nav": F_IN_NAV,
    "menu": F_IN_NAV,
    "header": F_IN_HEADER,
    "footer": F_IN_FOOTER,
    "aside": F_IN_ASIDE,
    "form": F_IN_FORM,
    "ul": F_IN_LIST,
    "ol": F_IN_LIST,
    "dl": F_IN_LIST,
    "main": F_IN_MAIN,
    "article": F_IN_MAIN,
    "table": F_IN_TABLE,
    "a": F_IN_A,
}
_FLAG_BITS: tuple[int, ...] = (
    F_THINT,
    F_CHINT,
    F_IN_THINT,
    F_IN_CHINT,
    F_IN_NAV,
    F_IN_HEADER,
    F_IN_FOOTER,
    F_IN_ASIDE,
    F_IN_FORM,
    F_IN_LIST,
    F_IN_MAIN,
    F_IN_TABLE,
)
# Tag groups of the one-hot tag features (other tags share the last column).
TAG_GROUPS = (
    ("p",),
    ("li",),
    ("h1", "h2", "h3", "h4", "h5", "h6"),
    ("td", "th", "tr", "caption"),
    ("div",),
    ("pre", "blockquote", "figure", "figcaption"),
    ("section", "article", "main"),
    ("nav", "header", "footer", "aside", "menu"),
    ("dl", "dt", "dd"),
    ("ul", "ol"),
    ("form", "fieldset", "legend"),
    ("html", "body", ""),
)
_FLAG_BITS_ARRAY = np.asarray(_FLAG_BITS, dtype=np.int64)
_TAG_INDEX = {tag: i for i, group in enumerate(TAG_GROUPS) for tag in group}
_N_TAGS = len(TAG_GROUPS) + 1
# Function words of the commonest web languages: running prose has many, menus few.
STOPWORDS = frozenset(
    """the a an of to in and or is are was were be been for on with at by from that this it as
    not but have has had will would can could its their his her they we you he she which who
    what when there than then also more about into after over der die das und ist nicht ein
    eine zu den mit von auf für sich des dem im le la les et est une des du dans pour pas que
    qui sur au avec il elle el los las y en es por con para una del se lo como más il di che è
    per non sono della""".split()
)
_COPYRIGHT_MARKS = ("©", "copyright", "all rights reserved")


def _hint_re(words: frozenset[str], parts: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(sorted(words, key=len, reverse=True))
    return re.compile(f"(?<![a-z0-9])(?:{alts})(?![a-z0-9])|" + "|".join(parts))


_TEMPLATE_RE = _hint_re(TEMPLATE_WORDS, _TEMPLATE_PARTS)
_CONTENT_RE = _hint_re(CONTENT_WORDS, _CONTENT_PARTS)


_HINTS: dict[tuple[str, str], int] = {}  # (class, id) -> hint bits, a plain dict: faster than lru_cache
_HINTS_MAX = 1 << 17
# Only short pairs are cached, so the cache is bounded in bytes too (about 40 MB at most):
# a hostile page's megabyte-long class attributes would otherwise stay in it.
_HINTS_MAX_CHARS = 256


def _hints(pair: tuple[str, str]) -> int:
    """Hint flag bits of one element's class and id: whole words, or telling parts of words."""
    text = f"{pair[0]} {pair[1]}".lower()
    flags = F_THINT if _TEMPLATE_RE.search(text) else 0
    if _CONTENT_RE.search(text):
        flags |= F_CHINT
    if len(text) <= _HINTS_MAX_CHARS:
        if len(_HINTS) >= _HINTS_MAX:
            _HINTS.clear()
        _HINTS[pair] = flags
    return flags


@lru_cache(maxsize=16)
def _walk_kinds(block_tags: frozenset[str], skip_tags: frozenset[str]) -> dict[int, tuple[str, int, int]]:
    """A cache tag_id -> (name, kind, inherited flag bits), as detemplate.engine.page.guards keeps one."""
    return {}


@dataclass(slots=True)
class PageTree:
    """A page's blocks (as `segment_tree` cuts them) and its block tree with raw cues.

    blocks: the text-bearing blocks, exactly those of `detemplate.engine.page.guards.segment_tree`.
    node_of_block: for each of `blocks`, its node in the tree below.
    The per-node lists describe every layout element that has children (node 0 is the
    page root), text-less ones included:
    parent: parent node (-1 for the root); parents come before children.
    tag: element name ("" for the root).
    depth: element nesting depth.
    start: characters of page text before the node's first character.
    chars / achars / segs / links: the node's direct text length, the part of it inside
        links, its text segments, and the links directly under it.
    flags: F_* bits.
    text: the node's direct text (segments joined by spaces).
    end: one past the node's last descendant (its subtree is nodes [i, end[i])).
    stats: the compiled walk's text statistics of each node's text (an array of doubles,
        TEXT_COLUMNS per node), or None: `text_stats` computes them from `text`.
    columns: the compiled walk's numeric columns (doubles, NODE_COLUMNS per node), or
        None: `node_columns` makes them from the lists.
    """

    blocks: list[Block]
    node_of_block: list[int]
    parent: list[int]
    tag: list[str]
    depth: list[int]
    start: list[int]
    chars: list[int]
    achars: list[int]
    segs: list[int]
    links: list[int]
    flags: list[int]
    text: list[str]
    end: list[int]
    stats: Any = None  # the compiled walk's text statistics (TEXT_COLUMNS per node), else computed here
    columns: Any = None  # the compiled walk's NODE_COLUMNS per node, else made from the lists


def walk(
    tree: LexborHTMLParser, params: SegmentParams, text_nodes: list[tuple[LexborNode, int]] | None = None
) -> PageTree:
    """One pass over the parsed page: the blocks of `segment_tree` plus the block tree and cues.

    The compiled walk (detemplate.engine.page.compiled) when it is available, else `walk_python`: the
    same result either way (tests/test_fastwalk.py).
    """
    if text_nodes is None and params.path_mode == "tag":
        fast = walker(params.block_tags, params.skip_tags)
        if fast is not None:
            root = tree.root
            if root is None:
                return PageTree([], [], [], [], [], [], [], [], [], [], [], [], [])
            return PageTree(*fast.walk(root.mem_id, params.max_depth, params.max_nodes, True))
    return walk_python(tree, params, text_nodes)


def walk_python(
    tree: LexborHTMLParser, params: SegmentParams, text_nodes: list[tuple[LexborNode, int]] | None = None
) -> PageTree:
    """The walk in Python, over selectolax's nodes: the reference for the compiled one.

    The walk is `detemplate.engine.page.guards.segment_tree`'s, step for step (same tags, paths, keys,
    limits and errors), with the cues collected on the way; tests/test_pagelevel.py
    checks that both cut the same blocks.
    """
    root = tree.root
    if root is None:
        return PageTree([], [], [], [], [], [], [], [], [], [], [], [], [])
    block_tags = params.block_tags
    skip_tags = params.skip_tags
    kinds = _walk_kinds(block_tags, skip_tags)
    mode = params.path_mode
    by_tag = mode == "tag"
    with_id = mode == "tag_id_class"
    max_depth = params.max_depth
    budget = params.max_nodes
    total = 0  # page text characters so far
    hints_get = _HINTS.get
    new_segment = tuple.__new__  # Segment(...) without the NamedTuple's Python-level __new__
    hash64 = xxh3_64_intdigest

    # Per node: the fixed facts in one tuple (path, parent, tag, depth, start, flags),
    # the counters in lists.
    facts: list[tuple[str, int, str, int, int, int]] = []
    segments: list[list[Segment]] = []
    chars: list[int] = []
    achars: list[int] = []
    links: list[int] = []
    ends: list[int] = []  # one past the last node of each node's subtree
    anchors: list[tuple[int, str]] = []  # (block, href), as segment_tree collects them

    def visit(node: LexborNode, path: str, blk: int, depth: int, inh: int) -> None:
        nonlocal budget, total
        if depth >= max_depth:
            raise BadInputError("too_deep", f"the DOM is nested deeper than {max_depth} elements")
        append = segments[blk].append
        # The text and links directly in `blk` met in this call, added to its counters at the end.
        own_chars = 0
        own_achars = 0
        own_links = 0
        for child in node.iter(include_text=True, skip_empty=True):
            tid = child.tag_id
            if tid == _TEXT_ID:
                raw = child.text_content
                if raw:
                    text = " ".join(raw.split())
                    if text:
                        n = len(text)
                        key = hash64(f"{path}\x00{text}".encode())
                        append(new_segment(Segment, (key, text, n)))
                        total += n
                        own_chars += n
                        if text_nodes is not None:
                            text_nodes.append((child, key))
                continue
            info = kinds.get(tid)
            if info is None:
                tag = child.tag
                if tag is None or tag[0] == "-":
                    continue
                kind = _SKIP if tag in skip_tags else _BLOCK if tag in block_tags else _INLINE
                info = (tag, kind, _INHERIT.get(tag, 0))
                if tid < _MAX_STATIC_TAG_ID:
                    kinds[tid] = info
            tag, kind, bits = info
            if kind == _SKIP:
                continue
            budget -= 1
            if budget < 0:
                raise BadInputError("too_many_nodes", f"the DOM has more than {params.max_nodes:,} elements")
            if bits & F_IN_A:
                own_links += 1
                href = child.attrs.get("href")
                if href:
                    anchors.append((blk, href))
            first = child.first_child
            if first is None:
                continue
            own = 0
            if by_tag:
                child_path = f"{path}/{tag}"
                if kind == _BLOCK:
                    # The attributes as a plain dict: lexbor's attrs.get raises and catches
                    # a KeyError for every missing one (measured 2x slower here).
                    attrs = child.attributes
                    bcls = attrs.get("class") or ""
                    bident = attrs.get("id") or ""
                    if bcls or bident:
                        pair = (bcls, bident)
                        own = hints_get(pair, -1)
                        if own < 0:
                            own = _hints(pair)
            else:
                attrs = child.attributes
                cls = attrs.get("class")
                ident = attrs.get("id") if (with_id or kind == _BLOCK) else None
                name = tag
                if with_id and ident:
                    name = f"{name}#{ident}"
                if cls:
                    parts = cls.split()
                    if parts:
                        parts.sort()
                        name = name + "." + ".".join(parts)
                child_path = f"{path}/{name}"
                # Class/id hints are read on layout elements only: inline ones rarely carry them.
                if kind == _BLOCK and (cls or ident):
                    pair = (cls or "", ident or "")
                    own = hints_get(pair, -1)
                    if own < 0:
                        own = _hints(pair)
            inner = inh | (own << 2) | bits
            if kind == _BLOCK:
                target = len(facts)
                facts.append((child_path, blk, tag, depth, total, own | (inh & ~F_IN_A)))
                chars.append(0)
                achars.append(0)
                links.append(0)
                ends.append(target + 1)
                if first.next is None and first.tag_id == _TEXT_ID:
                    raw = first.text_content
                    text = " ".join(raw.split()) if raw else ""
                    if text:
                        n = len(text)
                        key = hash64(f"{child_path}\x00{text}".encode())
                        segments.append([new_segment(Segment, (key, text, n))])
                        total += n
                        chars[target] = n
                        if inner & F_IN_A:
                            achars[target] = n
                        if text_nodes is not None:
                            text_nodes.append((first, key))
                    else:
                        segments.append([])
                    continue
                segments.append([])
                visit(child, child_path, target, depth + 1, inner)
                ends[target] = len(facts)
                continue
            if first.next is None and first.tag_id == _TEXT_ID:
                raw = first.text_content
                if raw:
                    text = " ".join(raw.split())
                    if text:
                        n = len(text)
                        key = hash64(f"{child_path}\x00{text}".encode())
                        append(new_segment(Segment, (key, text, n)))
                        total += n
                        own_chars += n
                        if inner & F_IN_A:
                            own_achars += n
                        if text_nodes is not None:
                            text_nodes.append((first, key))
                continue
            visit(child, child_path, blk, depth + 1, inner)
        if own_chars:
            chars[blk] += own_chars
            # Inside an anchor all of it is anchor text; else only the anchors' leaves.
            if inh & F_IN_A:
                achars[blk] += own_chars
            elif own_achars:
                achars[blk] += own_achars
        if own_links:
            links[blk] += own_links

    tag = root.tag or "html"
    root_path = tag if by_tag else _component(root, tag, mode)
    facts.append((root_path, -1, tag, 0, 0, 0))
    segments.append([])
    chars.append(0)
    achars.append(0)
    links.append(0)
    ends.append(1)
    visit(root, root_path, 0, 1, 0)
    ends[0] = len(facts)
    paths, parent, tags, depths, start, flags_of = (list(column) for column in zip(*facts, strict=True))
    return page_tree(paths, parent, tags, depths, start, flags_of, segments, chars, achars, links, ends, anchors)


def page_tree(
    paths: list[str],
    parent: list[int],
    tags: list[str],
    depths: list[int],
    start: list[int],
    flags_of: list[int],
    segments: list[list[Segment]],
    chars: list[int],
    achars: list[int],
    links: list[int],
    ends: list[int],
    anchors: list[tuple[int, str]],
) -> PageTree:
    """A PageTree from the walk's per-node columns (either walk's)."""
    new_segment = tuple.__new__  # Block(...) without the NamedTuple's Python-level __new__
    # Text-less layout elements stay in the tree: they weigh nothing, and pruning them
    # would cost a renumbering pass.
    blocks_out: list[Block] = []
    node_of_block = []
    texts = []
    hrefs = block_links([bool(segs) for segs in segments], parent, anchors) if anchors else {}
    for i, segs in enumerate(segments):
        if segs:
            node_of_block.append(i)
            blocks_out.append(new_segment(Block, (paths[i], segs, len(blocks_out), hrefs.get(i, ()))))
            texts.append(" ".join([seg[1] for seg in segs]))
        else:
            texts.append("")
    return PageTree(
        blocks=blocks_out,
        node_of_block=node_of_block,
        parent=parent,
        tag=tags,
        depth=depths,
        start=start,
        chars=chars,
        achars=achars,
        segs=[len(segs) for segs in segments],
        links=links,
        flags=flags_of,
        text=texts,
        end=ends,
    )


# -- features -------------------------------------------------------------------------

_CHAR_BINS = (0, 10, 30, 80, 200, 500)  # direct text length bins
_ANCHOR_BINS = (0.0, 0.3, 0.7, 0.95)  # anchor share bins
_POS_BINS = (0.0, 0.1, 0.3, 0.7, 0.9)  # position of the node's start in the page text
_CHAR_EDGES = np.asarray(_CHAR_BINS[1:], dtype=np.float64)
_ANCHOR_EDGES = np.asarray(_ANCHOR_BINS[1:], dtype=np.float64)
_POS_EDGES = np.asarray(_POS_BINS[1:], dtype=np.float64)

FEATURE_NAMES: tuple[str, ...] = (
    *("log_chars", "log_sub_chars", "anchor_share", "sub_anchor_share", "links_density", "sub_links_density"),
    *("log_avg_seg", "log_segs", "sub_share", "pos_start", "pos_end", "depth", "log_children", "has_text"),
    *("punct_share", "sentences", "log_words", "avg_word", "digit_share", "title_share", "copyright", "pipes"),
    *("parent_anchor_share", "parent_sub_share", "sib_anchor_share"),
    *tuple(f"tag_{g[0] or 'root'}" for g in TAG_GROUPS),
    *("tag_other",),
    *tuple(f"flag_{b}" for b in _FLAG_BITS),
    *tuple(f"chars_ge_{b}" for b in _CHAR_BINS[1:]),
    *tuple(f"anchor_ge_{b}" for b in _ANCHOR_BINS[1:]),
    *tuple(f"pos_ge_{b}" for b in _POS_BINS[1:]),
    *("anchor_x_short", "anchor_x_long", "thint_x_list"),
    *("in_main", "before_main", "after_main", "main_share", "main_is_root"),
    *("prev_log_chars", "prev_anchor", "next_log_chars", "next_anchor"),
    *("rel_chars", "main_depth_delta", "ends_sentence", "stopwords"),
    *("bias",),
)
N_FEATURES = len(FEATURE_NAMES)


def features(page: PageTree) -> NDArray[np.float64]:
    """The feature matrix of a page's block tree: one row per node, columns FEATURE_NAMES."""
    n = len(page.parent)
    X = np.zeros((n, N_FEATURES))
    if n == 0:
        return X
    cols = node_columns(page)
    parent = cols[:, 0].astype(np.intp)
    chars = cols[:, 1]
    achars = cols[:, 2]
    links = cols[:, 3]
    segs = cols[:, 4]
    first = np.arange(n)
    last = cols[:, 5].astype(np.intp)

    def subtree(values: NDArray[np.float64]) -> NDArray[np.float64]:
        acc = np.zeros(n + 1)
        np.cumsum(values, out=acc[1:])
        return acc[last] - acc[first]

    sub_chars = subtree(chars)
    sub_achars = subtree(achars)
    sub_links = subtree(links)
    children = np.bincount(parent[1:], minlength=n).astype(np.float64)
    total = max(sub_chars[0], 1.0)
    start = cols[:, 6]
    depth = cols[:, 7]

    col = 0

    def put(values: NDArray[np.float64] | float) -> None:
        nonlocal col
        X[:, col] = values
        col += 1

    anchor = np.where(chars > 0, achars / np.maximum(chars, 1.0), 0.0)
    sub_anchor = sub_achars / np.maximum(sub_chars, 1.0)
    put(np.log1p(chars))
    put(np.log1p(sub_chars))
    put(anchor)
    put(sub_anchor)
    put(links * 50.0 / (chars + 50.0))
    put(sub_links * 50.0 / (sub_chars + 50.0))
    put(np.log1p(chars / np.maximum(segs, 1.0)))
    put(np.log1p(segs))
    put(sub_chars / total)
    put(start / total)
    put((start + sub_chars) / total)
    put(np.minimum(depth, 40.0) / 40.0)
    put(np.log1p(children))
    put((chars > 0).astype(np.float64))

    # Statistics of the direct text (see text_stats).
    counts = text_stats(page)
    nonempty = chars > 0
    length = np.maximum(chars, 1.0)
    words = np.where(nonempty, counts[:, 0] + 1.0, 0.0)
    nw = np.maximum(words, 1.0)
    stats = np.zeros((n, 8))
    stats[:, 0] = counts[:, 1] / length
    stats[:, 1] = counts[:, 2] * 100.0 / (chars + 100.0)
    stats[:, 2] = np.log1p(words)
    stats[:, 3] = np.where(nonempty, np.minimum(chars / nw, 20.0) / 10.0, 0.0)
    stats[:, 4] = counts[:, 3] / length
    stats[:, 5] = counts[:, 4] / nw
    stats[:, 6] = counts[:, 8]
    stats[:, 7] = counts[:, 5] / nw
    X[:, col : col + 8] = stats
    col += 8

    # Context: the parent's link density and weight, the siblings' link density.
    par = np.maximum(parent, 0)
    put(np.where(parent >= 0, sub_anchor[par], 0.0))
    put(np.where(parent >= 0, sub_chars[par] / total, 1.0))
    sib_chars = np.bincount(par[1:], weights=sub_chars[1:], minlength=n)
    sib_achars = np.bincount(par[1:], weights=sub_achars[1:], minlength=n)
    put(np.where(parent >= 0, (sib_achars[par] - sub_achars) / np.maximum(sib_chars[par] - sub_chars, 1.0), 0.0))

    tag_cols = cols[:, 9].astype(np.intp)
    X[np.arange(n), col + tag_cols] = 1.0
    col += _N_TAGS
    flags = cols[:, 8].astype(np.int64)
    pos = start / total
    width = len(_FLAG_BITS_ARRAY)
    X[:, col : col + width] = (flags[:, None] & _FLAG_BITS_ARRAY[None, :]) != 0
    col += width
    for values, edges in ((chars, _CHAR_EDGES), (sub_anchor, _ANCHOR_EDGES), (pos, _POS_EDGES)):
        width = len(edges)
        X[:, col : col + width] = values[:, None] >= edges[None, :]
        col += width
    put(sub_anchor * (sub_chars < 80))
    put(sub_anchor * (sub_chars >= 80))
    put((((flags & (F_THINT | F_IN_THINT)) != 0) & ((flags & F_IN_LIST) != 0)).astype(np.float64))

    # The main-content candidate, readability-style: text blocks with plain (non-link)
    # text vote for their parent and, half, for their grandparent; the node with most
    # votes holds the main content.
    plain = chars - achars
    vote = np.where(
        (plain >= 25) & (anchor < 0.5),
        1.0 + np.minimum(plain / 100.0, 3.0) + 0.5 * np.minimum(counts[:, 6], 5),
        0.0,
    )
    gpar = par[par]
    score = np.bincount(par[1:], weights=vote[1:], minlength=n) + np.bincount(
        gpar[1:], weights=0.5 * vote[1:], minlength=n
    )
    top = int(np.argmax(score)) if score.max() > 0 else 0
    in_main = (first >= top) & (first < last[top])
    main_start = start[top]
    main_end = start[top] + sub_chars[top]
    put(in_main.astype(np.float64))
    put(((start + sub_chars <= main_start) & ~in_main).astype(np.float64))
    put(((start >= main_end) & ~in_main).astype(np.float64))
    put(sub_chars[top] / total)
    put(1.0 if top == 0 else 0.0)

    # Neighbouring text blocks in document order.
    text_nodes = np.flatnonzero(chars > 0)
    prev_c = np.zeros(n)
    prev_a = np.zeros(n)
    next_c = np.zeros(n)
    next_a = np.zeros(n)
    if len(text_nodes) > 1:
        prev_c[text_nodes[1:]] = np.log1p(chars[text_nodes[:-1]])
        prev_a[text_nodes[1:]] = anchor[text_nodes[:-1]]
        next_c[text_nodes[:-1]] = np.log1p(chars[text_nodes[1:]])
        next_a[text_nodes[:-1]] = anchor[text_nodes[1:]]
    put(prev_c)
    put(prev_a)
    put(next_c)
    put(next_a)
    put(plain / max(float(plain.max()), 1.0))
    put(np.where(in_main, np.minimum(depth - depth[top], 10.0) / 10.0, -1.0))
    put(counts[:, 7])
    put(counts[:, 9] / nw)
    put(1.0)
    assert col == N_FEATURES
    return X


# The numeric columns of each node, as features reads them.
NODE_COLUMNS = ("parent", "chars", "achars", "links", "segs", "end", "start", "depth", "flags", "tag_group")


def node_columns(page: PageTree) -> NDArray[np.float64]:
    """NODE_COLUMNS for every node (rows): the compiled walk's array, or made from the lists."""
    n = len(page.parent)
    if page.columns is not None:
        return np.frombuffer(page.columns, dtype=np.float64).reshape(n, len(NODE_COLUMNS))
    groups = [_TAG_INDEX.get(t, _N_TAGS - 1) for t in page.tag]
    lists = (page.parent, page.chars, page.achars, page.links, page.segs, page.end, page.start, page.depth,
             page.flags, groups)
    return np.array(lists, dtype=np.float64).T


# The text statistics of each node: what the walk (compiled) or _TextStats (Python) counts.
TEXT_COLUMNS = ("spaces", "punct", "sentence_ends", "digits", "capitals", "pipes", "commas", "ends_sentence",
                "copyright", "stopwords")


def text_stats(page: PageTree) -> NDArray[np.float64]:
    """TEXT_COLUMNS for every node of the page (rows), from its direct text."""
    n = len(page.parent)
    if page.stats is not None:
        return np.frombuffer(page.stats, dtype=np.float64).reshape(n, len(TEXT_COLUMNS))
    text = _TextStats(page.text)
    out = np.empty((n, len(TEXT_COLUMNS)))
    for col, bit in enumerate((_SPACE, _PUNCT_BIT, _SENT_BIT, _DIGIT, _UPPER, _PIPE, _COMMA)):
        out[:, col] = text.count(bit)
    out[:, 7] = text.ends_sentence()
    lowered = text.big.lower()
    out[:, 8] = text.copyright(lowered)
    words = np.where(np.asarray(page.chars) > 0, out[:, 0] + 1.0, 0.0)
    out[:, 9] = text.stopwords(lowered, words)
    return out


# Character classes (bits); _BOUNDARY (space or the newline between nodes) is not counted.
_SPACE, _PUNCT_BIT, _SENT_BIT, _DIGIT, _UPPER, _PIPE, _COMMA, _BOUNDARY = (1 << k for k in range(8))
CLOSERS = '.!?"”)'  # a text ending in one of these ends a sentence
_CLOSER_CODES = np.asarray([ord(c) for c in CLOSERS], dtype=np.uint32)
_LUT_SIZE = 0x2100  # character classes of the first code points; the others have none


def _char_classes() -> NDArray[np.uint8]:
    lut = np.zeros(_LUT_SIZE + 1, dtype=np.uint8)
    for chars, bit in (
        (" ", _SPACE),
        (" \n", _BOUNDARY),
        (".,;:!?", _PUNCT_BIT),
        (".!?", _SENT_BIT),
        ("0123456789", _DIGIT),
        ("|·»", _PIPE),
        (",", _COMMA),
    ):
        for ch in chars:
            lut[ord(ch)] |= bit
    for code in range(_LUT_SIZE):
        if chr(code).isupper():
            lut[code] |= _UPPER
    lut[_LUT_SIZE] = 0
    return lut


_LUT = _char_classes()


class _TextStats:
    """Character-class counts of every node's text, computed at once over the joined page text.

    Every node's text is followed by a newline in `big`, so node i owns the characters
    [starts[i], starts[i+1]) and one `reduceat` sums each class over all nodes.
    """

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        n = len(texts)
        lens = np.fromiter(map(len, texts), dtype=np.intp, count=n)
        self.big = "\n".join(texts) + "\n"
        codes = np.frombuffer(self.big.encode("utf-32-le"), dtype=np.uint32)
        cls = _LUT[np.minimum(codes, _LUT_SIZE)]
        self.codes = codes
        self.starts = np.zeros(n, dtype=np.intp)
        np.cumsum(lens[:-1] + 1, out=self.starts[1:])
        self.stops = self.starts + lens
        self.lens = lens
        # Sentence ends need a boundary after them, capitals one before them.
        boundary = (cls & _BOUNDARY) != 0
        bits = cls & np.uint8(0xFF ^ (_SENT_BIT | _UPPER))
        sent = (cls & _SENT_BIT) != 0
        sent[:-1] &= boundary[1:]
        upper = (cls & _UPPER) != 0
        upper[1:] &= boundary[:-1]
        bits |= sent.astype(np.uint8) * np.uint8(_SENT_BIT)
        bits |= upper.astype(np.uint8) * np.uint8(_UPPER)
        unpacked = np.unpackbits(bits[:, None], axis=1, bitorder="little")
        self.counts = np.add.reduceat(unpacked, self.starts, axis=0, dtype=np.int32).astype(np.float64)

    def count(self, bit: int) -> NDArray[np.float64]:
        return self.counts[:, bit.bit_length() - 1]

    def ends_sentence(self) -> NDArray[np.float64]:
        out = np.zeros(len(self.lens))
        some = self.lens > 0
        out[some] = np.isin(self.codes[self.stops[some] - 1], _CLOSER_CODES)
        return out

    def copyright(self, lowered: str) -> NDArray[np.float64]:
        """Nodes with a copyright notice (plain substring search: regexes are slower here)."""
        out = np.zeros(len(self.lens))
        if len(lowered) != len(self.big):  # lower() changed lengths: positions would not align
            for i, text in enumerate(self.texts):
                lowered_text = text.lower()
                out[i] = any(mark in lowered_text for mark in _COPYRIGHT_MARKS)
            return out
        hits = []
        for needle in _COPYRIGHT_MARKS:
            at = lowered.find(needle)
            while at >= 0:
                hits.append(at)
                at = lowered.find(needle, at + 1)
        if hits:
            out[np.searchsorted(self.starts, hits, side="right") - 1] = 1.0
        return out

    def stopwords(self, lowered: str, words: NDArray[np.float64]) -> NDArray[np.float64]:
        """Function words per node (texts are single-space separated, so words align)."""
        tokens = lowered.split()
        counts = words.astype(np.intp)
        if len(tokens) != int(counts.sum()):  # lower() met a character it splits: count slowly
            return np.array([sum(map(STOPWORDS.__contains__, t.lower().split())) for t in self.texts], dtype=np.float64)
        hit = np.fromiter(map(STOPWORDS.__contains__, tokens), dtype=np.float64, count=len(tokens))
        owner = np.repeat(np.arange(len(counts)), counts)
        return np.bincount(owner, weights=hit, minlength=len(counts)).astype(np.float64)


# -- the model --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PageLevelModel:
    """Logistic-regression weights over FEATURE_NAMES, with the feature scaling they expect."""

    names: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]

    def scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        # ((X - mean) / scale) @ coef, with the standardisation folded into the weights.
        weights = self.coef / self.scale
        z = X @ weights - float(self.mean @ weights)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "detemplate-pagelevel-1",
            "features": list(self.names),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "coef": [round(float(v), 6) for v in self.coef],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PageLevelModel:
        if data.get("format") != "detemplate-pagelevel-1":
            raise ConfigError(f"not a page-level model (format {data.get('format')!r})")
        names = tuple(str(v) for v in data["features"])
        if names != FEATURE_NAMES:
            raise ConfigError("the page-level model was trained on other features than this version computes")
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "coef")]
        if any(a.shape != (N_FEATURES,) for a in arrays):
            raise ConfigError("page-level model arrays have the wrong length")
        return cls(names, arrays[0], arrays[1], arrays[2])


@lru_cache(maxsize=8)
def load_model(path: str = "") -> PageLevelModel:
    """The model in the file `path`, or the one shipped in worker/data/pagelevel.json (cached)."""
    try:
        if not path:
            shipped = resources.files("detemplate.engine.detectors").joinpath("data/pagelevel.json")
            text = shipped.read_text(encoding="utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        return PageLevelModel.from_json(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the page-level model {path or '(shipped)'}: {exc}") from exc


def node_weights(page: PageTree, weighting: str) -> NDArray[np.float64]:
    """Each node's weight in the smoothing loss: text-less nodes weigh nothing."""
    chars = np.asarray(page.chars, dtype=np.float64)
    if weighting == "log":
        return np.log1p(chars)
    if weighting == "sqrt":
        return np.sqrt(chars)
    if weighting == "chars":
        return chars
    return (chars > 0).astype(np.float64)


def block_scores(
    page: PageTree,
    model: PageLevelModel,
    smoothing: float,
    weighting: str = "unit",
    max_values: int = 64,
    max_smooth_nodes: int = 5000,
) -> NDArray[np.float64]:
    """Templateness of each of `page.blocks`: classifier scores, smoothed over the tree."""
    if not page.blocks:
        return np.zeros(0)
    x = model.scores(features(page))
    if smoothing > 0.0 and len(x) <= max_smooth_nodes:
        x, _ = isotonic_tree(x, page.parent, smoothing, node_weights(page, weighting), max_values)
    nodes = np.asarray(page.node_of_block, dtype=np.intp)
    scores = x[nodes]
    # The block with the most non-link text is the page's main text: a page-level model
    # that calls it template has misread the page (measured: this keeps articles written
    # in an unusual style), so it is never template by the model.
    plain = np.asarray(page.chars, dtype=np.float64)[nodes] - np.asarray(page.achars, dtype=np.float64)[nodes]
    scores[int(np.argmax(plain))] = 0.0
    return scores


def score_page(
    tree: LexborHTMLParser,
    params: SegmentParams,
    plp: PageLevelParams,
    text_nodes: list[tuple[LexborNode, int]] | None = None,
) -> tuple[list[Block], list[str], NDArray[np.float64]]:
    """The page's blocks (as `segment_tree` cuts them), each block's text (its segments
    joined by spaces, made by the walk) and each block's smoothed templateness."""
    page = walk(tree, params, text_nodes)
    scores = block_scores(
        page, load_model(plp.model), plp.smoothing, plp.weighting, plp.max_values, plp.max_smooth_nodes
    )
    texts = page.text
    return page.blocks, [texts[i] for i in page.node_of_block], scores


def overrule(
    scores: NDArray[np.float64],
    rows: list[tuple[str, str, int, int, float]],
    cold: bool,
    max_ratio: float,
    plp: PageLevelParams,
    early: bool = False,
) -> list[bool | None]:
    """Where the model's verdict replaces the table's: for each block, template (True),
    content (False) or None (the table decides).

    `rows` are the blocks' (path, text, chars, template chars, ratio) from the table. On a
    cold host the model judges every block (threshold); once the table has learned
    something it may only turn blocks the table keeps into template (warm_threshold, or
    threshold while the host is `early`: fewer pages than the table's template_df),
    as `combine` says. Guard: when the model would remove more than `max_removed_share`
    (`cold_max_removed_share` on a cold host) of the text it judges, the page is not
    one it knows (a page of nothing but link lists, such as a documentation index),
    and the table decides alone.
    """
    n = len(rows)
    if cold:
        judged = [True] * n
        threshold = plp.threshold
    elif plp.combine == "union":
        judged = [row[4] <= max_ratio for row in rows]
        threshold = plp.threshold if early else plp.warm_threshold
    elif plp.combine == "silent":
        judged = [row[3] == 0 for row in rows]
        threshold = plp.threshold if early else plp.warm_threshold
    else:
        return [None] * n
    out: list[bool | None] = [None] * n
    base = 0
    removed = 0
    for i, row in enumerate(rows):
        if judged[i]:
            template = bool(scores[i] > threshold)
            out[i] = template
            base += row[2]
            if template:
                removed += row[2]
    if base and removed > (plp.cold_max_removed_share if cold else plp.max_removed_share) * base:
        return [None] * n
    return out
