"""Plain data that flows through detemplate: raw pages in, clean pages, events and dead letters out.

Every shell (offline `run`, the stream worker) produces these same objects through
`detemplate.engine.pipeline`, and serialises them with `detemplate.io.codec`, so both modes emit the
same bytes for the same pages in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Block verdicts.
CONTENT = "content"
TEMPLATE = "template"

# Which method decided a block.
METHOD_TABLE = "table"  # the host's segment table had learned enough to judge it
METHOD_COLD = "cold"  # the host had shown too few pages: nothing could be learned yet
METHOD_PAGELEVEL = "pagelevel"  # the page-level model judged it from the page alone
METHOD_PAGELET = "pagelet"  # it lies in a template pagelet (pagelets.enabled), which the table alone kept
METHOD_MARKUP = "markup"  # the markup names its section: comments or related links (engine/decision.py)


@dataclass(frozen=True, slots=True)
class RawPage:
    """A crawled page as it arrives.

    url: the page's URL.
    html: the decoded HTML text.
    host: the site the page belongs to (partition key of the stream); from the URL when not given.
    source: where the page came from, for error reports (``file.jsonl:12``, ``pages.raw/3/1042``).
    meta: what the input says about the page beside its HTML, passed through to the clean
        page untouched: ``date``, ``last_modified`` (ISO 8601), ``content_language`` (HTTP),
        ``warc_file``, ``warc_offset``, ``warc_record_id``, ``warc_target_uri`` (docs/fields.md).
    """

    url: str
    html: str
    host: str
    source: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


# Segment, Block and BlockVerdict are made hundreds of times per page: NamedTuples,
# which are built several times faster than frozen dataclasses.


class Segment(NamedTuple):
    """A text segment: one visible text node, identified by DOM path plus literal text."""

    key: int  # 64-bit stable hash of (path, normalised text)
    text: str  # whitespace-normalised text
    length: int  # len(text), the weight of the segment in a block's template ratio


class Block(NamedTuple):
    """A layout block: the text segments directly under one layout element."""

    path: str  # DOM path of the layout element
    segments: list[Segment]
    order: int  # position of the block in document order (0-based)
    links: Sequence[str] = ()  # hrefs of the <a href> in it, as written, in document order


class BlockVerdict(NamedTuple):
    """What was decided about one block, and why."""

    path: str
    text: str
    chars: int  # text length of the block (sum of its segment lengths)
    template_chars: int  # length of its segments that are template segments
    ratio: float  # template_chars / chars
    verdict: str  # CONTENT (in the clean page's text) or TEMPLATE (not)
    method: str  # METHOD_TABLE, METHOD_PAGELET, METHOD_PAGELEVEL, METHOD_MARKUP or METHOD_COLD
    role: str = "main"  # main (content); template; or page-specific text that is not main content:
    #                     comments, related (links to other pages), other (engine/decision.py)


@dataclass(frozen=True, slots=True)
class CleanPage:
    """A page with its template marked and its content text extracted."""

    url: str
    host: str
    page_no: int  # the host's own page counter: 1 for the first page of the host
    text: str  # kept content text, blocks joined by newlines
    blocks: tuple[BlockVerdict, ...]
    html: str | None = None  # the page with template blocks removed, when asked for
    # Absolute URLs (fragments dropped, distinct, in document order) of the links in the
    # content blocks and in the template blocks: link analysis drops the template ones.
    content_links: tuple[str, ...] = ()
    template_links: tuple[str, ...] = ()
    # The page's template cluster on its host (clusters.enabled): pages of one kind
    # (articles, tag pages, API reference) share an id; None with clusters off.
    cluster: int | None = None
    title: str | None = None  # the page's <title>, whitespace-normalised (page/meta.py)
    lang: str | None = None  # the language the page declares (<html lang>, content-language meta or HTTP)
    meta: Mapping[str, Any] = field(default_factory=dict)  # the raw page's meta, passed through

    @property
    def chars(self) -> int:
        return sum(b.chars for b in self.blocks)

    @property
    def template_chars(self) -> int:
        return sum(b.chars for b in self.blocks if b.verdict == TEMPLATE)


class TemplatePagelet(NamedTuple):
    """One template pagelet of the page that caused a template event (pagelets.events)."""

    shingle: int  # the pagelet's first min-hash key in the host's table (its shingle)
    df: int  # the pagelet's DF (the quorum-th highest DF of its min-hash keys)
    links: int  # links in it
    order: int  # its position among the page's pagelets, in document order
    first_block: int  # its blocks are the clean page's blocks[first_block:end_block]
    end_block: int
    path: str  # DOM path of its element
    text: str  # its text (block texts joined by spaces)


@dataclass(frozen=True, slots=True)
class PageletReport:
    """What a template event says about the pagelets of its page."""

    page_pagelets: int  # pagelets of the page (with text)
    template_pagelets: int  # of those, template pagelets
    listed: tuple[TemplatePagelet, ...]  # the first pagelets.max_listed template ones, in page order


@dataclass(frozen=True, slots=True)
class TemplateEvent:
    """Something the detector learned about a host's template.

    type: ``template.learned`` (the host's template first became known),
          ``template.changed`` (a marked change, such as a redesign),
          ``template.cluster_new`` (a page opened a new template cluster on a host that
          had one already: a new page type) or ``template.cluster_dropped`` (a cluster
          expired or was evicted, see ClusterParams).
    details: counts that say what changed.
    cluster: the template cluster of the page that caused the event (clusters.enabled).
    pagelets: with ``pagelets.events``, the template pagelets of the page (written into
          the details, see docs/fields.md); None otherwise.
    """

    type: str
    host: str
    page_no: int
    url: str
    details: dict[str, Any] = field(default_factory=dict)
    pagelets: PageletReport | None = None
    cluster: int | None = None


@dataclass(frozen=True, slots=True)
class DeadPage:
    """A page or message that could not be processed, with the reason."""

    url: str
    host: str
    reason: str  # short stable code (see detemplate.engine.errors.BadInputError)
    detail: str  # one human sentence
    source: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one page produced: a clean page or a dead letter, plus events.

    applied: the keys the page added to its host's table (empty for dead pages): its
             distinct segment keys, sorted, then (when pagelets are tracked) its distinct
             pagelet keys, sorted, then (clusters.statistics) the page's cluster keys.
             Replaying them with `HostTable.observe` in page order rebuilds the table
             exactly: the stream worker logs them as the per-page state delta.
    cluster: the page's template cluster (None with clusters off or for dead pages).
    cluster_signature: the page's MinHash signature (u32 little-endian slots) when the
             host's cluster state took it in (a new cluster, or clusters.follow), else
             empty: with `cluster`, what `pipeline.replay_page` needs to repeat the
             assignment.
    """

    clean: CleanPage | None
    dead: DeadPage | None
    events: tuple[TemplateEvent, ...] = ()
    applied: tuple[int, ...] = ()
    cluster: int | None = None
    cluster_signature: bytes = b""
