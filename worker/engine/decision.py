"""The decision: one verdict per block from a page's ballot (the detectors' evidence).

The template is the site's layout around the content. Repetition (the segment table's
template share, template pagelets) is evidence of template only where the layout is;
inside the part of the page that carries the page's own text, repeated text is content.
So, once the host's table has learned something (a warm host):

1. The page's content region is the deepest layout element that holds at least
   `region.share` of the page's new plain text: the characters of segments the host's
   table did not hold before this page, outside links (new text is what the page says
   of its own; link lists say where else to go), widened to the host's content
   container (detectors/layout.py); and where the host's pages put their regions in
   different parts of one container (a class page's method details, another's
   description), to the whole container, when what it holds beside the region names
   no template or navigation and is mostly not links (`_whole_container`).
2. Outside the region, a block is template when the table says so (its template share
   is over `table.template_ratio`, or it lies in a template pagelet), or when it lies at
   one of the host's layout paths (step 3's: repetition is evidence where the layout is,
   and outside the region, before a rotating box's texts reach the table's DF), else when
   the page-level model's templateness is over `pagelevel.outer_threshold` (a per-page box
   the table cannot know: related links, comments).
3. Inside the region, repetition counts only at the host's layout paths (a path that
   had new text on fewer than `region.layout_novelty` of the pages that had it, and is on
   at least `region.layout_presence` of the host's pages: a "Next/Previous" bar, a
   copyright line inside the content element). The model may turn a link list the table
   keeps (a block with at least half of its text in links: a teaser box, a tag cloud) into
   template when its templateness is far above that of the region's own text:
   above `pagelevel.inner_ratio` times the region's *text level* (the templateness under
   which `pagelevel.region_quantile` of the region's kept text lies, by characters), and
   above `pagelevel.inner_threshold`; unless it would remove more than
   `pagelevel.max_removed_share` of the region's text (a page whose content is links: an
   index, a member list). The same share bounds the repetition: where the table's
   removals inside the region, of blocks no template word or navigation element names,
   would take more than that share of the region's text, they are undone
   (`keep_region_text`): a host whose pages so far are mostly of one type (an API's classes
   that inherit the same members, in a crawl sorted by URL) has that type's repeated
   content at paths that seldom carried new text, which look like its layout. And a block
   the table holds as template there, that a template word or navigation element names, and
   whose text is on nearly every page of the host (`region.slot_constant`) is template
   (`named_constants`): paths are tag names, and a share bar or an advertisement label in an
   article shares the path of its paragraphs.
4. Beside the region (the widened one, and the one the page's new text set), in the
   nearest element around it that holds other blocks, a block at one of the host's
   content slots (a path with new text on most of its pages, on most of the host's pages:
   a product's title, price and attribute values beside its description) is content
   whatever steps 2 and 3 said, unless it is a link list, named template, or the slot's
   constant text with nothing new to the host (`content_slots`).
5. Where the verdicts would remove more than `pagelevel.max_new_removed_share` of the page's
   new text, the model's removals of blocks with new text are undone (`keep_new_text`): a
   page whose new text is nearly all links (an index, a listing of posts) has its region in
   the sliver of it outside links, and its content is the links beside it.

On a host's first page (a cold host: the table has nothing to compare with), and on a
young host's page with no text new to the host (a duplicate of an earlier page, whose content
the few pages counted cannot tell from the template), the page-level model decides alone:
a block is template above `pagelevel.threshold` (with `pagelevel.cold_ratio` above 0: that
ratio times the page's text level at `pagelevel.cold_quantile`, kept between
`pagelevel.cold_floor` and `threshold`); unless at its lowest threshold it would remove
more than `pagelevel.cold_max_removed_share` of the page's text or keep fewer than
`pagelevel.cold_min_kept` characters of it (then it has misread the page, which stays
whole: a table of contents whose every line is a link). Inside the page's main element
(the element of the block with the page's most plain text, unless that is the body) its
removals are ignored where they would take more than `pagelevel.max_removed_share` of the
element's text, the guard of a later page's region (`keep_an_index`: a documentation home
page, its introduction and the site's table of contents in one element).
Without the model, a cold page is kept whole (but for the sections its markup names, below).
The block with the page's most plain text is never template by the model.

On every page, cold or warm, the page's headline is never template by the model either: the
first block the model removed whose words are mostly the page's <title>'s and hold at least
half of the title's words ("Headline | Site"), unless it is a list item or lies in a
navigation element (nav, footer, aside, form): a breadcrumb's or a menu's entry that repeats
the title (`keep_headline`). The model reads a block's shape, not what it says, and scores a
short line in a header element above the article as the site's. The table's removals stand.

Why a text level: the model's scores are calibrated on a crawl, not on the page at hand.
The same templateness (0.05, say) is a docstring on a documentation site, whose text all
scores high, and a photo caption on a news site, whose article scores a thousand times
lower. Read against the page's own text, a score says how unlike the page's content a
block is (docs/region.md, "The model against the page's own text").

On every page, cold or warm, a block inside a comments section, a box of links to other
pages, a gallery, a byline, an author's bio or a modal dialog leaves the text whatever else
said: an element whose class names one (page/cues.py `F_COMMENTS`: "comments", "commentlist",
"disqus"; `F_RELATED`: "related", "recommend", "most-read", ...; `F_OTHER`: "gallery",
"slideshow", "carousel", "slider", "byline", "author-bio", "about-the-author", "modal",
"dialog") and that does not hold the page's main text (`aside_blocks`). Readers' comments,
other stories, photo captions and the story's author, dates and bio are page-specific, so the
table never removes them on a host's first pages, and the model, trained on a crawl's
repetition, scores them as content; a dialog's text is not shown with the page at all. So
does a block inside an element that HTML puts beside a page's content, when the element does
not hold the page's main text: a form (a sign-up's, a poll's or a log-in's labels, options
and notices are controls, not text to read), a navigation element (nav, menu) and a footer,
the page's or an article's (who wrote it, its tags, its links onward, the site's notices)
(`_beside_blocks`; a form around the whole page, ASP.NET's, holds the main text, or most of
the page's text). An aside is not among them: docutils writes a page's footnotes as asides.

Each block also gets its role: ``main`` (kept), ``template`` (the site's layout: removed
for repetition, or by the model where nothing says it is page-specific), ``comments`` or
``related`` (in such a section), ``other`` (in a gallery, a byline, an author's bio, a
dialog or a form; a nav's or a footer's blocks are the site's: ``template``), or, for other
text the model removed that is new to the host (page-specific, not main content):
``related`` (mostly links) or ``other``.

`decide_blocks` is a pure function of the ballot and the parameters: `detemplate eval`
replays it over recorded ballots to choose parameters leave-one-corpus-out.
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from functools import reduce
from operator import and_, or_
from typing import Any, NamedTuple

import numpy as np
from selectolax.lexbor import LexborHTMLParser

from .detectors.base import Ballot
from .model import METHOD_COLD, METHOD_MARKUP, METHOD_PAGELET, METHOD_PAGELEVEL, METHOD_TABLE, Segment
from .page import compiled, walk
from .page.cues import (
    F_COMMENTS,
    F_IN_ASIDE,
    F_IN_COMMENTS,
    F_IN_FOOTER,
    F_IN_FORM,
    F_IN_HEADER,
    F_IN_NAV,
    F_IN_OTHER,
    F_IN_RELATED,
    F_IN_THINT,
    F_OTHER,
    F_RELATED,
    F_THINT,
)
from .page.tree import PageTree, main_block
from .params import EngineParams, PageLevelParams, SegmentParams

ROLE_MAIN = "main"
ROLE_TEMPLATE = "template"
ROLE_COMMENTS = "comments"
ROLE_RELATED = "related"
ROLE_OTHER = "other"
ROLES = (ROLE_MAIN, ROLE_TEMPLATE, ROLE_COMMENTS, ROLE_RELATED, ROLE_OTHER)

_SECTION_BITS = F_COMMENTS | F_RELATED | F_OTHER  # the element's own class names such a section
_IN_SECTION_BITS = F_IN_COMMENTS | F_IN_RELATED | F_IN_OTHER  # an enclosing element's does
_ASIDE_BITS = _SECTION_BITS | _IN_SECTION_BITS
_NAVIGATION = frozenset(("nav", "menu", "aside", "footer", "form"))  # no content slot inside these
_IN_NAVIGATION = F_IN_NAV | F_IN_FOOTER | F_IN_ASIDE | F_IN_FORM  # inside one of those (nav has menu's bit)
_PAGE_TAGS = frozenset(("", "html", "body"))  # the page itself (and the root): nothing is beside the region there
# The elements HTML puts beside a page's content, each with the role of its blocks beside the
# main text (`_beside_blocks`): a form's are the page's own controls; a navigation element and
# a footer are the site's layout.
_BESIDE = (("form", ROLE_OTHER), ("nav", ROLE_TEMPLATE), ("menu", ROLE_TEMPLATE), ("footer", ROLE_TEMPLATE))


class BlockDecisions(NamedTuple):
    """What the decision says of each block of a page."""

    template: list[bool]
    method: list[str]
    role: list[str]


def region_nodes(
    ballot: Ballot, container_share: float, wide_share: float = 0.0, column: tuple[float, int] = (2.0, 0)
) -> tuple[int, int]:
    """The page's content region as a range of block-tree nodes [first, end): the region
    widened to its deepest enclosing element that enclosed the host's regions on at least
    `container_share` of its pages (the whole page without a region). An element whose class
    or id names template (a page header, a sidebar) is no such container while one further
    out, below the body, names none and qualifies too. Where that element enclosed them on
    fewer than `wide_share` of the pages, the host's pages put their regions in different
    parts of one container (a class page's method details on some, its description on
    others): `_whole_container` may widen it to that container. `column`:
    (`region.link_column_score`, `region.link_column_plain`), `_link_column`."""
    return _regions(ballot, container_share, wide_share, column)[2:]


def _regions(
    ballot: Ballot, container_share: float, wide_share: float, column: tuple[float, int] = (2.0, 0)
) -> tuple[int, int, int, int]:
    """`region_nodes` before `_whole_container` and after it: first, end of each."""
    cues = ballot.cues
    if cues is None or ballot.region is None:
        return 0, 1 << 62, 0, 1 << 62
    found = _container(ballot, container_share, wide_share)
    chain, scores = ballot.region[0], ballot.scores
    if column[0] > 1.0 or scores is None or found[0] == chain[0]:
        return found
    at = _link_column(cues, chain, scores, found[0], column)
    return found if at < 0 else (at, cues.end[at], at, cues.end[at])


def _container(ballot: Ballot, container_share: float, wide_share: float) -> tuple[int, int, int, int]:
    """`_regions` before `_link_column`."""
    cues = ballot.cues
    assert cues is not None and ballot.region is not None
    chain, shares = ballot.region
    flags, tags = cues.flags, cues.tag
    named = -1  # the deepest qualifying element, when its class names template
    for k, (at, share) in enumerate(zip(chain, shares, strict=False)):
        if share < container_share:
            continue
        if not flags[at] & F_THINT:
            if named < 0 or tags[at] not in _PAGE_TAGS:
                if share < wide_share and tags[at] not in _PAGE_TAGS:
                    return (at, cues.end[at], *_whole_container(cues, chain, shares, k, wide_share))
                return at, cues.end[at], at, cues.end[at]
        elif named < 0:
            named = at
    node = chain[-1] if named < 0 else named
    return node, cues.end[node], node, cues.end[node]


def _link_column(
    cues: PageTree, chain: Sequence[int], scores: Any, widened: int, column: tuple[float, int]
) -> int:
    """Where the region widened from the page's own element (`chain[0]`) to `widened` over a
    part beside it that is more than half links, which the model scores as template (its
    characters' mean templateness above `column[0]`), and the own element holds at least
    `column[1]` characters of plain text: the element the region widens to instead, the
    outermost of the chain below `widened` whose part beside the own element is still mostly
    text (the own element itself at least); else -1 (the widening stands). A page of a type
    new to its host, whose own text lies where the host's earlier pages had none, would
    otherwise widen to the host's container and take in a column of the site's other
    headlines, new on every page, which the model inside the region and the guard of the
    page's new text then keep."""
    nodes, chars, achars, ends = cues.node_of_block, cues.chars, cues.achars, cues.end
    own = chain[0]
    inner_lo, inner_hi = _blocks_in(nodes, own, ends[own])
    if sum([chars[nodes[i]] - achars[nodes[i]] for i in range(inner_lo, inner_hi)]) < column[1]:
        return -1  # an index, or a page of little text of its own: the links beside may be its content
    beside = _beside(nodes, _blocks_in(nodes, widened, ends[widened]), (inner_lo, inner_hi))
    if not _mostly_links(cues, [nodes[i] for i in beside]):
        return -1
    if sum([float(scores[i]) * chars[nodes[i]] for i in beside]) <= column[0] * sum([chars[nodes[i]] for i in beside]):
        return -1
    best = own
    for c in chain[1:]:
        if c == widened:
            break
        part = _beside(nodes, _blocks_in(nodes, c, ends[c]), (inner_lo, inner_hi))
        if _mostly_links(cues, [nodes[i] for i in part]):
            break
        best = c
    return best


def _beside(nodes: list[int], outer: tuple[int, int], inner: tuple[int, int]) -> list[int]:
    """The blocks of an element (`outer`, its range of the block list) beside an element
    inside it (`inner`, likewise)."""
    return [*range(outer[0], inner[0]), *range(inner[1], outer[1])]


def _mostly_links(cues: PageTree, block_nodes: Sequence[int]) -> bool:
    """Whether more than half of these blocks' text is in links (a link list)."""
    return 2 * sum(map(cues.achars.__getitem__, block_nodes)) > sum(map(cues.chars.__getitem__, block_nodes))


# What the part of a container around the region must not hold for the region to widen to it:
# an element whose class names template, or a comments, related or other section; a navigation
# element, a header, a footer, an aside or a form.
_NOT_CONTENT_BITS = F_THINT | _SECTION_BITS | _IN_NAVIGATION | F_IN_HEADER


def _whole_container(
    cues: PageTree, chain: Sequence[int], shares: Sequence[float], k: int, wide_share: float
) -> tuple[int, int]:
    """The region `chain[k]`, or the nearest element around it, below the body, that enclosed
    the host's regions on at least `wide_share` of its pages, when what that element holds
    beside the region is more content of the page: no element in it names template or
    navigation (`_NOT_CONTENT_BITS`, beyond what the container itself inherits), and at most
    half of its blocks' text is in links (a link list beside the article: a page's table of
    contents, other stories). A Javadoc class page's "Method Summary" beside its "Method
    Detail", whose repeated member names would otherwise lie outside the region."""
    at = chain[k]
    flags, tags, ends = cues.flags, cues.tag, cues.end
    first, end = at, ends[at]
    for c, share in zip(chain[k + 1:], shares[k + 1:], strict=False):
        if tags[c] in _PAGE_TAGS or flags[c] & F_THINT:
            break
        if share < wide_share:
            continue
        beside = reduce(or_, flags[c + 1:first], 0) | reduce(or_, flags[end:ends[c]], 0)  # its nodes' bits
        if beside & ~flags[c] & _NOT_CONTENT_BITS:
            break
        nodes = cues.node_of_block
        beside_region = _beside(nodes, _blocks_in(nodes, c, ends[c]), _blocks_in(nodes, first, end))
        if _mostly_links(cues, [nodes[i] for i in beside_region]):
            break  # a link list beside the article
        return c, ends[c]
    return first, end


def decided_cold(ballot: Ballot, params: EngineParams) -> bool:
    """Whether the page is judged as a host's first page: the table has nothing to compare
    with, or the host is young (fewer than `table.template_df` pages) and no text on the page
    is new to it (a duplicate of an earlier page: with so few pages the layout's counts
    cannot tell its content from the template)."""
    if not ballot.warm:
        return True
    novel = ballot.novel
    return (
        params.region.enabled and ballot.pages < params.table.template_df and novel is not None and not any(novel)
    )


def decide_blocks(ballot: Ballot, params: EngineParams, roles: bool = True) -> BlockDecisions:
    """One verdict, method and role per block of the page the ballot is about (the roles
    left empty when not asked for)."""
    tally = ballot.tally()
    chars = tally.chars
    scores = ballot.scores
    if scores is not None:
        scores = scores.tolist()  # Python floats: indexing a numpy array block by block costs more
    warm = not decided_cold(ballot, params)
    if warm:
        template, method = _warm(ballot, params, chars, tally.template_chars, scores)
    else:
        template, method = _cold(ballot.cues, scores, chars, params.pagelevel)
    keep_headline(ballot, template, method)
    aside = aside_blocks(ballot.cues)
    for i in aside:  # such a section's blocks leave the text, whatever the other evidence said
        if not template[i]:
            template[i] = True
            method[i] = METHOD_MARKUP
    return BlockDecisions(template, method, _roles(ballot, template, method, warm, aside) if roles else [])


def _warm(
    ballot: Ballot, params: EngineParams, chars: list[int], tchars: list[int], scores: list[float] | None
) -> tuple[list[bool], list[str]]:
    """A warm host's page: the table's evidence where the layout is, the model's beside it."""
    cues = ballot.cues
    rp = params.region
    plp = params.pagelevel
    if rp.enabled and cues is not None and ballot.region is not None:
        own_first, own_end, first, end = _regions(
            ballot, rp.container_share, rp.wide_share, (rp.link_column_score, rp.link_column_plain)
        )
        nodes: list[int] | None = cues.node_of_block
        node_chars, node_achars = cues.chars, cues.achars
    else:
        own_first = own_end = first = end = 0
        nodes = None  # no block is inside a content region
        node_chars = node_achars = []
    outer_threshold = plp.outer_threshold
    held_threshold = 1.0
    if ballot.held and scores is not None:
        # A held first page (engine/firstpages.py): beside the region, the model as on a first
        # page, at the page's own threshold where that is lower.
        held_threshold = cold_threshold(scores, chars, plp)
        outer_threshold = min(outer_threshold, held_threshold)
    args = (
        chars, tchars, ballot.outright, nodes, node_chars, node_achars, ballot.novel, first, end,
        ballot.novelty, ballot.presence, scores,
        params.table.template_ratio, rp.layout_novelty, rp.layout_presence, plp.inner_threshold,
        outer_threshold, plp.max_removed_share, plp.inner_ratio, plp.outer_ratio, plp.region_quantile,
    )
    kernel = compiled.kernel("block_decisions")
    if kernel is None:
        template, method = block_decisions_python(*args)
    else:  # the same loops, compiled (page/_walk.pyx block_decisions)
        template, method = kernel(*args, METHOD_TABLE, METHOD_PAGELET, METHOD_PAGELEVEL)
    if nodes is not None and cues is not None and cues.tag[first] not in _PAGE_TAGS:
        # (a region that is the page itself, the body, holds the site's layout: step 2's)
        lo, hi = _blocks_in(nodes, first, end)  # the region's blocks
        named_constants(template, method, ballot, params, chars, tchars, first, lo, hi)
        if any(template):
            keep_region_text(template, method, cues, chars, first, lo, hi, plp.max_removed_share)
            slots = content_slots(ballot, params, first, lo, hi)
            if own_first != first:  # and beside the region the page's own text set, in the container
                slots += content_slots(ballot, params, own_first, *_blocks_in(nodes, own_first, own_end))
            for i in slots:
                if template[i]:
                    template[i] = False
                    method[i] = METHOD_TABLE
    if ballot.novel is not None:  # keep_new_text returns at once where the model removed nothing
        keep_new_text(template, method, ballot.novel, plp.max_new_removed_share)
    if ballot.held and scores is not None and cues is not None and nodes is not None:
        held_navigation(template, method, cues, scores, first, end, held_threshold)
    return template, method


_HELD_NAVIGATION = _IN_NAVIGATION | F_IN_HEADER


def held_navigation(
    template: list[bool], method: list[str], cues: PageTree, scores: list[float], first: int, end: int,
    threshold: float,
) -> None:
    """A held first page's blocks inside its region that lie in a navigation element (nav,
    aside, header, footer, form) go by the model read at the first page's own threshold
    (in place): with one other page in the table, a story's footer of previous/next links,
    an aside of editor's picks or a share bar inside the article's element is new text,
    which the region keeps, though the model alone removes it."""
    flags = cues.flags
    for i, n in enumerate(cues.node_of_block):
        if first <= n < end and not template[i] and flags[n] & _HELD_NAVIGATION and scores[i] > threshold:
            template[i] = True
            method[i] = METHOD_PAGELEVEL


_WORD = re.compile(r"\w+")  # a word, as the scorer's tokens are
# What a node `_named` names carries: its own or an enclosing element's template word, or an
# enclosing navigation element (a cheap necessary test before the walk up).
_MAYBE_NAMED = F_THINT | F_IN_THINT | _IN_NAVIGATION


def keep_headline(ballot: Ballot, template: list[bool], method: list[str]) -> None:
    """The page's headline kept from the model (in place): the first block the model removed
    that `_headlines` takes for one. The table's removals stand: a site's name that is its
    whole title on every page is its layout."""
    if METHOD_PAGELEVEL not in method:
        return
    removed = list(itertools.compress(range(len(method)), map(and_, template, map(METHOD_PAGELEVEL.__eq__, method))))
    if not removed:
        return
    found = ballot.headlines  # made before the blocks' texts were dropped (tools/loco.py)
    if found is not None:
        hit = next((i for i in removed if i in found), -1)
    else:
        hit = next(iter(_headlines(ballot, removed)), -1)
    if hit >= 0:
        template[hit] = False


def headline_blocks(ballot: Ballot) -> list[int]:
    """Every block `_headlines` takes for a headline, kept on the ballot (for a replay of the
    decision once the blocks' texts are gone)."""
    ballot.headlines = list(_headlines(ballot, range(len(ballot.blocks))))
    return ballot.headlines


def _headlines(ballot: Ballot, candidates: Iterable[int]) -> Iterator[int]:
    """The candidate blocks that may be the page's headline, in the order given: their words
    are mostly the title's and hold at least half of the title's words. A page names its own
    headline in its <title> ("Headline | Site"); the model, which reads a block's shape and
    not what it says, scores a short line in a header element above the article as the
    site's. A list item (a menu's or a breadcrumb's entry that repeats the title) and a block
    in a navigation element (nav, footer, aside, form) are no headline."""
    title, cues = ballot.title, ballot.cues
    if not title or cues is None:
        return
    words = set(_WORD.findall(title.lower()))
    need = (len(words) + 1) // 2  # at least half of the title's words
    if not need:
        return
    # What spares the reading of other blocks: a block that holds `need` of the title's words
    # is at least as long as the shortest `need` of them and holds one of any
    # len(words) - need + 1 of them (the longest are looked for, as substrings); and one
    # whose words are mostly the title's is taken to be at most four titles long.
    by_length = sorted(words, key=len)
    low, high = sum(map(len, by_length[:need])), 4 * len(title)
    some = by_length[need - 1 :]
    text, flags, tags, nodes = cues.text, cues.flags, cues.tag, cues.node_of_block
    chars = ballot.tally().chars
    for i in candidates:
        node = nodes[i]
        if not low <= chars[i] <= high or tags[node] == "li" or flags[node] & _IN_NAVIGATION:
            continue
        lowered = text[node].lower()
        if not any(word in lowered for word in some):
            continue
        own = set(_WORD.findall(lowered))
        shared = len(own & words)
        if shared >= need and 2 * shared >= len(own):
            yield i


def named_constants(
    template: list[bool], method: list[str], ballot: Ballot, params: EngineParams, chars: list[int],
    tchars: list[int], first: int, lo: int, hi: int,
) -> None:
    """The site's named boxes inside the content region made template (in place): a block the
    table holds as template (its template share over `table.template_ratio`, or in a template
    pagelet), that a template word in a class or id or a navigation element (nav, menu,
    aside, footer, form) names between it and the region, and whose text is the host's
    constant text (at least half of its characters in segments on at least
    `region.slot_constant` of the host's pages). Inside the region repetition counts only at
    the host's layout paths, and paths are tag names: "Share this article", an
    "Advertisement" label, a newsletter box inside an article share the path of the
    article's byline and paragraphs, which carry new text on every page. A name and text on
    nearly every page are the site's; repeated content (an inherited section, a lab manual's
    recurring steps) is on some of the host's pages, not nearly all, and is seldom named.
    The region is the element `first`, its blocks lo:hi; never the page itself (the body),
    whose layout is step 2's (`_warm`)."""
    cues = ballot.cues
    segment_dfs = ballot.segment_dfs
    rp = params.region
    if cues is None or segment_dfs is None or rp.slot_constant <= 0.0:
        return
    tags = cues.tag
    nodes = cues.node_of_block
    ratio = params.table.template_ratio
    outright = ballot.outright
    flags, parent = cues.flags, cues.parent
    keys, dfs = segment_dfs
    floor = max(params.table.threshold(ballot.pages), rp.slot_constant * ballot.pages)
    blocks = ballot.blocks
    candidates = range(lo, hi) if outright is not None else itertools.compress(range(lo, hi), tchars[lo:hi])
    for i in candidates:  # (without a pagelet's vote, only blocks with template characters)
        if template[i] or not (tchars[i] > ratio * chars[i] or (outright is not None and outright[i])):
            continue
        if _named(flags, parent, tags, nodes[i], first) and _constant(blocks[i][1], keys, dfs, floor):
            template[i] = True
            method[i] = METHOD_TABLE


def keep_region_text(
    template: list[bool], method: list[str], cues: PageTree, chars: list[int], first: int, lo: int, hi: int,
    share: float,
) -> None:
    """The content region's text kept from the table where its removals inside the region
    (the element `first`, its blocks lo:hi) would take more than `share` of the region's text (in place): the
    removals of blocks that no template word in a class or id, nor a navigation element (nav,
    menu, aside, footer, form), names between them and the region are undone. Inside the
    region repetition counts only at the host's layout paths, paths that seldom carried new
    text; a host whose pages so far are mostly of one type (an API's classes that inherit the
    same members, a crawl sorted by URL) has that type's repeated content at such paths, and
    the page's own text is its name. A "Next/Previous" bar or a copyright line inside the
    content element is a small part of it. The same guard as the model's inside the region
    (`pagelevel.max_removed_share`). Never the page itself (the body), which holds the site's
    layout (`_warm`)."""
    tags = cues.tag
    nodes = cues.node_of_block
    if not any(template[lo:hi]):
        return
    flags, parent = cues.flags, cues.parent
    unnamed = [i for i in range(lo, hi) if template[i] and method[i] != METHOD_PAGELEVEL
               and not _named(flags, parent, tags, nodes[i], first)]
    if not unnamed or sum([chars[i] for i in unnamed]) <= share * sum(chars[lo:hi]):
        return
    for i in unnamed:
        template[i] = False
        method[i] = METHOD_TABLE


def keep_new_text(template: list[bool], method: list[str], novel: list[int], share: float) -> None:
    """A later page's new text kept from the model where the verdicts would remove more than
    `share` of it (in place): the model's removals of blocks with new text are undone. New
    text is what a page says of its own; a page whose new text is nearly all links (an
    index, a tag's listing of posts) has its content region in the sliver of it outside links
    (a table's header row), and the model, outside that region, removes the links that are
    the page's content. A news page's boxes of other stories are a small part of its new text
    beside the article. The same guard as a first page's (`cold_max_removed_share`) and a
    region's (`max_removed_share`), over the text the page brings."""
    if METHOD_PAGELEVEL not in method:
        return  # nothing of the model's to undo
    total = sum(novel)
    if not total:
        return
    removed = sum([n for n, t in zip(novel, template, strict=True) if t])
    if removed <= share * total:
        return
    for i, m in enumerate(method):
        if m == METHOD_PAGELEVEL and template[i] and novel[i]:
            template[i] = False
            method[i] = METHOD_TABLE


def content_slots(ballot: Ballot, params: EngineParams, first: int, inner_lo: int, inner_hi: int) -> list[int]:
    """The blocks beside the content region (the element `first`, its blocks
    inner_lo:inner_hi) that are content.

    A page's region is where most of its new text is: on a product page, the description;
    the product's title, price and attributes sit beside it, and their values recur across
    products (a publisher, a format), so the table's repetition and the model removed them.
    Beside the region means in the nearest element around it that holds other blocks (the
    product), unless that element is the page's body. There, a block is content when it is
    at a content slot of the host (a layout path with new text on at least
    `region.layout_novelty` of the pages that have it, on at least `region.layout_presence`
    of the host's pages: a field every page fills), is no link list (at least half of its
    text in links: two or more links averaging `region.slot_link_chars` characters, titles of
    other pages, or one link beside blocks at the same layout path; links on names inside a
    line, an API signature's types, a heading's module path, make no link list), has no
    template word in its class or id nor a navigation element (nav, menu, aside, footer,
    form) between it and that element, and its text is not the slot's constant text: less
    than half of its characters in segments that the table holds as template and that are on
    at least `region.slot_constant` of the pages that have the slot (a label, a notice), or
    any text new to the host (the slot filled on this page: a product's title in a buy box
    whose button and delivery notice are the shop's)."""
    rp = params.region
    cues = ballot.cues
    novelty, presence, segment_dfs = ballot.novelty, ballot.presence, ballot.segment_dfs
    if rp.slot_constant <= 0.0 or cues is None or novelty is None or presence is None or segment_dfs is None:
        return []
    nodes = cues.node_of_block  # in document order, as the nodes are numbered
    parent, ends, tags = cues.parent, cues.end, cues.tag
    inner = inner_hi - inner_lo
    top = first
    while True:  # the nearest element around the region that holds other blocks
        top = parent[top]
        if top < 0 or tags[top] in _PAGE_TAGS:
            return []
        lo, hi = _blocks_in(nodes, top, ends[top])
        if hi - lo > inner:
            break
    chars, achars, links, flags, layout = cues.chars, cues.achars, cues.links, cues.flags, cues.layout
    keys, dfs = segment_dfs
    threshold = params.table.threshold(ballot.pages)
    blocks, novel = ballot.blocks, ballot.novel
    paths: Counter[int] | None = None  # the layout paths of the element's blocks, when needed
    out = []
    for i in itertools.chain(range(lo, inner_lo), range(inner_hi, hi)):  # the element's blocks beside the region
        if novelty[i] < rp.layout_novelty or presence[i] < rp.layout_presence:
            continue  # not a content slot
        node = nodes[i]
        if 2 * achars[node] >= chars[node]:  # half of its text in links
            if links[node] >= 2:
                if achars[node] >= rp.slot_link_chars * links[node]:
                    continue  # a link list: its links are titles of other pages
                # else names inside a line (an API signature's types, a heading's module path)
            else:
                if paths is None:
                    paths = Counter([layout[nodes[j]] for j in range(lo, hi)])
                if paths[layout[node]] > 1:
                    continue  # an item of a list of links
        if _named(flags, parent, tags, node, top):
            continue  # a template word or a navigation element names it
        if novel is not None and novel[i]:
            out.append(i)  # the slot filled on this page: text new to the host
            continue
        floor = max(threshold, rp.slot_constant * round(presence[i] * ballot.layout_pages))  # pages with the slot
        if not _constant(blocks[i][1], keys, dfs, floor):  # not the slot's constant text
            out.append(i)
    return out


def _named(flags: list[int], parent: list[int], tags: list[str], node: int, top: int) -> bool:
    """Whether a template word in a class or id, or a navigation element (nav, menu, aside,
    footer, form), names the node or an element between it and its ancestor `top` (not
    `top` itself)."""
    if not (flags[node] & _MAYBE_NAMED or tags[node] in _NAVIGATION):
        return False  # no such word or element on the way up: the walk is spared
    while node != top:
        if flags[node] & F_THINT or tags[node] in _NAVIGATION:
            return True
        node = parent[node]
    return False


def _constant(segments: Sequence[Segment], keys: list[int], dfs: list[int], floor: float) -> bool:
    """Whether at least half of a block's characters are in segments on at least `floor` of
    the host's pages (`keys`, `dfs`: the page's segment keys, sorted, and each one's DF)."""
    total = constant = 0
    for key, _text, length in segments:
        total += length
        if dfs[bisect_left(keys, key)] >= floor:
            constant += length
    return 2 * constant >= total


def aside_blocks(cues: PageTree | None) -> dict[int, str]:
    """The blocks in a section that is not the page's main content, with the section's role:
    inside an element whose class names a comments section, a box of links to other pages, a
    gallery, a byline, an author's bio or a dialog (page/cues.py F_COMMENTS, F_RELATED,
    F_OTHER) and that does not hold the page's main text (page/tree.py `main_block`: an
    article whose element says it has comments is no comments section). The nearest such
    element names the role (a gallery's, a byline's, a bio's and a dialog's: other); a block
    in a form, a navigation element or a footer beside the main text and in no such section
    has that element's role (`_beside_blocks`)."""
    if cues is None or not cues.node_of_block:
        return {}
    kernel = aside_kernel()
    if kernel is None:
        return aside_blocks_python(cues)
    # The same steps, compiled (page/_walk.pyx aside_blocks)
    found: dict[int, str] = kernel.aside_blocks(
        cues.flags, cues.node_of_block, cues.tag, cues.parent, cues.end, cues.chars,
        cues.node_of_block[main_block(cues)], *_ASIDE_CONSTANTS,
    )
    return found


_ASIDE_CONSTANTS = (
    _ASIDE_BITS, _SECTION_BITS, _IN_SECTION_BITS, F_COMMENTS, F_RELATED, ROLE_COMMENTS, ROLE_RELATED, ROLE_OTHER,
    _BESIDE,
)


def aside_blocks_python(cues: PageTree) -> dict[int, str]:
    """`aside_blocks` of a page with blocks (the reference for page/_walk.pyx `aside_blocks`)."""
    flags = cues.flags
    nodes = cues.node_of_block
    flagged = [i for i, node in enumerate(nodes) if flags[node] & _ASIDE_BITS]
    present = set(cues.tag)  # one pass over the nodes, not one a name of _BESIDE
    beside = [(name, role) for name, role in _BESIDE if name in present]  # the page has such an element
    if not flagged and not beside:
        return {}
    main = nodes[main_block(cues)]
    parent, end = cues.parent, cues.end
    out = _beside_blocks(cues, main, beside) if beside else {}
    for i in flagged:
        at = nodes[i]
        while at > 0:
            bits = flags[at]
            if bits & _SECTION_BITS and not at <= main < end[at]:
                out[i] = ROLE_COMMENTS if bits & F_COMMENTS else ROLE_RELATED if bits & F_RELATED else ROLE_OTHER
                break
            if not bits & _IN_SECTION_BITS:
                break  # no enclosing element names such a section
            at = parent[at]
    return out


def _beside_blocks(cues: PageTree, main: int, beside: Sequence[tuple[str, str]]) -> dict[int, str]:
    """The blocks inside an element that HTML puts beside a page's content and that does not
    hold the page's main text (node `main`), with the element's role (`beside`: the names and
    roles of `_BESIDE` whose elements the page has): a form's labels, options and notices (a
    sign-up, a poll, a log-in) are controls, not text to read (other); a navigation element's
    links and a footer's notices, the page's or an article's (who wrote it, its tags, its
    links onward), are the site's layout (template). Such an element around the whole page
    (ASP.NET's form) holds the main text and leaves its blocks alone, and the elements inside
    it are looked at; so does one that holds most of the page's text, whichever block has the
    most plain text (a long footer outside such a form beside an article cut into short
    paragraphs inside it). Elements are found by their tag, outermost first, and their blocks
    as a range of the block list."""
    tag, end, nodes, chars = cues.tag, cues.end, cues.node_of_block, cues.chars
    out: dict[int, str] = {}
    total = -1
    for name, role in beside:
        at = 0
        while True:
            try:
                element = tag.index(name, at)
            except ValueError:
                break
            at = end[element]  # one inside this one is this one's
            if element <= main < at:
                at = element + 1  # it holds the main text: the ones inside it may not
                continue
            lo, hi = _blocks_in(nodes, element, at)
            if lo == hi:
                continue
            if total < 0:
                total = sum(chars)
            if 2 * sum(chars[element:at]) <= total:
                for i in range(lo, hi):
                    out.setdefault(i, role)
    return out


def aside_kernel() -> Any:
    """The extension module where its `aside_blocks` is in use, else None; chosen once, on
    first use, with the page walk."""
    return compiled.checked(checked_aside)


def checked_aside(mod: Any) -> Any:
    """`mod` when its `aside_blocks` gives `aside_blocks_python`'s blocks on the probe page
    (page/compiled.py PROBE_PAGE; its nav, form, footer and comments section), with each
    node taken for the main text and with the sections' bits moved, else None."""
    return compiled.agreeing(mod, ("aside_blocks",), _aside_agrees)


def _aside_agrees(mod: Any) -> bool:
    probe = walk(LexborHTMLParser(compiled.PROBE_PAGE), SegmentParams())
    found_any = False
    for flags in (probe.flags, [f | (F_IN_RELATED if i % 5 == 1 else 0) for i, f in enumerate(probe.flags)]):
        for main in range(len(probe.node_of_block)):
            tree = replace(probe, flags=flags, main=main)
            found = aside_blocks_python(tree)
            found_any = found_any or bool(found)
            if mod.aside_blocks(flags, tree.node_of_block, tree.tag, tree.parent, tree.end, tree.chars,
                                tree.node_of_block[main], *_ASIDE_CONSTANTS) != found:
                return False
    return found_any


def block_decisions_python(
    chars: list[int],
    tchars: list[int],
    outright: bytearray | None,
    nodes: list[int] | None,
    node_chars: list[int],
    node_achars: list[int],
    novel: list[int] | None,
    first: int,
    end: int,
    novelty: list[float] | None,
    presence: list[float] | None,
    scores: list[float] | None,
    max_ratio: float,
    layout_novelty: float,
    layout_presence: float,
    inner: float,
    outer: float,
    max_removed_share: float,
    inner_ratio: float,
    outer_ratio: float,
    region_quantile: float,
) -> tuple[list[bool], list[str]]:
    """A warm host's page: each block's verdict and method (`decide_blocks`' steps 2 and 3;
    a block is inside the content region when `nodes`, its node, is in [first, end); a block
    is a link list when its node has at least half of its text (`node_chars`) in links
    (`node_achars`), and new when at least half of its characters are new to the host
    (`novel`)). The reference for page/_walk.pyx `block_decisions`."""
    n = len(chars)
    inside = [first <= node < end for node in nodes] if nodes is not None else [False] * n
    links = [2 * node_achars[node] >= node_chars[node] for node in nodes] if nodes is not None else [False] * n
    prose = (  # new prose: page-specific text, not a link list
        [2 * new >= c and not link for new, c, link in zip(novel, chars, links, strict=True)]
        if nodes is not None and novel is not None else [False] * n
    )
    template = [False] * n
    method = [METHOD_TABLE] * n
    layout = novelty is not None and presence is not None
    for i in range(n):
        t = tchars[i]
        by_table = t > max_ratio * chars[i] if t else False
        by_pagelet = outright is not None and outright[i] == 1
        on_layout = layout and novelty[i] < layout_novelty and presence[i] >= layout_presence  # type: ignore[index]
        if inside[i] and layout and not on_layout:
            continue  # repetition inside the content region, off the host's layout: content
        if by_table:
            template[i] = True
        elif by_pagelet:
            template[i] = True
            method[i] = METHOD_PAGELET
        elif nodes is not None and not inside[i] and on_layout:
            template[i] = True  # outside the region, at one of the host's layout paths
    if scores is not None:
        keep_below = 0.0  # new prose outside the region scoring up to this stays
        kept = [i for i in range(n) if inside[i] and not template[i]]
        wanted = (inner_ratio > 0.0 and any(links[i] and scores[i] > inner for i in kept)) or (
            outer_ratio > 0.0 and any(prose[i] and not inside[i] and not template[i] and scores[i] > outer
                                      for i in range(n))
        )
        if wanted:  # else the region's text level changes nothing
            level = text_level_python([scores[i] for i in kept], [chars[i] for i in kept], region_quantile)
            if inner_ratio > 0.0:
                inner = max(inner, inner_ratio * level)
            keep_below = outer_ratio * level
        region_chars = 0
        region_removed = 0
        model_inside: list[int] = []
        for i in range(n):
            if template[i]:
                continue
            s = scores[i]
            if inside[i]:
                region_chars += chars[i]
                if s > inner and links[i]:
                    model_inside.append(i)
                    region_removed += chars[i]
            elif s > outer and not (prose[i] and s <= keep_below):
                template[i] = True
                method[i] = METHOD_PAGELEVEL
        if model_inside and region_removed <= max_removed_share * region_chars:
            for i in model_inside:
                template[i] = True
                method[i] = METHOD_PAGELEVEL
    return template, method


def text_level(scores: Sequence[float], chars: list[int], quantile: float) -> float:
    """The templateness under which `quantile` of the text lies: the score of the block at
    which the blocks' characters, taken by rising score, reach `quantile` of their sum (0.0
    without text). Compiled where the page walk is (page/_walk.pyx `text_level`, which the
    compiled decision uses too); `text_level_python` is the reference."""
    kernel = compiled.kernel("text_level")
    if kernel is None:
        return text_level_python(scores, chars, quantile)
    return float(kernel(scores, chars, quantile))


def text_level_python(scores: Sequence[float], chars: Sequence[int], quantile: float) -> float:
    """`text_level` in Python (numpy)."""
    n = len(scores)
    if n == 0:
        return 0.0
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(s, kind="stable")
    reached = np.cumsum(np.asarray(chars, dtype=np.int64)[order])
    total = int(reached[-1])
    if total <= 0:
        return 0.0
    at = int(np.searchsorted(reached, quantile * total, side="left"))
    return float(s[order[min(at, n - 1)]])


def cold_bounds(plp: PageLevelParams) -> tuple[float, float]:
    """The lowest and highest threshold of the model alone: [`cold_floor`, `threshold`] with
    `cold_ratio`, else `threshold` both."""
    if plp.cold_ratio <= 0.0:
        return plp.threshold, plp.threshold
    return min(plp.threshold, plp.cold_floor), plp.threshold


def cold_threshold(scores: Sequence[float], chars: list[int], plp: PageLevelParams) -> float:
    """The templateness above which the model alone calls a block template: `threshold`, or,
    with `cold_ratio`, that ratio of the page's text level kept in `cold_bounds`."""
    floor, ceiling = cold_bounds(plp)
    if floor == ceiling:
        return ceiling
    return min(ceiling, max(floor, plp.cold_ratio * text_level(scores, chars, plp.cold_quantile)))


def _cold(
    cues: PageTree | None, scores: list[float] | None, chars: list[int], plp: PageLevelParams
) -> tuple[list[bool], list[str]]:
    """A host's first page: the page-level model alone, or the page whole without it."""
    n = len(chars)
    if scores is None:
        return [False] * n, [METHOD_COLD] * n
    # The guard reads the model at its lowest threshold: a model that would remove nearly all
    # of a page there has misread the page, whatever a higher threshold would leave of it.
    floor = cold_bounds(plp)[0]
    removed = sum([c for c, s in zip(chars, scores, strict=True) if s > floor])
    total = sum(chars)
    if removed > plp.cold_max_removed_share * total or total - removed < plp.cold_min_kept:
        template = [False] * n
    else:
        threshold = cold_threshold(scores, chars, plp)
        template = [s > threshold for s in scores]
        if cues is not None and True in template:
            keep_an_index(cues, template, chars, plp.max_removed_share)
    return template, [METHOD_PAGELEVEL] * n


def keep_an_index(cues: PageTree, template: list[bool], chars: list[int], share: float) -> None:
    """A first page's main element kept whole where the model would remove more than `share`
    of its text (in place). The main element is the element of the block with the page's most
    plain text (page/tree.py `main_block`); a documentation home page's is its introduction
    followed by the site's table of contents, lists of links that the model, alone on a first
    page, reads as navigation. On later pages the content region gets the same guard, with
    the same share (`pagelevel.max_removed_share`: a page whose content is links); a news
    article's element, whose related links and captions are a small part of its text, keeps
    the model's removals. A main block that is the body's own text names no element: the
    page's guard (`cold_max_removed_share`) is the one for the whole page."""
    nodes = cues.node_of_block  # in document order, as the nodes are numbered
    if not nodes:
        return
    main = nodes[main_block(cues)]
    if cues.tag[main] in _PAGE_TAGS:
        return  # the page itself: its guard is `cold_max_removed_share`'s
    lo, hi = _blocks_in(nodes, main, cues.end[main])
    inside = chars[lo:hi]
    removed = sum([c for c, t in zip(inside, template[lo:hi], strict=True) if t])
    if removed > share * sum(inside):
        template[lo:hi] = [False] * (hi - lo)


def _blocks_in(nodes: list[int], first: int, end: int) -> tuple[int, int]:
    """The blocks whose nodes lie in [first, end), an element's nodes, as the range lo:hi of
    the block list (`nodes`: each block's node, in document order as the nodes are numbered)."""
    return bisect_left(nodes, first), bisect_left(nodes, end)


def _roles(ballot: Ballot, template: list[bool], method: list[str], warm: bool, aside: dict[int, str]) -> list[str]:
    """Each block's role (see the module's docstring); compiled where the page walk is
    (page/_walk.pyx `block_roles`)."""
    cues = ballot.cues
    novel = ballot.novel
    chars = ballot.tally().chars
    args: tuple[Any, ...]
    if warm and cues is not None and novel is not None:  # page-specific text told apart
        args = (template, method, aside, cues.node_of_block, cues.chars, cues.achars, novel, chars)
    else:
        args = (template, method, aside, None, None, None, None, chars)
    kernel = compiled.kernel("block_roles")
    if kernel is None:
        return block_roles_python(*args)
    return kernel(*args, ROLE_MAIN, ROLE_TEMPLATE, ROLE_RELATED, ROLE_OTHER, METHOD_MARKUP, METHOD_PAGELEVEL)  # type: ignore[no-any-return]


def block_roles_python(
    template: list[bool], method: list[str], aside: dict[int, str], node_of_block: list[int] | None,
    node_chars: list[int] | None, node_achars: list[int] | None, novel: list[int] | None, chars: list[int],
) -> list[str]:
    """Each block's role (the reference for page/_walk.pyx `block_roles`): a kept block's is
    main; a removed one's is its section's where the markup names one (`aside`) and the
    markup or the model removed it, related or other for page-specific text the model
    removed (at least half of it new to the host: related where its node's text is mostly
    links), else template. `node_of_block`, `node_chars`, `node_achars` and `novel` are None
    where page-specific text is not told apart (a cold page, no block tree or no counts)."""
    roles = [ROLE_MAIN] * len(template)
    for i, t in enumerate(template):
        if not t:
            continue
        role = ROLE_TEMPLATE
        if i in aside and method[i] in (METHOD_MARKUP, METHOD_PAGELEVEL):
            role = aside[i]
        elif method[i] == METHOD_PAGELEVEL and node_of_block is not None and novel is not None \
                and 2 * novel[i] >= chars[i]:  # page-specific text
            assert node_chars is not None and node_achars is not None
            node = node_of_block[i]
            role = ROLE_RELATED if 2 * node_achars[node] >= node_chars[node] else ROLE_OTHER
        roles[i] = role
    return roles
