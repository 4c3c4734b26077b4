"""HTML -> layout blocks -> text segments, with selectolax's lexbor parser directly.

This is the hot path: one walk over the lexbor tree, no intermediate DOM; compiled
(worker/_walk.pyx, via detemplate.engine.page.compiled) or, as its reference and fallback,
`detemplate.engine.detectors.pagelevel.walk_python`.

A page is cut into blocks at layout elements (`SegmentParams.block_tags`); each block
holds the text segments directly under it, that is the visible text nodes whose
nearest layout ancestor it is. Tags, comments and processing instructions separate
text nodes, so each text node is one segment (Wang et al., section 2.1). A segment's
identity is its DOM path plus its whitespace-normalised text, hashed to 64 bits with
XXH3 (stable across processes and machines, unlike Python's `hash`; measured 5x faster
than BLAKE2b on segment-sized strings, and collisions are as rare: a host table holds
thousands of keys, so a 64-bit collision has odds near 1e-12).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode
from xxhash import xxh3_64_intdigest

from ..errors import BadInputError
from ..model import Block
from ..params import SegmentParams
from . import compiled as fastwalk
from .compiled import walker

_TEXT = "-text"


def segment_key(path: str, text: str) -> int:
    """Stable 64-bit key of a segment: XXH3-64 of the UTF-8 of path, NUL, text."""
    return xxh3_64_intdigest(f"{path}\x00{text}".encode())


def check_html(html: str, params: SegmentParams) -> None:
    """Reject input that is empty, oversized or clearly not HTML, before parsing."""
    if not html or html.isspace():
        raise BadInputError("empty", "the page has no content")
    if len(html) > params.max_page_bytes:
        # len() counts characters; a character is at least one byte, so this never
        # rejects a page that is within the byte limit.
        raise BadInputError(
            "too_large", f"the page has {len(html):,} characters, over the limit of {params.max_page_bytes:,} bytes"
        )
    head = html[:4096]
    if "<" not in head:
        raise BadInputError("not_html", "no markup in the first 4 KB of the page")
    if head.count("\x00") > 16:
        raise BadInputError("not_html", "the page is binary data (NUL bytes), not HTML")
    tags = _count_tags(html)
    if tags > _TAGS_PER_NODE * params.max_nodes:
        raise BadInputError(
            "too_many_nodes",
            f"the markup has {tags:,} tags, for at most {params.max_nodes:,} elements (estimated before parsing)",
        )
    if tags > _SCAN_OVER_TAGS:
        depth = _nesting(html)
        if depth > _SCAN_DEPTH_FACTOR * params.max_depth:
            raise BadInputError(
                "too_deep", f"the markup nests about {depth:,} elements deep (estimated before parsing)"
            )


# Limits checked on the markup itself, before lexbor builds a tree that the walk's
# limits would refuse anyway (measured, docs/measurements.md "Hostile pages"):
# - lexbor's tree builder takes time quadratic in the depth of open elements: 19,000
#   nested <div>s parse in over a second, 100,000 in 23 s. A page with more tags than
#   most pages (the top tenth) has its nesting estimated from the tags alone first;
#   below that many tags no nesting is deep enough to cost much.
# - a tree costs lexbor about 150 bytes an element: 10 MB of <br> (2.5 million
#   elements) took 4.5 s and 400 MB before the walk counted past max_nodes. An element
#   has at least one "<", an ordinary one two: a page with more than twice max_nodes
#   of them is refused unparsed.
_SCAN_OVER_TAGS = 2_000
_SCAN_DEPTH_FACTOR = 10  # the estimate overshoots on sloppy markup: only reject far past max_depth
_TAGS_PER_NODE = 2
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)")
# Elements that never stay open on the stack: void ones, those the parser closes by
# itself, and formatting ones (the adoption agency caps how many stay open).
_NOT_NESTING = frozenset(
    """area base br col embed hr img input link meta param source track wbr
    p li dt dd tr td th option optgroup rb rt rp
    a b big code em font i nobr s small strike strong tt u""".split()
)


def nesting_estimate(html: str) -> int:
    """The deepest nesting of elements the markup opens, counted from its tags alone.

    The reference for worker/_walk.pyx's `nesting_estimate`, which check_html uses when
    the extension is built (tests/test_fastwalk.py compares them).
    """
    depth = deepest = 0
    not_nesting = _NOT_NESTING
    for close, name in _TAG_RE.findall(html):
        name = name.lower()
        if name in not_nesting:
            continue
        if close:
            if depth:
                depth -= 1
        else:
            depth += 1
            if depth > deepest:
                deepest = depth
    return deepest


_COMPILED = fastwalk.module()
if _COMPILED is not None:
    _count_tags = _COMPILED.count_tags

    def _nesting(html: str) -> int:
        return int(_COMPILED.nesting_estimate(html, _NOT_NESTING))

else:

    def _count_tags(html: str) -> int:
        return html.count("<")

    _nesting = nesting_estimate


def parse(html: str, params: SegmentParams) -> LexborHTMLParser:
    check_html(html, params)
    return LexborHTMLParser(html)


def _component(node: LexborNode, tag: str, mode: str) -> str:
    """One element's name on a DOM path, as `SegmentParams.path_mode` asks."""
    if mode == "tag":
        return tag
    attrs = node.attributes  # a plain dict: lexbor's attrs.get raises a KeyError for a missing one
    cls = attrs.get("class")
    name = tag
    if mode == "tag_id_class":
        ident = attrs.get("id")
        if ident:
            name = f"{name}#{ident}"
    if cls:
        parts = cls.split()
        if parts:
            parts.sort()
            name = name + "." + ".".join(parts)
    return name


# lexbor node kinds by tag_id: text nodes are 2, comments 4, processing instructions 0.
_TEXT_ID = 2
_INLINE, _BLOCK, _SKIP = 0, 1, 2  # layout elements start a block; skipped ones hide their subtree
# Ids of the tags lexbor knows are small and the same in every document; a custom
# element gets a per-document id (a pointer), which must not be cached.
_MAX_STATIC_TAG_ID = 1 << 16


def segment_tree(
    tree: LexborHTMLParser, params: SegmentParams, text_nodes: list[tuple[LexborNode, int]] | None = None
) -> list[Block]:
    """Cut a parsed page into blocks of text segments, in document order.

    Blocks without any visible text are left out. Each block carries the hrefs of the
    `<a href>` elements in it (as written, in document order); those of a block without
    text go to its nearest enclosing block with text. When `text_nodes` is given, each
    segment's lexbor text node is appended to it with the segment's key (for --html).
    """
    root = tree.root
    if root is None:
        return []
    if text_nodes is None and params.path_mode == "tag":
        fast = walker(params.block_tags, params.skip_tags)
        if fast is not None:  # the compiled walk (detemplate.engine.page.compiled): the same blocks
            fast_blocks: list[Block] = fast.walk(root.mem_id, params.max_depth, params.max_nodes, False)
            return fast_blocks
    # The Python form of the walk is the page-level model's (same blocks, keys and
    # limits; tests/test_pagelevel.py and tests/test_fastwalk.py hold them equal): one
    # walk to keep, not two. It runs for --html, the class path modes, or no extension.
    from ..detectors.pagelevel import walk_python

    return walk_python(tree, params, text_nodes).blocks


def block_links(has_text: list[bool], parents: list[int], anchors: list[tuple[int, str]]) -> dict[int, list[str]]:
    """Block index -> its hrefs: a textless block's go to its nearest enclosing block with text.

    `parents[i] < i` (blocks are numbered in document order, parents first); anchors in
    document order, so each block's hrefs stay in document order.
    """
    owner = list(range(len(has_text)))
    for i, text in enumerate(has_text):
        if not text:
            p = parents[i]
            owner[i] = owner[p] if p >= 0 else -1
    out: dict[int, list[str]] = {}
    for blk, href in anchors:
        o = owner[blk]
        if o >= 0:
            hrefs = out.get(o)
            if hrefs is None:
                out[o] = [href]
            else:
                hrefs.append(href)
    return out


def segment_html(html: str, params: SegmentParams) -> tuple[LexborHTMLParser, list[Block]]:
    """Parse and segment one page; raises BadInputError for input that is not a usable page."""
    tree = parse(html, params)
    return tree, segment_tree(tree, params)
