"""The one decision every shell calls: a raw page plus its host's table -> an Outcome.

`detemplate run`, `eval`, `bench` and the stream worker all go through `process_page`
(or `decide`, its core, when the shell manages the table itself), so a page's verdict
never depends on which shell ran it.

`decide` takes a page through its stages, each once, in this order (`STAGES`):

    walk_page      the guards, the parse and the walk: blocks (and the block tree with its
                   cues when a detector asks for it); a page that is not usable input
                   stops here as a dead letter, the table untouched
    page_keys      each detector's per-page state and the keys the page adds to the
                   host's table: segment keys, then pagelet keys, then cluster keys
    update_table   the one update of the host's table with those keys: their DFs
    cast_votes     each detector's vote, in detector order (detectors/base.py)
    combine_votes  one verdict per block: the table's template share over the pagelets'
                   outright votes over the page-level model's, and the kept text
    page_outcome   the clean page, its links and (with --html) HTML, and the events

The detectors are in `DETECTORS`, in the order their keys go into the table (on the wire:
the stream's per-page deltas replay `Outcome.applied` in that order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from selectolax.lexbor import LexborHTMLParser, LexborNode

from . import links
from .decision import decide_blocks
from .detectors import clusters, layout
from .detectors.base import Ballot, Contribution, Detector, SegmentKeys, WalkedPage
from .detectors.clusters import CLUSTERS, cluster_events, host_clusters
from .detectors.layout import LAYOUT
from .detectors.pagelets import PAGELETS, pagelet_report
from .detectors.pagelevel import PAGE_LEVEL
from .detectors.segments import SEGMENT_TABLE
from .errors import BadInputError
from .links import absolute_links, base_url
from .model import (
    CONTENT,
    TEMPLATE,
    Block,
    BlockVerdict,
    CleanPage,
    DeadPage,
    Outcome,
    RawPage,
    TemplateEvent,
)
from .page import compiled, cues, parse, parse_page, segment_tree, walk
from .page.meta import page_lang, page_title
from .params import EngineParams
from .table import HostTable

# In the order their keys go into the host's table (and their votes are cast): the segment
# table first (it says whether the host is warm), clusters before the page-level model
# (key votes before the tally that the model reads).
DETECTORS: tuple[Detector[Any], ...] = (SEGMENT_TABLE, PAGELETS, LAYOUT, CLUSTERS, PAGE_LEVEL)

STAGES = ("walk_page", "page_keys", "update_table", "cast_votes", "combine_votes", "page_outcome")


class PageKeys(NamedTuple):
    """The keys stage's result: each detector's contribution (None where it sat the page out),
    in DETECTORS order, and the keys of the one table update, in that order too."""

    contributions: tuple[Contribution | None, ...]
    applied: Sequence[int]


class Combined(NamedTuple):
    """The combine stage's result: one verdict per block, the page's kept text, and the hrefs
    of the kept blocks and of the template blocks (as written, in block order)."""

    verdicts: list[BlockVerdict]
    text: str
    content_hrefs: list[str]
    template_hrefs: list[str]


C = TypeVar("C", bound=Contribution)


def contribution(keys: PageKeys, detector: Detector[C]) -> C | None:
    """One detector's contribution to the page (None where it sat the page out)."""
    found: C | None = keys.contributions[DETECTORS.index(detector)]  # type: ignore[assignment]  # by position
    return found


def decide(page: RawPage, table: HostTable, params: EngineParams, with_html: bool = False) -> Outcome:
    """Decide one page against its host's table, updating the table in place.

    A page that is not usable input returns a dead Outcome and leaves the table as it was.
    """
    return decide_with_ballot(page, table, params, with_html)[0]


class Decision(NamedTuple):
    """A page's outcome, with the ballot it weighed and its walk (both None for a dead page)."""

    outcome: Outcome
    ballot: Ballot | None
    walked: WalkedPage | None


def decide_with_ballot(
    page: RawPage, table: HostTable, params: EngineParams, with_html: bool = False, held: bool = False,
    walked: WalkedPage | None = None,
) -> tuple[Outcome, Ballot | None]:
    """`decide`, also handing back the page's ballot (None for a dead page): the evidence
    the decision weighed, which `detemplate eval --loco` replays under other parameters.
    `held`: the page is its host's first, decided once its second is in `table`
    (engine/firstpages.py); `walked`: its walk on arrival (`decide_page`)."""
    decision = decide_page(page, table, params, with_html, held, walked)
    return decision.outcome, decision.ballot


def decide_page(
    page: RawPage, table: HostTable, params: EngineParams, with_html: bool = False, held: bool = False,
    walked: WalkedPage | None = None,
) -> Decision:
    """`decide_with_ballot`, also handing back the page's walk (a host's held first page is
    decided again on a table that takes its second page's keys from it: engine/firstpages.py).
    `walked`: the page's walk from an earlier decision, used again where this one would walk
    it alike (not for --html, whose output changes the tree: `_strip_template`)."""
    try:
        if walked is None or with_html or (walked.cues is not None) != needs_cues(table, params):
            walked = walk_page(page, table, params, with_html)
    except BadInputError as exc:
        return Decision(Outcome(None, DeadPage(page.url, page.host, exc.reason, exc.detail, page.source)), None, None)
    keys = page_keys(walked, table, params)
    dfs = update_table(keys, table)
    ballot = cast_votes(walked, keys, dfs, table, params)
    ballot.held = held
    combined = combine_votes(walked, ballot, params)
    return Decision(page_outcome(page, walked, keys, ballot, combined, table, params), ballot, walked)


def observe_page(page: RawPage, table: HostTable, params: EngineParams, walked: WalkedPage | None = None) -> bool:
    """What `decide` does to `table` for one page, without the votes: its keys observed (and
    its cluster assigned). False for a page that is not usable input (the table untouched).
    The page-level model, which keeps nothing in the table, does not run. `walked`: the
    page's walk, when a decision of it made one (what the keys are read from)."""
    if params.pagelevel.enabled:
        params = dataclasses.replace(params, pagelevel=dataclasses.replace(params.pagelevel, enabled=False))
    if walked is None:
        try:
            walked = walk_page(page, table, params, False)
        except BadInputError:
            return False
    update_table(page_keys(walked, table, params), table)
    return True


def walk_page(page: RawPage, table: HostTable, params: EngineParams, with_html: bool) -> WalkedPage:
    """Stage 1: the guards, the parse and the walk; raises BadInputError for unusable input."""
    segment = params.segment
    tree = parse(page.html, segment) if with_html else parse_page(page.html, segment)
    text_nodes: list[tuple[LexborNode, int]] | None = [] if with_html else None
    runs: list[int] = []
    if needs_cues(table, params):
        # One walk cuts the same blocks as segment_tree and collects the block tree and its cues.
        cues = walk(tree, segment, text_nodes, runs)
        blocks = cues.blocks
        node_text = cues.text
        texts = [node_text[i] for i in cues.node_of_block]
        return WalkedPage(tree, blocks, texts, cues, text_nodes, runs)
    blocks = segment_tree(tree, segment, text_nodes, runs)
    texts = [" ".join([seg[1] for seg in block[1]]) for block in blocks]
    return WalkedPage(tree, blocks, texts, None, text_nodes, runs)


def needs_cues(table: HostTable, params: EngineParams) -> bool:
    """Whether a detector wants the walk's block tree with its cues for a page of this table."""
    return any(d.needs_cues(table, params) for d in DETECTORS)


def page_keys(walked: WalkedPage, table: HostTable, params: EngineParams) -> PageKeys:
    """Stage 2: each detector's per-page state, and the keys the page adds to the host's table."""
    cues = walked.cues
    if cues is not None and cues.keys is not None:  # the compiled walk's
        segments = SegmentKeys(*cues.keys)
    else:
        kernel = compiled.kernel("segment_keys")
        segments = SegmentKeys(*(segment_keys_python(walked.blocks) if kernel is None else kernel(walked.blocks)))
    contributions = tuple([d.prepare(walked, segments, table, params) for d in DETECTORS])
    parts: list[Sequence[int]] = [c.keys for c in contributions if c is not None and c.keys]
    if not parts:
        return PageKeys(contributions, [])
    # One update of the host's table: segment keys, then pagelet keys, then cluster keys.
    applied = parts[0]
    if len(parts) > 1:
        applied = list(applied)
        for part in parts[1:]:
            applied.extend(part)  # a C-level copy, not one iteration step a key
    return PageKeys(contributions, applied)


def segment_keys_python(blocks: list[Block]) -> tuple[list[int], set[int]]:
    """The page's distinct segment keys, sorted and as a set (the reference for page/_walk.pyx
    `segment_keys`)."""
    distinct = {seg[0] for block in blocks for seg in block[1]}
    return sorted(distinct), distinct


def update_table(keys: PageKeys, table: HostTable) -> tuple[list[int], ...]:
    """Stage 3: the one update of the host's table; each detector's share of the DFs, in DETECTORS order."""
    all_dfs = table.observe(keys.applied)
    out: list[list[int]] = []
    at = 0
    for c in keys.contributions:
        n = len(c.keys) if c is not None else 0
        out.append(all_dfs if at == 0 and n == len(all_dfs) else all_dfs[at : at + n])
        at += n
    return tuple(out)


def cast_votes(
    walked: WalkedPage, keys: PageKeys, dfs: tuple[list[int], ...], table: HostTable, params: EngineParams
) -> Ballot:
    """Stage 4: each detector's vote on the page's blocks, in DETECTORS order."""
    ballot = Ballot(params, walked.blocks, table.pages, walked.cues, title=page_title(walked.tree))
    for detector, mine, its_dfs in zip(DETECTORS, keys.contributions, dfs, strict=True):
        if mine is not None:
            detector.vote(mine, its_dfs, ballot)
    return ballot


def combine_votes(walked: WalkedPage, ballot: Ballot, params: EngineParams) -> Combined:
    """Stage 5: one verdict per block, weighing the ballot (engine/decision.py), and the kept text."""
    decided = decide_blocks(ballot, params)
    tally = ballot.tally()
    lists = (walked.blocks, walked.texts, tally.chars, tally.template_chars, decided.template, decided.method,
             decided.role)
    kernel = compiled.kernel("block_verdicts")
    if kernel is not None:  # the same loops, compiled (page/_walk.pyx block_verdicts, kept_text)
        verdicts, kept, content_hrefs, template_hrefs = kernel(*lists, BlockVerdict, TEMPLATE, CONTENT)
        text = compiled.kernel("kept_text")(walked.blocks, walked.texts, walked.runs, decided.template, kept)
        return Combined(verdicts, text, content_hrefs, template_hrefs)
    verdicts, kept, content_hrefs, template_hrefs = block_verdicts_python(*lists)
    text = kept_text_python(walked.blocks, walked.texts, walked.runs, decided.template, kept)
    return Combined(verdicts, text, content_hrefs, template_hrefs)


def block_verdicts_python(
    blocks: list[Block], texts: list[str], chars_of: list[int], tchars_of: list[int], template_of: list[bool],
    method_of: list[str], role_of: list[str],
) -> tuple[list[BlockVerdict], list[str], list[str], list[str]]:
    """One verdict per block, the kept blocks' texts, and the hrefs of the kept blocks and of
    the template blocks, in block order (the reference for the compiled loop)."""
    verdicts: list[BlockVerdict] = []
    kept: list[str] = []
    kept_links: list[str] = []
    template_links: list[str] = []
    new_verdict = tuple.__new__  # BlockVerdict(...) without the NamedTuple's Python-level __new__
    for block, text, chars, tchars, template, by, role in zip(
        blocks, texts, chars_of, tchars_of, template_of, method_of, role_of, strict=True
    ):
        if template:
            verdict = TEMPLATE
            template_links.extend(block[3])
        else:
            verdict = CONTENT
            kept.append(text)
            kept_links.extend(block[3])
        ratio = tchars / chars if tchars else 0.0
        verdicts.append(new_verdict(BlockVerdict, (block[0], text, chars, tchars, ratio, verdict, by, role)))
    return verdicts, kept, kept_links, template_links


def kept_text_python(
    blocks: list[Block], texts: list[str], runs: Sequence[int], template_of: list[bool], kept: list[str]
) -> str:
    """The page's kept text, in document order, a line for each paragraph (the reference for
    the compiled `kept_text`).

    A block's segments are its own text, which goes on after a nested block's (an article's
    paragraphs around a list), and may be several paragraphs and headings: the walk's `runs`
    say the order and the lines, as (block, count) pairs, each a line of the block's segments.
    Each line of a kept block is a line of the text; where every block's text is one line
    and the lines are in block order, that is the kept blocks' texts, `kept`, a line each.
    """
    n = len(blocks)
    if not runs or (len(runs) == 2 * n and list(runs[0::2]) == list(range(n))):
        return "\n".join(kept)  # (no runs: a page not walked here, taken in block order)
    cursor = [0] * n
    out: list[str] = []
    for b, m in zip(runs[0::2], runs[1::2], strict=True):
        c = cursor[b]
        cursor[b] = c + m
        if template_of[b]:
            continue
        segs = blocks[b][1]
        out.append(texts[b] if m == len(segs) else " ".join([seg[1] for seg in segs[c : c + m]]))
    return "\n".join(out)


def page_outcome(
    page: RawPage,
    walked: WalkedPage,
    keys: PageKeys,
    ballot: Ballot,
    combined: Combined,
    table: HostTable,
    params: EngineParams,
) -> Outcome:
    """Stage 6: the clean page (text, blocks, links, HTML with --html) and the events."""
    verdicts = combined.verdicts
    tree = walked.tree
    text_nodes = walked.text_nodes
    html = _strip_template(tree, text_nodes, walked.blocks, verdicts) if text_nodes is not None else None
    content_links, template_links = split_links(page, tree, combined.content_hrefs, combined.template_hrefs)
    clustered = contribution(keys, CLUSTERS)
    cid = None if clustered is None else clustered.assignment.cid
    clean = CleanPage(
        page.url, page.host, table.pages, combined.text, tuple(verdicts), html, content_links,
        template_links, cid, ballot.title, page_lang(tree) or page.meta.get("content_language"), page.meta,
    )
    events: tuple[TemplateEvent, ...] = ()
    if clustered is not None:
        events = cluster_events(page, table.pages, clustered, params.clusters)
    event = table.take_event(params.events)
    if event is not None:
        report = None
        pagelets = contribution(keys, PAGELETS)
        if params.pagelets.events and pagelets is not None:
            report = pagelet_report(pagelets, walked.texts, params.pagelets.max_listed)
        events += (TemplateEvent(event[0], page.host, table.pages, page.url, event[1], report, cid),)
    if clustered is None:
        return Outcome(clean, None, events, tuple(keys.applied))
    return Outcome(clean, None, events, tuple(keys.applied), cid, clustered.assignment.signature)


def replay_page(
    table: HostTable, applied: Sequence[int], cluster: int | None, signature: bytes, params: EngineParams
) -> None:
    """Repeat on `table` what `decide` did to it for one page, from the page's Outcome
    (applied, cluster, cluster_signature) alone: the stream worker's changelog replay."""
    if cluster is not None:
        host_clusters(table, params.clusters).replay(cluster, signature)
    table.observe(applied)
    table.take_event(params.events)


class TableStore(Protocol):
    """What `process_page` needs of a store: a host's table, and taking it back
    (state/base.py's SegmentStore is one, with more)."""

    def get(self, host: str) -> HostTable | None: ...

    def put(self, host: str, table: HostTable) -> None: ...


def process_page(page: RawPage, store: TableStore, params: EngineParams, with_html: bool = False) -> Outcome:
    """Decide one page with the host's table from `store`, and hand the table back to it."""
    return process_decision(page, store, params, with_html).outcome


def process_decision(page: RawPage, store: TableStore, params: EngineParams, with_html: bool = False) -> Decision:
    """`process_page`, also handing back the page's ballot and walk (`decide_page`)."""
    table = store.get(page.host)
    if table is None:
        table = HostTable(params.table)
    decision = decide_page(page, table, params, with_html)
    if decision.outcome.clean is not None:
        store.put(page.host, table)
    return decision


def forget_caches(params: EngineParams) -> None:
    """Empty the bounded caches the engine keeps across pages, of what it read on them: class
    and id hints and layout class forms (page/cues.py, and the compiled walker's own, whose
    walker is made anew), resolved links, block path keys and tagged layout keys. What a page
    costs then is what it costs in a first pass over such pages; `detemplate bench` empties
    them before each round of the detector, whose rounds go over the same pages again."""
    cues.HINTS.clear()
    cues.LAYOUT_CLASSES.clear()
    links._RESOLVED.clear()
    clusters._PATH_KEYS.clear()
    layout._path_keys.cache_clear()
    layout._container_key.cache_clear()
    compiled.walker.cache_clear()
    compiled.walker(params.segment.block_tags, params.segment.skip_tags)  # made now, not in the first page's time


def split_links(
    page: RawPage, tree: LexborHTMLParser, content: list[str], template: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The absolute URLs of the links in content blocks and in template blocks, from their
    hrefs (`Combined`: content_hrefs, template_hrefs)."""
    if not content and not template:
        return (), ()
    base = base_url(tree, page.url)
    return tuple(absolute_links(base, content)), tuple(absolute_links(base, template))


def _strip_template(
    tree: LexborHTMLParser,
    text_nodes: list[tuple[LexborNode, int]],
    blocks: list[Block],
    verdicts: list[BlockVerdict],
) -> str:
    """The page's HTML with the text of template blocks removed (only for --html).

    Only text nodes are removed: elements stay, so the page keeps its structure and no
    node is freed twice (lexbor frees a subtree with its root).
    """
    drop: set[int] = set()
    keep: set[int] = set()
    for block, v in zip(blocks, verdicts, strict=True):
        (drop if v.verdict == TEMPLATE else keep).update(seg.key for seg in block.segments)
    for node, key in text_nodes:
        if key in drop and key not in keep:
            node.decompose()
    return tree.html or ""
