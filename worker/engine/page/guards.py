"""The hostile-input guards: what is refused before lexbor parses a page, and the parse.

Empty, oversized, binary or markup-free input, and markup with more tags or deeper
nesting than the walk's limits allow, are refused from the text alone (BadInputError
with a reason), so lexbor never builds a tree the walk would refuse anyway. The walk
itself enforces `SegmentParams.max_depth` and `max_nodes` exactly.
"""

from __future__ import annotations

import array
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import selectolax.lexbor
from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from ..errors import BadInputError
from ..params import SegmentParams
from . import compiled, meta


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
    too_deep = _SCAN_DEPTH_FACTOR * params.max_depth
    # The estimate counts opening tags, each one "<": a page with no more tags than the depth
    # it is refused past cannot be refused, and is not scanned.
    if tags > max(_SCAN_OVER_TAGS, too_deep):
        depth = _nesting(html)
        if depth > too_deep:
            raise BadInputError(
                "too_deep", f"the markup nests about {depth:,} elements deep (estimated before parsing)"
            )


# Limits checked on the markup itself, before lexbor builds a tree that the walk's
# limits would refuse anyway (measured, docs/measurements.md "Hostile pages"):
# - lexbor's tree builder takes time quadratic in the depth of open elements: 19,000
#   nested <div>s parse in over a second, 100,000 in 23 s. A page with more tags than
#   most pages (the top tenth) has its nesting estimated from the tags alone first;
#   below that many tags no nesting is deep enough to cost much, and below
#   _SCAN_DEPTH_FACTOR * max_depth tags none is deep enough to be refused.
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
NOT_NESTING = frozenset(
    """area base br col embed hr img input link meta param source track wbr
    p li dt dd tr td th option optgroup rb rt rp
    a b big code em font i nobr s small strike strong tt u""".split()
)


def nesting_estimate(html: str) -> int:
    """The deepest nesting of elements the markup opens, counted from its tags alone.

    The reference for page/_walk.pyx's `nesting_estimate`, which check_html uses when
    the compiled walk is in use (tests/engine/page/test_compiled.py compares them).
    """
    depth = deepest = 0
    not_nesting = NOT_NESTING
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


def _count_tags(html: str) -> int:
    """html.count("<"), compiled where the compiled walk is in use."""
    mod = compiled.module()
    return html.count("<") if mod is None else int(mod.count_tags(html))


def _nesting(html: str) -> int:
    mod = compiled.module()
    return nesting_estimate(html) if mod is None else int(mod.nesting_estimate(html, NOT_NESTING))


def parse(html: str, params: SegmentParams) -> LexborHTMLParser:
    """The guards, then lexbor's parse; raises BadInputError for input that is not a usable page."""
    check_html(html, params)
    return LexborHTMLParser(html)


def parse_page(html: str, params: SegmentParams) -> LexborHTMLParser | Any:
    """`parse`, for the compiled walk and page readers alone: where they run for `params`, the
    page is parsed by the extension's `parse_document` (the same lexbor parse, into a document
    reused from a pool, from the str's own bytes where it is ASCII: about 6% of the parse,
    docs/measurements.md), whose tree offers its root, head and body as addresses alone (no
    selectolax objects); elsewhere by selectolax (--html's walk and the Python walk need its
    node objects)."""
    check_html(html, params)
    fast = _parser_for(params)
    return LexborHTMLParser(html) if fast is None else fast(html)


@lru_cache(maxsize=16)
def _parser_for(params: SegmentParams) -> Callable[[str], Any] | None:
    """`document_parser()` where the compiled walk reads the tree for `params`, else None;
    decided once per params, not on every page."""
    if params.path_mode != "tag" or compiled.walker(params.block_tags, params.skip_tags) is None:
        return None
    return document_parser()


def document_parser() -> Callable[[str], Any] | None:
    """The extension's `parse_document` where it gave selectolax's trees on the probe pages
    and the compiled page readers are in use, else None; chosen once, at first use."""
    return compiled.checked(_checked_parser)  # type: ignore[no-any-return]


# Pages the compiled parse must read as selectolax does: the walk's probe, the page readers'
# (one of them empty), markup whose tree depends on the document's settings (scripting off:
# a <noscript> in the head is markup that closes it; the compatibility mode), custom elements
# (their ids are the document's own: read again in a document used before), and text that
# is not ASCII.
DOCUMENT_PROBES = (
    compiled.PROBE_PAGE,
    *meta.META_PROBES,
    "<head><noscript><img src=p.gif><p>no script</p></noscript><link rel=canonical href=/a><title>t</title></head>"
    "<body><x-one>first</x-one><x-two><x-one>second</x-one></x-two></body>",
    "<p>caf\u00e9 \u65e5\u672c\ud800 lone surrogate</p><x-two>two</x-two>",
    # A page without a doctype (quirks mode), then one with (no quirks), into the same
    # document: a <table> closes the open <p> only in the second (a cleaned document kept
    # its last page's mode until 2026-11-30: page/_walk.pyx `_compat_offset`).
    "<p>quirks<table><tr><td>in the p</table>",
    "<!doctype html><p>no quirks<table><tr><td>after the p</table>",
)


def _checked_parser(mod: Any) -> Callable[[str], Any] | None:
    if mod is None or not hasattr(mod, "parse_document") or meta.meta_kernel() is None:
        return None
    try:
        if mod.init_documents(selectolax.lexbor.__file__, SelectolaxError) is not None:
            return None
        params = SegmentParams()
        fast = compiled.walker(params.block_tags, params.skip_tags)
        if fast is None:
            return None
        for html in DOCUMENT_PROBES * 2:  # twice: the second time into documents used before
            if _read(mod, fast, mod.parse_document(html), params) != _read(mod, fast, LexborHTMLParser(html), params):
                return None
    except Exception:  # a build that does not fit this source: selectolax parses
        return None
    return mod.parse_document  # type: ignore[no-any-return]


def _read(mod: Any, fast: Any, tree: Any, params: SegmentParams) -> tuple[Any, ...]:
    """What the engine reads of a parsed page: the walk (with its order and cues) and the page readers'."""
    head, body, root = tree.head, tree.body, tree.root
    if root is None:
        return (None,)
    runs: list[int] = []
    walked = fast.walk(root.mem_id, params.max_depth, params.max_nodes, True, runs)
    stats = tuple(bytes(part) if isinstance(part, memoryview | array.array) else part for part in walked)
    h = 0 if head is None else head.mem_id
    b = 0 if body is None else body.mem_id
    return (
        stats, runs, mod.title_text(h, root.mem_id), mod.root_langs(root.mem_id), mod.http_equiv_metas(root.mem_id),
        mod.base_hrefs(h, b), head is None, body is None,
    )
