"""What the page walk returns: the blocks and the block tree with its raw cues (`PageTree`),
and the numeric columns the page-level model reads from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..model import Block, Segment
from .cues import C_COMMA, C_DIGIT, C_PIPE, C_PUNCT, C_SENT, C_SPACE, C_UPPER, N_TAGS, TAG_INDEX, TextStats


@dataclass(slots=True)
class PageTree:
    """A page's blocks (as `segment_tree` cuts them) and its block tree with raw cues.

    blocks: the text-bearing blocks, exactly those `page.segment_tree` cuts.
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
    layout: the node's layout key (`keys.layout_key` of the tags and classes of the layout
        elements down to it, its own tag last): one element of the host's layout keeps
        one key from page to page.
    container: the node's container key (`keys.layout_key` of the same with its own classes).
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
    layout: list[int]
    container: list[int]
    stats: Any = None  # the compiled walk's text statistics (TEXT_COLUMNS per node), else computed here
    columns: Any = None  # the compiled walk's NODE_COLUMNS per node, else made from the lists
    # `main_block`'s answer: given by the compiled walk, else once asked (-1 before); the
    # model, the aside sections and a first page's index guard each ask for it.
    main: int = field(default=-1, compare=False, repr=False)
    # The page's distinct segment keys, sorted and as a set, where the compiled walk gave
    # them (engine/pipeline.py `page_keys`; None: made there from the blocks).
    keys: Any = field(default=None, compare=False, repr=False)



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
    layout: list[int],
    container: list[int],
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
        layout=layout,
        container=container,
    )



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


# The numeric columns of each node, as features reads them.
NODE_COLUMNS = ("parent", "chars", "achars", "links", "segs", "end", "start", "depth", "flags", "tag_group")


def node_columns(page: PageTree) -> NDArray[np.float64]:
    """NODE_COLUMNS for every node (rows): the compiled walk's array, or made from the lists."""
    n = len(page.parent)
    if page.columns is not None:
        return np.frombuffer(page.columns, dtype=np.float64).reshape(n, len(NODE_COLUMNS))
    groups = [TAG_INDEX.get(t, N_TAGS - 1) for t in page.tag]
    lists = (page.parent, page.chars, page.achars, page.links, page.segs, page.end, page.start, page.depth,
             page.flags, groups)
    return np.array(lists, dtype=np.float64).T


def main_block(page: PageTree) -> int:
    """The page's main text: the index in `page.blocks` of the block with the most plain
    (non-link) text, the first of equals (the page-level model never calls it template; a
    section around it is no comments or related section: engine/decision.py)."""
    if page.main < 0:
        nodes = np.asarray(page.node_of_block, dtype=np.intp)
        cols = node_columns(page)  # chars and achars as doubles (the compiled walk's array: no conversion)
        page.main = int(np.argmax(cols[nodes, 1] - cols[nodes, 2]))
    return page.main


# The text statistics of each node: what the walk (compiled) or TextStats (Python) counts.
TEXT_COLUMNS = ("spaces", "punct", "sentence_ends", "digits", "capitals", "pipes", "commas", "ends_sentence",
                "copyright", "stopwords")


def text_stats(page: PageTree) -> NDArray[np.float64]:
    """TEXT_COLUMNS for every node of the page (rows), from its direct text."""
    n = len(page.parent)
    if page.stats is not None:
        return np.frombuffer(page.stats, dtype=np.float64).reshape(n, len(TEXT_COLUMNS))
    text = TextStats(page.text)
    out = np.empty((n, len(TEXT_COLUMNS)))
    for col, bit in enumerate((C_SPACE, C_PUNCT, C_SENT, C_DIGIT, C_UPPER, C_PIPE, C_COMMA)):
        out[:, col] = text.count(bit)
    out[:, 7] = text.ends_sentence()
    lowered = text.big.lower()
    out[:, 8] = text.copyright(lowered)
    words = np.where(np.asarray(page.chars) > 0, out[:, 0] + 1.0, 0.0)
    out[:, 9] = text.stopwords(lowered, words)
    return out


