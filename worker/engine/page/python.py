"""The page walk in Python, over selectolax's nodes: the reference, and the fallback where the
compiled walk (page/_walk.pyx) is not in use.

A page is cut into blocks at layout elements (`SegmentParams.block_tags`). A block's text
segments are its lines of text: the runs of visible text directly under it (not under a
nested layout element) between the elements that end a line (`cues.LINE_TAGS`: p, h1-h6,
pre, br...). Inline elements (a, span, code, em...) do not cut a segment: a highlighted
code line or a sentence with a link is one piece of evidence, not one per token; its text
nodes are joined as they stand, with a space between two elements' words (`join_pieces`). One
exception keeps menus fine-grained: a run whose text outside links has no letter or digit
and that holds two or more links ("Home | About | Blog") is one segment a link. A
segment's key is `keys.segment_key` of its block's DOM path (plus the line element, as
in ".../div/p") and its whitespace-normalised text.

On the way the walk collects the cues of every layout element (text and anchor text,
links, segments, tag, nesting, position, class/id hints and the elements that enclose it)
and its layout path (`keys.layout_key`): the block tree of `tree.PageTree`. Text-less
layout elements stay in the tree (they are the internal nodes the page-level smoothing
needs) but get no block of their own.
"""

from __future__ import annotations

from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..errors import BadInputError
from ..keys import layout_key, segment_key
from ..model import Segment
from ..params import SegmentParams
from .cues import F_IN_A, GLUE_TAG, HINTS, INHERIT, LAYOUT_CLASSES, LINE_TAGS, has_word, hints, layout_classes
from .tree import PageTree, page_tree

# lexbor node kinds by tag_id: text nodes are 2, comments 4, processing instructions 0.
TEXT_ID = 2
INLINE, BLOCK, SKIP = 0, 1, 2  # layout elements start a block; skipped ones hide their subtree
# Ids of the tags lexbor knows are small and the same in every document; a custom
# element gets a per-document id (a pointer), which must not be cached.
MAX_STATIC_TAG_ID = 1 << 16


def path_component(node: LexborNode, tag: str, mode: str) -> str:
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


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def join_pieces(parts: list[str]) -> str:
    """The text of a run's text nodes: joined as they stand, but with a space where one node
    ends in a word character and the next begins with one (`Title<span>May 24</span>`,
    `<td>1</td>` line numbers beside code: two elements' words, which a reader and a
    tokenizer see apart, as a browser shows them whenever the page's style parts them);
    an empty part is a <wbr> (`DAP_<wbr>EXECUTE`: one word), a comment or a skipped element
    (a script), across which nothing is added: the text on either side is one."""
    if len(parts) == 1:
        return parts[0]
    out = [parts[0]]
    prev = parts[0]
    glue = False
    for part in parts[1:]:
        if not part:
            glue = True
            continue
        if not glue and prev and _word_char(prev[-1]) and _word_char(part[0]):
            out.append(" ")
        out.append(part)
        prev = part
        glue = False
    return "".join(out)


@lru_cache(maxsize=16)
def _kinds(block_tags: frozenset[str], skip_tags: frozenset[str]) -> dict[int, tuple[str, int, int]]:
    """A cache tag_id -> (name, kind, inherited flag bits), one per pair of tag sets, filled by the walk."""
    return {}


def walk_python(
    tree: LexborHTMLParser,
    params: SegmentParams,
    text_nodes: list[tuple[LexborNode, int]] | None = None,
    runs: list[int] | None = None,
) -> PageTree:
    """The walk in Python, over selectolax's nodes: the reference for the compiled one.

    `runs`, when given (empty), receives the order of the segments in the document, which a
    block's own list does not say when its text goes on after a nested block's: pairs
    (block, count) in a flat list, each the next `count` segments of `blocks[block]` that
    make one line of text: a run of a line element's text (a paragraph, a heading: LINE_TAGS)
    is a line of its own, and so is the text around it, and the text after a <br> or <hr>.

    The compiled walk (page/_walk.pyx) takes the same steps (same tags, paths, keys, limits
    and errors); its probe at first use and tests/engine/page/test_compiled.py hold the two
    equal. It runs for --html (which needs the text nodes back), the class path modes, or
    where the compiled walk is not in use.
    """
    root = tree.root
    if root is None:
        return PageTree([], [], [], [], [], [], [], [], [], [], [], [], [], [], [])
    block_tags = params.block_tags
    skip_tags = params.skip_tags
    kinds = _kinds(block_tags, skip_tags)
    mode = params.path_mode
    by_tag = mode == "tag"
    with_id = mode == "tag_id_class"
    max_depth = params.max_depth
    budget = params.max_nodes
    total = 0  # page text characters so far
    hints_get = HINTS.get
    classes_get = LAYOUT_CLASSES.get
    new_segment = tuple.__new__  # Segment(...) without the NamedTuple's Python-level __new__
    key_of = segment_key
    anchor_ids = 0  # <a> elements met so far: each one's text is told apart in a run

    # Per node: the fixed facts in one tuple (path, parent, tag, depth, start, flags),
    # the counters in lists.
    facts: list[tuple[str, int, str, int, int, int]] = []
    segments: list[list[Segment]] = []
    chars: list[int] = []
    achars: list[int] = []
    links: list[int] = []
    ends: list[int] = []  # one past the last node of each node's subtree
    anchors: list[tuple[int, str]] = []  # (block, href), as segment_tree collects them
    lpaths: list[str] = []  # each node's layout path (tags and classes of the layout elements to it)
    layout: list[int] = []  # each node's layout key: its parent's layout path and its own tag
    container: list[int] = []  # each node's container key: its own layout path
    # The open run of text of each node: its pieces (raw text, the id of the <a> it is in or
    # -1), the line element it is in ("" for none), and (for --html) its text nodes.
    pieces: list[list[tuple[str, int]]] = []
    line_of: list[str] = []
    run_nodes: list[list[tuple[LexborNode, int]]] = []
    seq: list[int] = []  # for `runs`: (node, count) of consecutive segments of one node on one line
    seq_in_line = False  # whether the last segment put in `seq` was in a line element
    seq_break = False  # whether a <br> or <hr> came after it

    def flush(blk: int) -> None:
        """Close `blk`'s open run of text: its segment (or, for a run of links, one a link)."""
        nonlocal seq_in_line, seq_break
        run = pieces[blk]
        if not run:
            return
        pieces[blk] = []
        path = facts[blk][0]
        line = line_of[blk]
        if line:
            path = f"{path}/{line}"
        append = segments[blk].append
        first = len(segments[blk])
        linked: dict[int, list[str]] = {}
        for raw, anchor in run:
            if anchor >= 0:
                got = linked.get(anchor)
                if got is None:
                    linked[anchor] = [raw]
                else:
                    got.append(raw)
        link_run = len(linked) >= 2 and not any(anchor < 0 and has_word(raw) for raw, anchor in run)
        if link_run:
            texts = [join_pieces(parts) for parts in linked.values()]
        else:
            texts = [join_pieces([raw for raw, _ in run])]
        for raw in texts:
            text = " ".join(raw.split())
            if text:
                append(new_segment(Segment, (key_of(path, text), text, len(text))))
        if runs is not None and (count := len(segments[blk]) - first):
            in_line = bool(line)
            if seq and seq[-2] == blk and not (in_line or seq_in_line or seq_break):
                seq[-1] += count
            else:  # another block, or a paragraph of its own
                seq.extend((blk, count))
            seq_in_line = in_line
            seq_break = False
        if text_nodes is not None:
            nodes = run_nodes[blk]
            run_nodes[blk] = []
            made = segments[blk][first:]
            if made:
                key = made[0][0]
                for node, anchor in nodes:
                    if anchor >= 0 or not link_run:  # a link run's separators are not in its segments
                        text_nodes.append((node, key))

    def glue(blk: int, anchor: int) -> None:
        """Mark that the text on either side of this point is one (a <wbr>, a comment, a skipped
        element): an empty piece, which `join_pieces` reads so."""
        if pieces[blk]:
            pieces[blk].append(("", anchor))

    def add_text(blk: int, node: LexborNode, raw: str, anchor: int) -> int:
        """Put a text node's text into `blk`'s open run (white space too: it parts the words of
        the inline elements around it); its length as counted text (0: none)."""
        pieces[blk].append((raw, anchor))
        n = len(" ".join(raw.split()))
        if n and text_nodes is not None:
            run_nodes[blk].append((node, anchor))
        return n

    def visit(node: LexborNode, path: str, blk: int, depth: int, inh: int, anchor: int) -> None:
        nonlocal budget, total, anchor_ids, seq_break
        if depth >= max_depth:
            raise BadInputError("too_deep", f"the DOM is nested deeper than {max_depth} elements")
        # The text and links directly in `blk` met in this call, added to its counters at the end.
        own_chars = 0
        own_achars = 0
        own_links = 0
        for child in node.iter(include_text=True, skip_empty=False):
            tid = child.tag_id
            if tid == TEXT_ID:
                raw = child.text_content
                if raw:
                    n = add_text(blk, child, raw, anchor)
                    total += n
                    own_chars += n
                continue
            info = kinds.get(tid)
            if info is None:
                tag = child.tag
                if tag is None or tag[0] == "-":
                    glue(blk, anchor)  # a comment
                    continue
                kind = SKIP if tag in skip_tags else BLOCK if tag in block_tags else INLINE
                info = (tag, kind, INHERIT.get(tag, 0))
                if tid < MAX_STATIC_TAG_ID:
                    kinds[tid] = info
            tag, kind, bits = info
            if kind == SKIP:
                glue(blk, anchor)
                continue
            budget -= 1
            if budget < 0:
                raise BadInputError("too_many_nodes", f"the DOM has more than {params.max_nodes:,} elements")
            child_anchor = anchor
            if bits & F_IN_A:
                own_links += 1
                href = child.attrs.get("href")
                if href:
                    anchors.append((blk, href))
                if anchor < 0:
                    child_anchor = anchor_ids
                    anchor_ids += 1
            line = kind == INLINE and tag in LINE_TAGS
            first = child.first_child
            if first is None:
                if line:  # <br>, <hr>
                    flush(blk)
                    seq_break = True  # the text after it is a line of its own
                elif tag == GLUE_TAG:
                    glue(blk, anchor)
                continue
            own = 0
            cls = ""
            if by_tag:
                child_path = f"{path}/{tag}"
                if kind == BLOCK:
                    # The attributes as a plain dict: lexbor's attrs.get raises and catches
                    # a KeyError for every missing one (measured 2x slower here).
                    attrs = child.attributes
                    cls = attrs.get("class") or ""
                    bident = attrs.get("id") or ""
                    if cls or bident:
                        pair = (cls, bident)
                        own = hints_get(pair, -1)
                        if own < 0:
                            own = hints(pair)
            else:
                attrs = child.attributes
                cls = attrs.get("class") or ""
                ident = attrs.get("id") if (with_id or kind == BLOCK) else None
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
                if kind == BLOCK and (cls or ident):
                    pair = (cls, ident or "")
                    own = hints_get(pair, -1)
                    if own < 0:
                        own = hints(pair)
            inner = inh | (own << 2) | bits
            if kind == BLOCK:
                flush(blk)  # a nested layout element ends the enclosing block's run
                target = len(facts)
                facts.append((child_path, blk, tag, depth, total, own | (inh & ~F_IN_A)))
                chars.append(0)
                achars.append(0)
                links.append(0)
                ends.append(target + 1)
                segments.append([])
                pieces.append([])
                line_of.append("")
                if text_nodes is not None:
                    run_nodes.append([])
                parent_lpath = lpaths[blk]
                layout.append(layout_key(f"{parent_lpath}/{tag}"))
                # The body's classes name the page's type (a post, an enum, a category page:
                # WordPress, Drupal and rustdoc put it there), not its layout: a layout path
                # that carried them would split the host's layout by page type.
                form = classes_get(cls) if cls and tag != "body" else ""
                if form is None:
                    form = layout_classes(cls)
                lpath = f"{parent_lpath}/{tag}{form}"
                lpaths.append(lpath)
                container.append(layout_key(lpath))
                if first.next is None and first.tag_id == TEXT_ID:
                    raw = first.text_content
                    if raw:
                        n = add_text(target, first, raw, child_anchor)
                        total += n
                        chars[target] = n
                        if inner & F_IN_A:
                            achars[target] = n
                else:
                    visit(child, child_path, target, depth + 1, inner, child_anchor)
                    ends[target] = len(facts)
                flush(target)
                continue
            if line:
                flush(blk)
                outer = line_of[blk]
                line_of[blk] = tag
            if first.next is None and first.tag_id == TEXT_ID:
                raw = first.text_content
                if raw:
                    n = add_text(blk, first, raw, child_anchor)
                    total += n
                    own_chars += n
                    if inner & F_IN_A:
                        own_achars += n
            else:
                visit(child, child_path, blk, depth + 1, inner, child_anchor)
            if line:
                flush(blk)
                line_of[blk] = outer
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
    root_path = tag if by_tag else path_component(root, tag, mode)
    facts.append((root_path, -1, tag, 0, 0, 0))
    segments.append([])
    chars.append(0)
    achars.append(0)
    links.append(0)
    ends.append(1)
    pieces.append([])
    line_of.append("")
    run_nodes.append([])
    lpaths.append(tag)
    layout.append(layout_key(tag))
    container.append(layout_key(tag))
    visit(root, root_path, 0, 1, 0, -1)
    flush(0)
    ends[0] = len(facts)
    if runs is not None:  # nodes numbered as blocks: the nodes with text, in node order
        block_of = {node: b for b, node in enumerate(i for i, segs in enumerate(segments) if segs)}
        runs.extend(block_of[v] if j % 2 == 0 else v for j, v in enumerate(seq))
    paths, parent, tags, depths, start, flags_of = (list(column) for column in zip(*facts, strict=True))
    return page_tree(
        paths, parent, tags, depths, start, flags_of, segments, chars, achars, links, ends, anchors, layout, container
    )
