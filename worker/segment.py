"""HTML -> layout blocks -> text segments, with selectolax's lexbor parser directly.

This is the hot path: one iterative walk over the lexbor tree, no intermediate DOM.

A page is cut into blocks at layout elements (`SegmentParams.block_tags`); each block
holds the text segments directly under it, that is the visible text nodes whose
nearest layout ancestor it is. Tags, comments and processing instructions separate
text nodes, so each text node is one segment (Wang et al., section 2.1). A segment's
identity is its DOM path plus its whitespace-normalised text, hashed to 64 bits with
BLAKE2b (stable across processes and machines, unlike Python's `hash`).
"""

from __future__ import annotations

from hashlib import blake2b

from selectolax.lexbor import LexborHTMLParser, LexborNode

from worker.errors import BadInputError
from worker.model import Block, Segment
from worker.params import SegmentParams

_TEXT = "-text"


def segment_key(path: str, text: str) -> int:
    """Stable 64-bit key of a segment: BLAKE2b-64 of path, NUL, text."""
    return int.from_bytes(blake2b(f"{path}\x00{text}".encode(), digest_size=8).digest(), "little")


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


def parse(html: str, params: SegmentParams) -> LexborHTMLParser:
    check_html(html, params)
    return LexborHTMLParser(html)


def _component(node: LexborNode, tag: str, mode: str) -> str:
    """One element's name on a DOM path, as `SegmentParams.path_mode` asks."""
    if mode == "tag":
        return tag
    attrs = node.attrs
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


def segment_tree(
    tree: LexborHTMLParser, params: SegmentParams, text_nodes: list[tuple[LexborNode, int]] | None = None
) -> list[Block]:
    """Cut a parsed page into blocks of text segments, in document order.

    Blocks without any visible text are left out. When `text_nodes` is given, each
    segment's lexbor text node is appended to it with the segment's key (for --html).
    """
    root = tree.root
    if root is None:
        return []
    block_tags = params.block_tags
    skip_tags = params.skip_tags
    mode = params.path_mode
    max_nodes = params.max_nodes
    max_depth = params.max_depth

    # Each open block: [path, list of (key, text)]
    blocks: list[tuple[str, list[Segment]]] = []
    root_block: tuple[str, list[Segment]] = ("", [])
    blocks.append(root_block)
    # Stack of (node, parent path, enclosing block, depth); children pushed in reverse.
    stack: list[tuple[LexborNode, str, tuple[str, list[Segment]], int]] = [(root, "", root_block, 0)]
    pop = stack.pop
    push = stack.append
    nodes = 0
    while stack:
        node, ppath, block, depth = pop()
        nodes += 1
        if nodes > max_nodes:
            raise BadInputError("too_many_nodes", f"the DOM has more than {max_nodes:,} nodes")
        tag = node.tag
        if tag == _TEXT:
            raw = node.text_content
            if raw:
                text = " ".join(raw.split())
                if text:
                    key = int.from_bytes(blake2b(f"{ppath}\x00{text}".encode(), digest_size=8).digest(), "little")
                    block[1].append(Segment(key, text, len(text)))
                    if text_nodes is not None:
                        text_nodes.append((node, key))
            continue
        if tag is None or tag[0] == "-" or tag in skip_tags:
            continue  # comments, doctype, processing instructions, invisible subtrees
        if depth >= max_depth:
            raise BadInputError("too_deep", f"the DOM is nested deeper than {max_depth} elements")
        path = f"{ppath}/{_component(node, tag, mode)}" if ppath else _component(node, tag, mode)
        if tag in block_tags:
            block = (path, [])
            blocks.append(block)
        child = node.last_child
        depth += 1
        while child is not None:
            push((child, path, block, depth))
            child = child.prev
    return [Block(path, tuple(segs), i) for i, (path, segs) in enumerate(b for b in blocks if b[1])]


def segment_html(html: str, params: SegmentParams) -> tuple[LexborHTMLParser, list[Block]]:
    """Parse and segment one page; raises BadInputError for input that is not a usable page."""
    tree = parse(html, params)
    return tree, segment_tree(tree, params)
