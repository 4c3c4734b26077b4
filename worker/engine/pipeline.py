"""The one decision every shell calls: a raw page plus its host's state -> an Outcome.

`detemplate run`, `eval`, `bench` and the stream worker all go through `process_page`
(or `decide`, its core, when the shell manages the table itself), so a page's verdict
never depends on which shell ran it.
"""

from __future__ import annotations

from collections.abc import Sequence

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..state.base import SegmentStore
from .detectors import pagelevel
from .detectors.clusters import Assignment, HostClusters, cluster_keys, page_paths
from .detectors.pagelets import (
    PageletSketch,
    page_sketches,
    pagelet_df,
    pagelet_path,
)
from .errors import BadInputError, StateError
from .links import absolute_links, base_url
from .model import (
    CONTENT,
    METHOD_COLD,
    METHOD_PAGELET,
    METHOD_PAGELEVEL,
    METHOD_TABLE,
    TEMPLATE,
    Block,
    BlockVerdict,
    CleanPage,
    DeadPage,
    Outcome,
    PageletReport,
    RawPage,
    TemplateEvent,
    TemplatePagelet,
)
from .page import PageTree, parse, segment_tree, walk
from .params import ClusterParams, EngineParams
from .table import HostTable

CLUSTER_NEW = "template.cluster_new"
CLUSTER_DROPPED = "template.cluster_dropped"


def decide(page: RawPage, table: HostTable, params: EngineParams, with_html: bool = False) -> Outcome:
    """Decide one page against its host's table, updating the table in place.

    A page that is not usable input returns a dead Outcome and leaves the table as it was.
    """
    plp = params.pagelevel
    pgp = params.pagelets
    track = pgp.enabled or pgp.events  # the page's pagelet keys go into the table
    # The page-level model runs on a host's first pages (all of them when max_host_pages
    # is 0); its walk cuts the same blocks as segment_tree and collects its cues, and the
    # block tree that pagelets are cut from.
    use_model = plp.enabled and (plp.max_host_pages == 0 or table.pages < plp.max_host_pages)
    scores = None
    texts: list[str] | None = None  # each block's text, when the walk has made them
    ptree: PageTree | None = None
    try:
        tree = parse(page.html, params.segment)
        text_nodes: list[tuple[LexborNode, int]] | None = [] if with_html else None
        if use_model or track:
            # pagelevel.score_page, with the block tree kept for the pagelets.
            ptree = walk(tree, params.segment, text_nodes)
            blocks = ptree.blocks
            ptext = ptree.text
            texts = [ptext[i] for i in ptree.node_of_block]
            if use_model:
                scores = pagelevel.block_scores(
                    ptree,
                    pagelevel.load_model(plp.model),
                    plp.smoothing,
                    plp.weighting,
                    plp.max_values,
                    plp.max_smooth_nodes,
                )
        else:
            blocks = segment_tree(tree, params.segment, text_nodes)
    except BadInputError as exc:
        return Outcome(None, DeadPage(page.url, page.host, exc.reason, exc.detail, page.source))

    seg_keys = {seg[0] for block in blocks for seg in block[1]}
    keys = sorted(seg_keys)
    n = len(keys)
    cp = params.clusters
    assignment = None
    cl_keys: list[int] = []
    if cp.enabled:
        # The page's template cluster (docs/clusters.md); with statistics, its segment
        # keys are counted again under the cluster's tagged keys.
        clusters = host_clusters(table, cp)
        assignment = clusters.assign(page_paths(blocks, cp.features))
        if cp.statistics:
            cl_keys = cluster_keys(keys, assignment.cid)
    sketches: list[PageletSketch] = []
    page_pagelets = 0
    pl_keys: list[int] = []
    if ptree is not None and track:
        page_pagelets, sketches = page_sketches(ptree, pgp)
        pl_keys = sorted({key for p in sketches for key in p.keys} - seg_keys)
    # One update of the host's table: segment keys, then pagelet keys, then cluster keys.
    applied = keys + pl_keys + cl_keys if pl_keys or cl_keys else keys
    all_dfs = table.observe(applied)
    dfs = all_dfs[:n]
    pl_df = dict(zip(pl_keys, all_dfs[n : n + len(pl_keys)], strict=True))
    tparams = params.table
    pages = table.pages
    threshold = tparams.threshold(pages)
    max_ratio = tparams.template_ratio
    # Before the host has shown `threshold` pages no segment can be template yet:
    # say so, rather than claim the table found everything to be content.
    if pages >= threshold:
        method = METHOD_TABLE
        template_keys = {key for key, df in zip(keys, dfs, strict=True) if df >= threshold}
        if cl_keys and assignment is not None:
            # A segment is also template when its cluster's pages make it so.
            cpages = assignment.pages
            cthreshold = tparams.threshold(cpages)
            if cpages >= cthreshold:
                cdfs = all_dfs[len(all_dfs) - n :]
                template_keys.update(key for key, df in zip(keys, cdfs, strict=True) if df >= cthreshold)
    else:
        method = METHOD_COLD
        template_keys = set()

    if texts is None:
        texts = [" ".join([seg[1] for seg in block[1]]) for block in blocks]
    rows = []
    if template_keys:
        for (path, segs, _, _), text in zip(blocks, texts, strict=True):
            chars = 0
            tchars = 0
            for key, _text, length in segs:
                chars += length
                if key in template_keys:
                    tchars += length
            rows.append((path, text, chars, tchars, tchars / chars))
    else:  # no segment of this page is template (always so on a cold host)
        for (path, segs, _, _), text in zip(blocks, texts, strict=True):
            chars = sum([seg[2] for seg in segs])
            rows.append((path, text, chars, 0, 0.0))
    # Template pagelets: a pagelet's DF (the quorum-th highest DF of its min-hash keys)
    # reached the threshold. With pagelets.enabled, their blocks are template.
    template_pagelets: list[tuple[PageletSketch, int]] = []
    in_template_pagelet: bytearray | None = None
    if sketches and method == METHOD_TABLE:
        quorum = pgp.quorum
        pl_threshold = tparams.threshold(pages, pgp.template_df)
        for p in sketches:
            pdf = pagelet_df([pl_df.get(key, 0) for key in p.keys], quorum)
            if pdf >= pl_threshold:
                template_pagelets.append((p, pdf))
        if template_pagelets and pgp.enabled:
            in_template_pagelet = bytearray(len(blocks))
            for p, _ in template_pagelets:
                in_template_pagelet[p.first : p.end] = b"\x01" * (p.end - p.first)

    # The page-level model decides where the table cannot (see detemplate.engine.detectors.pagelevel.overrule).
    # Blocks of template pagelets are template already: the model does not judge them.
    model_says = None
    if scores is not None:
        early = pages < tparams.template_df
        judged_rows = rows
        if in_template_pagelet is not None:
            judged_rows = [
                (r[0], r[1], r[2], r[2], 1.0) if flag else r for r, flag in zip(rows, in_template_pagelet, strict=True)
            ]
        model_says = pagelevel.overrule(scores, judged_rows, method == METHOD_COLD, max_ratio, plp, early)

    verdicts = []
    kept = []
    new_verdict = tuple.__new__  # BlockVerdict(...) without the NamedTuple's Python-level __new__
    for i, (path, text, chars, tchars, ratio) in enumerate(rows):
        by = method
        is_template = ratio > max_ratio
        if not is_template and in_template_pagelet is not None and in_template_pagelet[i]:
            is_template = True
            by = METHOD_PAGELET
        elif model_says is not None:
            said = model_says[i]
            if said is not None:
                is_template = said
                by = METHOD_PAGELEVEL
        if is_template:
            verdict = TEMPLATE
        else:
            verdict = CONTENT
            kept.append(text)
        verdicts.append(new_verdict(BlockVerdict, (path, text, chars, tchars, ratio, verdict, by)))

    html = _strip_template(tree, text_nodes, blocks, verdicts) if text_nodes is not None else None
    content_links, template_links = split_links(page, tree, blocks, verdicts)
    cid = None if assignment is None else assignment.cid
    clean = CleanPage(
        page.url, page.host, table.pages, "\n".join(kept), tuple(verdicts), html, content_links, template_links, cid
    )
    events: tuple[TemplateEvent, ...] = ()
    if assignment is not None and cp.events and (assignment.dropped or (assignment.new and assignment.cid > 0)):
        events = cluster_events(page, table.pages, assignment, len(clusters.clusters))
    event = table.take_event(params.events)
    if event is not None:
        report = None
        if pgp.events and ptree is not None:
            report = pagelet_report(ptree, texts, page_pagelets, template_pagelets, pgp.max_listed)
        events += (TemplateEvent(event[0], page.host, table.pages, page.url, event[1], report, cid),)
    if assignment is None:
        return Outcome(clean, None, events, tuple(applied))
    return Outcome(clean, None, events, tuple(applied), cid, assignment.signature)


# -- template clusters ------------------------------------------------------------------


def host_clusters(table: HostTable, params: ClusterParams) -> HostClusters:
    """The host's cluster assigner, kept in `table.clusters` (parsed on first use).

    A stored state that these params cannot read (another clusters.num_perm) starts the
    host's clusters again: cluster ids are per host and only compared within it.
    """
    hc = table.clusters
    if isinstance(hc, HostClusters):
        return hc
    if hc is None:
        hc = HostClusters(params)
    else:
        try:
            hc = HostClusters.from_bytes(hc, params)
        except StateError:
            hc = HostClusters(params)
    table.clusters = hc
    return hc


def replay_page(
    table: HostTable, applied: Sequence[int], cluster: int | None, signature: bytes, params: EngineParams
) -> None:
    """Repeat on `table` what `decide` did to it for one page, from the page's Outcome
    (applied, cluster, cluster_signature) alone: the stream worker's changelog replay."""
    if cluster is not None:
        host_clusters(table, params.clusters).replay(cluster, signature)
    table.observe(applied)
    table.take_event(params.events)


def cluster_events(page: RawPage, page_no: int, a: Assignment, live: int) -> tuple[TemplateEvent, ...]:
    """``template.cluster_dropped`` for each cluster that went, then ``template.cluster_new``."""
    events = [
        TemplateEvent(
            CLUSTER_DROPPED, page.host, page_no, page.url,
            {"dropped_cluster": gone, "cluster_pages": pages, "reason": reason, "clusters": live},
            None, a.cid,
        )
        for gone, pages, reason in a.dropped
    ]
    if a.new and a.cid > 0:
        details = {"similarity": round(a.similarity, 4), "clusters": live}
        events.append(TemplateEvent(CLUSTER_NEW, page.host, page_no, page.url, details, None, a.cid))
    return tuple(events)


def pagelet_report(
    ptree: PageTree,
    texts: list[str],
    page_pagelets: int,
    template_pagelets: list[tuple[PageletSketch, int]],
    max_listed: int,
) -> PageletReport:
    """What a template event says about the page's pagelets: how many it has, how many are
    template, and the first `max_listed` template ones."""
    listed = []
    for p, pdf in template_pagelets[:max_listed]:
        text = " ".join(texts[p.first : p.end])
        path = pagelet_path(ptree, p)
        listed.append(TemplatePagelet(p.keys[0], pdf, p.links, p.order, p.first, p.end, path, text))
    return PageletReport(page_pagelets, len(template_pagelets), tuple(listed))


def process_page(page: RawPage, store: SegmentStore, params: EngineParams, with_html: bool = False) -> Outcome:
    """Decide one page with the host's table from `store`, and hand the table back to it."""
    table = store.get(page.host)
    if table is None:
        table = HostTable(params.table)
    outcome = decide(page, table, params, with_html)
    if outcome.clean is not None:
        store.put(page.host, table)
    return outcome


def split_links(
    page: RawPage, tree: LexborHTMLParser, blocks: list[Block], verdicts: list[BlockVerdict]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The absolute URLs of the links in content blocks and in template blocks."""
    content: list[str] = []
    template: list[str] = []
    for block, v in zip(blocks, verdicts, strict=True):
        if block.links:
            (template if v.verdict == TEMPLATE else content).extend(block.links)
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
