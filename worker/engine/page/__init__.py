"""The one page walk: HTML -> hostile-input guards -> lexbor tree -> blocks and cues.

    parse(html, params)           the guards (guards.py), then lexbor's parse
    parse_page(html, params)      the same for the compiled walk alone, into a pooled document
    walk(tree, params)            the blocks and the block tree with its cues (tree.PageTree)
    segment_tree(tree, params)    the blocks alone, which is all the segment table needs

Both run the compiled walk (compiled.py over _walk.pyx) when it is in use, else the
Python walk (python.py), with the same results. The choice is made once, at first use;
`configure` asks for the Python walk, `status` says which one runs. The cues the walk
collects are in cues.py, the segment key formula in engine/keys.py.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..model import Block
from ..params import SegmentParams
from .compiled import configure, status, walker
from .guards import check_html, parse, parse_page
from .python import walk_python
from .tree import PageTree

__all__ = [
    "PageTree", "check_html", "configure", "parse", "parse_page", "segment_tree", "status", "walk", "walk_python",
]


def walk(
    tree: LexborHTMLParser,
    params: SegmentParams,
    text_nodes: list[tuple[LexborNode, int]] | None = None,
    runs: list[int] | None = None,
) -> PageTree:
    """One pass over the parsed page: its blocks plus the block tree and cues.

    When `text_nodes` is given, each segment's lexbor text node is appended to it with the
    segment's key (for --html): the Python walk runs then, as for the class path modes.
    When `runs` is given (empty), it receives the segments' document order (`walk_python`).
    """
    if text_nodes is None and params.path_mode == "tag":
        fast = walker(params.block_tags, params.skip_tags)
        if fast is not None:
            root = tree.root
            if root is None:
                return PageTree([], [], [], [], [], [], [], [], [], [], [], [], [], [], [])
            return PageTree(*fast.walk(root.mem_id, params.max_depth, params.max_nodes, True, runs))
    return walk_python(tree, params, text_nodes, runs)


def segment_tree(
    tree: LexborHTMLParser,
    params: SegmentParams,
    text_nodes: list[tuple[LexborNode, int]] | None = None,
    runs: list[int] | None = None,
) -> list[Block]:
    """Cut a parsed page into blocks of text segments, in document order.

    Blocks without any visible text are left out. Each block carries the hrefs of the
    `<a href>` elements in it (as written, in document order); those of a block without
    text go to its nearest enclosing block with text. `text_nodes` and `runs` as for `walk`.
    """
    root = tree.root
    if root is None:
        return []
    if text_nodes is None and params.path_mode == "tag":
        fast = walker(params.block_tags, params.skip_tags)
        if fast is not None:
            fast_blocks: list[Block] = fast.walk(root.mem_id, params.max_depth, params.max_nodes, False, runs)
            return fast_blocks
    return walk_python(tree, params, text_nodes, runs).blocks
