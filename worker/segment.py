"""HTML -> layout blocks -> text segments, with selectolax's lexbor parser directly.

This is the hot path: one iterative walk over the lexbor tree, no intermediate DOM.

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
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode
from xxhash import xxh3_64_intdigest

from worker import fastwalk
from worker.errors import BadInputError
from worker.fastwalk import walker
from worker.model import Block, Segment
from worker.params import SegmentParams

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
_INLINE, _BLOCK, _SKIP, _ANCHOR = 0, 1, 2, 3  # an anchor is inline; its href goes to its block
# Ids of the tags lexbor knows are small and the same in every document; a custom
# element gets a per-document id (a pointer), which must not be cached.
_MAX_STATIC_TAG_ID = 1 << 16


@lru_cache(maxsize=16)
def _tag_kinds(block_tags: frozenset[str], skip_tags: frozenset[str]) -> dict[int, tuple[str, int]]:
    """A cache tag_id -> (name, kind) for one pair of tag sets, filled as tags are met."""
    return {}


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
        if fast is not None:  # the compiled walk (worker.fastwalk): the same blocks
            fast_blocks: list[Block] = fast.walk(root.mem_id, params.max_depth, params.max_nodes, False)
            return fast_blocks
    block_tags = params.block_tags
    skip_tags = params.skip_tags
    kinds = _tag_kinds(block_tags, skip_tags)
    kinds_get = kinds.get
    mode = params.path_mode
    by_tag = mode == "tag"
    max_depth = params.max_depth
    budget = params.max_nodes  # elements left before the page is too big
    blocks: list[tuple[str, list[Segment]]] = []
    parents: list[int] = []  # each block's enclosing block (-1 for the root's)
    anchors: list[tuple[int, str]] = []  # (block, href) of every <a href>, in document order
    new_segment = tuple.__new__  # Segment(...), Block(...) without the NamedTuples' Python-level __new__
    hash64 = xxh3_64_intdigest

    # Measured: a recursive walk over lexbor's child iterator is 20-25% faster than an
    # explicit stack of (node, path, block) tuples; recursion is bounded by max_depth.
    # Dispatch is on the integer tag_id, cached per tag: cheaper than the tag name.
    def visit(node: LexborNode, path: str, segs: list[Segment], blk: int, depth: int) -> None:
        nonlocal budget
        if depth >= max_depth:
            raise BadInputError("too_deep", f"the DOM is nested deeper than {max_depth} elements")
        append = segs.append
        for child in node.iter(include_text=True, skip_empty=True):
            tid = child.tag_id
            if tid == _TEXT_ID:
                raw = child.text_content
                if raw:
                    text = " ".join(raw.split())
                    if text:
                        key = hash64(f"{path}\x00{text}".encode())
                        append(new_segment(Segment, (key, text, len(text))))
                        if text_nodes is not None:
                            text_nodes.append((child, key))
                continue
            info = kinds_get(tid)
            if info is None:
                tag = child.tag
                if tag is None or tag[0] == "-":
                    continue  # comments, processing instructions
                info = (tag, _kind(tag, block_tags, skip_tags))
                if tid < _MAX_STATIC_TAG_ID:
                    kinds[tid] = info
            tag, kind = info
            if kind == _INLINE:
                budget -= 1
                if budget < 0:
                    raise BadInputError("too_many_nodes", f"the DOM has more than {params.max_nodes:,} elements")
            elif kind == _SKIP:
                continue  # invisible subtrees: script, style, template...
            else:
                budget -= 1
                if budget < 0:
                    raise BadInputError("too_many_nodes", f"the DOM has more than {params.max_nodes:,} elements")
                if kind == _ANCHOR:
                    href = child.attrs.get("href")
                    if href:
                        anchors.append((blk, href))
            first = child.first_child
            if first is None:
                continue  # an empty element (img, br, input...) holds no text
            child_path = f"{path}/{tag}" if by_tag else f"{path}/{_component(child, tag, mode)}"
            if kind == _BLOCK:
                own: list[Segment] = []
                target_blk = len(blocks)
                blocks.append((child_path, own))
                parents.append(blk)
                target = own
            else:
                target = segs
                target_blk = blk
            if first.next is None and first.tag_id == _TEXT_ID:
                # The most common leaf, <a>text</a> or <li>text</li>: no call, no iterator.
                raw = first.text_content
                if raw:
                    text = " ".join(raw.split())
                    if text:
                        key = hash64(f"{child_path}\x00{text}".encode())
                        target.append(new_segment(Segment, (key, text, len(text))))
                        if text_nodes is not None:
                            text_nodes.append((first, key))
                continue
            visit(child, child_path, target, target_blk, depth + 1)

    tag = root.tag or "html"
    root_path = tag if by_tag else _component(root, tag, mode)
    root_segs: list[Segment] = []
    blocks.append((root_path, root_segs))
    parents.append(-1)
    visit(root, root_path, root_segs, 0, 1)
    return _blocks([b[0] for b in blocks], [b[1] for b in blocks], parents, anchors)


def _blocks(
    paths: list[str], segments: list[list[Segment]], parents: list[int], anchors: list[tuple[int, str]]
) -> list[Block]:
    """The text-bearing blocks, numbered in document order, each with its links."""
    new_block = tuple.__new__  # Block(...) without the NamedTuple's Python-level __new__
    if not anchors:
        return [
            new_block(Block, (path, segs, i, ()))
            for i, (path, segs) in enumerate((p, s) for p, s in zip(paths, segments, strict=True) if s)
        ]
    links = block_links([bool(segs) for segs in segments], parents, anchors)
    out: list[Block] = []
    for old, (path, segs) in enumerate(zip(paths, segments, strict=True)):
        if segs:
            out.append(new_block(Block, (path, segs, len(out), links.get(old, ()))))
    return out


def _kind(tag: str, block_tags: frozenset[str], skip_tags: frozenset[str]) -> int:
    if tag in skip_tags:
        return _SKIP
    if tag in block_tags:
        return _BLOCK
    return _ANCHOR if tag == "a" else _INLINE


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
