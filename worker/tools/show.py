"""`detemplate show`: an HTML view of one page's verdict, block by block, with its host's stats.

The page is decided by the same `detemplate.engine.pipeline.decide` as `run` and the stream worker,
on a copy of the host's table, so showing never changes any state:

- with ``--state DIR``: a copy of the host's table in that RocksDB state (what the next
  `run --state DIR` would decide for the page);
- without it: a table replayed from the host's pages in ``--input`` that come before the
  page (what `run` over that input decided for it); for the host's first page, a table of its
  second page in ``--input``, as `run` decides a first page once its second is in the table
  (engine/firstpages.py); or an empty table.

The host's history (template share and table size page by page) comes from replaying
the host's pages of ``--input`` on a fresh table; the state keeps no history.
"""

from __future__ import annotations

import argparse
import html as htmlmod
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..engine.errors import ConfigError, DetemplateError, StateError
from ..engine.firstpages import decide_held
from ..engine.model import CONTENT, TEMPLATE, DeadPage, Outcome, RawPage, TemplateEvent
from ..engine.page import parse, segment_tree
from ..engine.params import EngineParams, add_param_argument, with_overrides
from ..engine.pipeline import decide
from ..engine.table import HostTable

# -- the view's data (pure) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostPoint:
    """One page of the host's history (input replay)."""

    page_no: int
    chars: int
    template_chars: int
    segments: int  # entries in the host's table after the page
    template_segments: int

    @property
    def share(self) -> float:
        return self.template_chars / self.chars if self.chars else 0.0


@dataclass(frozen=True, slots=True)
class SegmentView:
    text: str
    df: int  # DF including this page
    template: bool  # DF at or over the threshold the page was judged with


@dataclass(frozen=True, slots=True)
class PageView:
    """Everything the rendered page shows."""

    page: RawPage
    outcome: Outcome
    basis: str  # what table the page was decided against, in words
    segments: tuple[tuple[SegmentView, ...], ...]  # per block, in document order
    threshold: int  # DF a segment needed to count as template on this page
    table_pages: int
    table_segments: int
    template_segments: int
    table_bytes: int
    learned_page: int
    history: tuple[HostPoint, ...] = ()
    history_events: tuple[TemplateEvent, ...] = ()
    position: int | None = None  # index of this page in history, when it is part of it
    params: EngineParams = field(default_factory=EngineParams)
    history_basis: str = ""  # what the chart replays, when it is not what the page was decided against


def copy_table(table: HostTable) -> HostTable:
    """An independent copy of a host table (deciding on it leaves the original alone)."""
    return HostTable.from_bytes(table.to_bytes(), table.params)


def replay(
    pages: list[RawPage], params: EngineParams, stop: int | None = None
) -> tuple[list[HostPoint], list[TemplateEvent], HostTable, HostTable, int]:
    """Decide a host's pages in order on a fresh table.

    Returns the per-page history (clean pages only), the events, the table after all
    pages, a copy of the table before page index `stop` (the final table when None),
    and how many history points come before `stop`.
    """
    table = HostTable(params.table)
    points: list[HostPoint] = []
    events: list[TemplateEvent] = []
    before: HostTable | None = None
    before_points = 0
    for i, page in enumerate(pages):
        if i == stop:
            before = copy_table(table)
            before_points = len(points)
        out = decide(page, table, params)
        if out.clean is None:
            continue
        points.append(
            HostPoint(
                table.pages, out.clean.chars, out.clean.template_chars, len(table) - table.tagged_keys(),
                table.template_count,
            )
        )
        events.extend(out.events)
    if before is None:
        before = table
        before_points = len(points)
    return points, events, table, before, before_points


def build_view(
    page: RawPage,
    table: HostTable,
    params: EngineParams,
    basis: str,
    history: tuple[HostPoint, ...] = (),
    history_events: tuple[TemplateEvent, ...] = (),
    position: int | None = None,
    history_basis: str = "",
    second: RawPage | None = None,
) -> PageView:
    """Decide `page` on a copy of `table` and gather what the view shows about it; with
    `second`, as a host's first page held for that second page (engine/firstpages.py)."""
    work = copy_table(table)
    outcome = decide(page, work, params)
    if second is not None and outcome.clean is not None:
        work = HostTable(params.table)
        outcome = decide_held(page, outcome, second, params, table=work)[0]
    segments: list[tuple[SegmentView, ...]] = []
    threshold = params.table.threshold(work.pages)
    if outcome.clean is not None:
        blocks = segment_tree(parse(page.html, params.segment), params.segment)
        assert [b.path for b in blocks] == [v.path for v in outcome.clean.blocks]  # the same segmentation
        # Segments are template by the table only once it has seen `threshold` pages
        # (before, decide calls the page cold, whatever decided its blocks then).
        judged = work.pages >= threshold
        for block in blocks:
            segments.append(
                tuple(
                    SegmentView(s.text, work.df(s.key), judged and work.df(s.key) >= threshold) for s in block.segments
                )
            )
    return PageView(
        page=page,
        outcome=outcome,
        basis=basis,
        segments=tuple(segments),
        threshold=threshold,
        table_pages=work.pages,
        table_segments=len(work) - work.tagged_keys(),
        template_segments=work.template_count,
        table_bytes=work.nbytes(),
        learned_page=work.learned_page,
        history=history,
        history_events=history_events,
        position=position,
        params=params,
        history_basis=history_basis,
    )


# -- rendering (pure) -------------------------------------------------------------------------

_CSS = """
:root { --tpl: #f6d5cf; --tpl-edge: #c2412d; --tpl-ink: #7a2617; --ok-edge: #2f855a; --ink: #1d232b;
        --muted: #5d6b7a; --line: #dde3ea; --bg: #f7f9fb; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header.top { background: #233142; color: #fff; padding: 14px 28px; }
header.top h1 { font-size: 18px; margin: 0 0 2px; font-weight: 600; }
header.top .url { color: #c9d6e3; font-size: 13px; word-break: break-all; }
main { max-width: 1120px; margin: 0 auto; padding: 18px 28px 40px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; margin-bottom: 14px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card b { display: block; font-size: 20px; font-weight: 600; }
.card span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
section.host { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px;
               margin-bottom: 16px; display: grid; grid-template-columns: 330px minmax(0, 1fr); gap: 28px; }
section.host svg.chart { width: 100%; height: auto; display: block; }
section.host h2, h2.blocks { font-size: 15px; margin: 0 0 6px; }
section.host dl { display: grid; grid-template-columns: auto auto; gap: 2px 14px; margin: 0; font-size: 14px; }
section.host dt { color: var(--muted); }
section.host dd { margin: 0; font-variant-numeric: tabular-nums; }
.basis { color: var(--muted); font-size: 13px; margin: 0 0 12px; }
.legend { font-size: 13px; color: var(--muted); margin: 0 0 8px; }
.legend i { display: inline-block; width: 14px; height: 14px; vertical-align: -2px; margin: 0 4px 0 12px;
            border-radius: 3px; }
.legend i.t { background: var(--tpl); border-left: 4px solid var(--tpl-edge); }
.legend i.c { background: #fff; border: 1px solid var(--line); border-left: 4px solid var(--ok-edge); }
.blocklist { border: 1px solid var(--line); border-radius: 6px; overflow: hidden; background: #fff; }
.block { display: grid; grid-template-columns: 92px 128px 78px 70px minmax(0, 1fr) minmax(0, 190px);
         gap: 10px; align-items: baseline; padding: 5px 10px; border-left: 5px solid var(--ok-edge);
         border-bottom: 1px solid var(--line); background: #fff; font-size: 14px; }
.block:last-child { border-bottom: 0; }
.block.head { background: #eef2f6; border-left-color: #eef2f6; font-size: 11px; color: var(--muted);
              text-transform: uppercase; letter-spacing: .04em; padding-top: 4px; padding-bottom: 4px; }
.block.template { background: var(--tpl); border-left-color: var(--tpl-edge); color: var(--tpl-ink);
                  border-bottom-color: #ecc3bb; }
.block .m { font-size: 12px; color: var(--muted); white-space: nowrap; font-variant-numeric: tabular-nums; }
.block.template .m { color: var(--tpl-ink); }
.pill { font-weight: 700; font-size: 10.5px; letter-spacing: .05em; text-transform: uppercase; padding: 1px 7px;
        border-radius: 9px; color: #fff; background: var(--ok-edge); justify-self: start; }
.block.template .pill { background: var(--tpl-edge); }
.path { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11px; opacity: .75;
        overflow: hidden; text-overflow: ellipsis; white-space: nowrap; direction: rtl; text-align: left; }
.bar { display: inline-block; width: 54px; height: 7px; background: #e5e9ee; border-radius: 4px;
       overflow: hidden; vertical-align: 0; margin-left: 4px; }
.bar > s { display: block; height: 100%; background: var(--tpl-edge); text-decoration: none; }
.text .seg.t { text-decoration: underline dotted; text-underline-offset: 3px; }
.text .seg sup { font-size: 9px; color: var(--muted); margin-left: 1px; }
.block.template .text .seg sup { color: var(--tpl-ink); opacity: .7; }
.chartkey { font-size: 12px; color: var(--muted); margin-top: 2px; }
.chartkey span { margin-right: 12px; white-space: nowrap; }
.chartkey i { display: inline-block; width: 12px; height: 3px; vertical-align: 3px; margin-right: 4px; }
.dead { background: #fff3cd; border: 1px solid #e0c060; padding: 12px 16px; border-radius: 6px; }
svg text { font: 11px system-ui, "DejaVu Sans", sans-serif; fill: #5d6b7a; }
"""


def render(view: PageView) -> str:
    """The complete HTML document of the view."""
    e = htmlmod.escape
    page = view.page
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>detemplate show: {e(page.url)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<header class="top"><h1>detemplate show &middot; {e(page.host)}</h1>',
        f'<div class="url">{e(page.url)}</div></header><main>',
    ]
    clean = view.outcome.clean
    if clean is None:
        dead = view.outcome.dead
        assert dead is not None
        parts.append(
            f'<div class="dead"><b>Dead letter: {e(dead.reason)}</b><br>{e(dead.detail)}</div>'
            f'<p class="basis">{e(view.basis)}</p>'
        )
    else:
        blocks = clean.blocks
        tblocks = sum(1 for b in blocks if b.verdict == TEMPLATE)
        share = clean.template_chars / clean.chars if clean.chars else 0.0
        methods = sorted({b.method for b in blocks})
        parts.append('<div class="cards">')
        for value, label in (
            (f"{clean.page_no:,}", "host page no." if not view.history_basis else "host page no. in the state"),
            (f"{tblocks} / {len(blocks)}", "template blocks"),
            (f"{share:.0%}", "text removed"),
            (f"{len(clean.text):,}", "chars kept"),
            (", ".join(methods) or "-", "decided by"),
            ("-" if clean.cluster is None else str(clean.cluster), "template cluster"),
        ):
            parts.append(f'<div class="card"><b>{e(value)}</b><span>{e(label)}</span></div>')
        parts.append("</div>")
        if view.table_pages >= view.threshold:
            rule = (
                f"The table counts a segment as template at DF &ge; {view.threshold}, and a block as template "
                f"when its template segments hold more than {view.params.table.template_ratio:.0%} of its text."
            )
        else:
            rule = "The table has seen too few of the host's pages to judge any segment (cold start)."
        parts.append(f'<p class="basis">Decided against {e(view.basis)}. {rule}</p>')
    parts.append(_host_section(view))
    if clean is not None:
        parts.append('<h2 class="blocks">Blocks in document order</h2>')
        parts.append(
            '<p class="legend"><i class="t"></i>template (removed)<i class="c"></i>content (kept)'
            "&nbsp;&nbsp; underlined: a template segment; small numbers: a segment's DF when over 1 (hover for any)</p>"
        )
        parts.append(
            '<div class="blocklist"><div class="block head"><span>verdict</span><span>table ratio</span>'
            "<span>DF</span><span>method</span><span>text</span><span>DOM path</span></div>"
        )
        for verdict, segs in zip(clean.blocks, view.segments, strict=True):
            parts.append(_block_html(verdict.verdict, verdict.ratio, verdict.method, verdict.path, segs))
        parts.append("</div>")
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def _block_html(verdict: str, ratio: float, method: str, path: str, segs: tuple[SegmentView, ...]) -> str:
    e = htmlmod.escape
    dfs = [s.df for s in segs]
    df_label = f"{min(dfs)}" if min(dfs) == max(dfs) else f"{min(dfs)}&ndash;{max(dfs)}"
    text = " ".join(
        f'<span class="seg{" t" if s.template else ""}" title="DF {s.df}">{e(s.text)}'
        + (f"<sup>{s.df}</sup>" if s.df > 1 else "")
        + "</span>"
        for s in segs
    )
    label = "template" if verdict == TEMPLATE else "content"
    return (
        f'<div class="block {label}" data-verdict="{label}" data-ratio="{ratio:.4f}" data-method="{e(method)}">'
        f'<span class="pill">{label}</span>'
        f'<span class="m" title="template chars / chars">{ratio:.2f}<span class="bar">'
        f'<s style="width:{ratio * 100:.0f}%"></s></span></span>'
        f'<span class="m" title="document frequency of its segments">{df_label}</span>'
        f'<span class="m">{e(method)}</span>'
        f'<span class="text">{text}</span>'
        f'<span class="path" title="{e(path)}"><bdi>{e(path)}</bdi></span></div>'
    )


def _host_section(view: PageView) -> str:
    e = htmlmod.escape
    rows = [
        ("pages seen", f"{view.table_pages:,}"),
        ("segments in table", f"{view.table_segments:,}"),
        ("template segments", f"{view.template_segments:,}"),
        ("template learned at page", f"{view.learned_page:,}" if view.learned_page else "not yet"),
        ("table size", f"{view.table_bytes / 1024:,.1f} KB"),
    ]
    if view.history:
        mean = sum(p.template_chars for p in view.history) / max(1, sum(p.chars for p in view.history))
        rows.append(("input pages replayed", f"{len(view.history):,}"))
        rows.append(("template share, all replayed", f"{mean:.0%}"))
    dl = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    chart = share_chart(view.history, view.history_events, view.position) + _CHART_KEY
    if not view.history:
        note = '<p class="basis">No history: pass --input with the host\'s pages to chart its template share.</p>'
    else:
        note = f'<p class="basis">{e(view.history_basis)}</p>' if view.history_basis else ""
    return (
        f'<section class="host"><div><h2>Host {e(view.page.host)} '
        f'<span style="font-weight:400;color:#5d6b7a">after this page</span></h2><dl>{dl}</dl></div>'
        f"<div><h2>Template share and table size, page by page</h2>{chart}{note}</div></section>"
    )


def share_chart(
    points: tuple[HostPoint, ...] | list[HostPoint],
    events: tuple[TemplateEvent, ...] | list[TemplateEvent] = (),
    position: int | None = None,
    width: int = 660,
    height: int = 170,
) -> str:
    """An inline SVG: template share per page (line, left axis) and table segments (area, right axis)."""
    left, right, top, bottom = 40, 48, 10, 22
    w = width - left - right
    h = height - top - bottom
    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="template share by page">']
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fbfcfd" stroke="#dde3ea"/>')
    for frac in (0.0, 0.5, 1.0):
        y = top + h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eef1f4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{frac:.0%}</text>')
    if not points:
        out.append(f'<text x="{left + w / 2}" y="{top + h / 2}" text-anchor="middle">no history</text></svg>')
        return "".join(out)
    first, last = points[0].page_no, points[-1].page_no
    span = max(1, last - first)

    def x(page_no: int) -> float:
        return left + w * (page_no - first) / span

    max_segs = max(1, max(p.segments for p in points))
    area = " ".join(f"{x(p.page_no):.1f},{top + h * (1 - p.segments / max_segs):.1f}" for p in points)
    out.append(
        f'<polygon points="{x(first):.1f},{top + h} {area} {x(last):.1f},{top + h}" fill="#cfdcea" opacity=".55"/>'
    )
    for ev in events:
        if first <= ev.page_no <= last:
            colour = _EVENT_COLOURS.get(ev.type, "#8a94a6")
            out.append(
                f'<line x1="{x(ev.page_no):.1f}" x2="{x(ev.page_no):.1f}" y1="{top}" y2="{top + h}" '
                f'stroke="{colour}" stroke-dasharray="3,3"><title>{htmlmod.escape(ev.type)} at page '
                f"{ev.page_no}</title></line>"
            )
    line = " ".join(f"{x(p.page_no):.1f},{top + h * (1 - p.share):.1f}" for p in points)
    out.append(f'<polyline points="{line}" fill="none" stroke="#c2412d" stroke-width="2"/>')
    if position is not None and 0 <= position < len(points):
        p = points[position]
        out.append(
            f'<circle cx="{x(p.page_no):.1f}" cy="{top + h * (1 - p.share):.1f}" r="4.5" fill="#233142">'
            f"<title>this page: {p.share:.0%}</title></circle>"
        )
    out.append(f'<text x="{left}" y="{height - 6}">page {first}</text>')
    out.append(f'<text x="{left + w}" y="{height - 6}" text-anchor="end">page {last}</text>')
    out.append(f'<text x="{left + w + 6}" y="{top + 9}">{max_segs:,}</text>')
    out.append(f'<text x="{left + w + 6}" y="{top + h + 4}">0</text>')
    out.append("</svg>")
    return "".join(out)


_EVENT_COLOURS = {
    "template.learned": "#2f855a",
    "template.changed": "#b7791f",
    "template.cluster_new": "#3b6fb6",
}  # other events (template.cluster_dropped) in grey

_CHART_KEY = (
    '<div class="chartkey"><span><i style="background:#c2412d"></i>template share of the page\'s text</span>'
    '<span><i style="background:#cfdcea;height:9px;vertical-align:0"></i>segments in table (right axis)</span>'
    '<span><i style="background:#2f855a"></i>template learned</span>'
    '<span><i style="background:#b7791f"></i>template changed</span>'
    '<span><i style="background:#3b6fb6"></i>new page type (template cluster)</span>'
    '<span><i style="background:#233142;width:8px;height:8px;border-radius:4px;vertical-align:0"></i>this page</span>'
    "</div>"
)


# -- the command --------------------------------------------------------------------------------


def find_page(
    target: str, inputs: list[str], host: str | None, hold: int = 0
) -> tuple[RawPage, list[RawPage], int | None, RawPage | None]:
    """The page to show, the host's pages of the inputs in order, the page's index among them,
    and, when it is the host's first and its second comes within `hold` items of the inputs
    (`pagelevel.hold_first`), that second page: `run` decides the first once the second is
    in the table (engine/firstpages.py)."""
    from ..io.sources import iter_inputs

    pool = [p for p in iter_inputs(inputs) if isinstance(p, RawPage)] if inputs else []
    path = Path(target)
    page: RawPage | None = None
    if path.is_file() and path.suffix.lower() in (".html", ".htm"):
        item = next(iter_inputs([path]))
        if isinstance(item, DeadPage):
            raise ConfigError(f"{target}: {item.reason}: {item.detail}")
        page = item
    else:
        matches = [p for p in pool if p.url == target]
        if not matches:
            where = f"in {', '.join(inputs)}" if inputs else "(give --input with the file that holds it)"
            raise ConfigError(f"page {target!r} not found {where}")
        page = matches[-1]
    if host:
        page = replace(page, host=host.strip().lower())
    at = [n for n, p in enumerate(pool) if p.host == page.host]
    mine = [pool[n] for n in at]
    index = next((i for i in range(len(mine) - 1, -1, -1) if mine[i].url == page.url), None)
    # (dead items of the inputs are not in the pool: the positions are of live pages, which
    # differs from `run`'s count only where a dead item lies between the two pages)
    second = mine[1] if index == 0 and len(mine) > 1 and at[1] - at[0] <= hold else None
    return page, mine, index, second


def cmd_show(args: argparse.Namespace) -> int:
    try:
        params = with_overrides(EngineParams(), args.param)
        page, host_pages, index, second = find_page(
            args.target, args.input, args.host, params.pagelevel.hold_first if not args.state else 0
        )
        history, events, _, before, before_points = replay(host_pages, params, index)
        position = before_points if index is not None and before_points < len(history) else None
        if args.state:
            table, basis = load_state_table(args.state, page.host, params)
        elif index is not None:
            table = before
            basis = (
                f"the host's {table.pages} earlier pages in the input (as `detemplate run` decided it)"
                if table.pages
                else "the host's second page in the input, then this one: a host's first page is decided "
                "once its second is in the table (as `detemplate run` decided it)"
                if second is not None
                else "an empty table: the host's first page in the input"
            )
        elif host_pages:
            table = before
            basis = f"the host's {table.pages} pages in the input (the page comes after them)"
        else:
            table = HostTable(params.table)
            basis = "an empty table: nothing learned about the host yet (give --state or --input)"
        history_basis = ""
        if args.state and history:
            # The state keeps no history: the chart is the input's pages on a fresh table, which
            # need not be the pages the state has seen (its page numbers are the input's).
            history_basis = (
                f"The chart replays the host's {len(history):,} pages of --input on a fresh table (its pages "
                f"{history[0].page_no:,} to {history[-1].page_no:,}); the page above was decided against the "
                f"state, which had seen {table.pages:,} of the host's pages."
            )
        view = build_view(
            page, table, params, basis, tuple(history), tuple(events), position, history_basis, second
        )
        Path(args.output).write_text(render(view), encoding="utf-8")
    except DetemplateError as exc:
        print(f"detemplate show: {exc}", file=sys.stderr)
        return 2
    clean = view.outcome.clean
    if clean is None:
        print(f"{page.url}: dead ({view.outcome.dead.reason if view.outcome.dead else '?'})", file=sys.stderr)
    else:
        t = sum(1 for b in clean.blocks if b.verdict == TEMPLATE)
        c = sum(1 for b in clean.blocks if b.verdict == CONTENT)
        print(f"{page.url}: {t} template blocks, {c} content blocks -> {args.output}", file=sys.stderr)
    return 0


def load_state_table(state: str, host: str, params: EngineParams) -> tuple[HostTable, str]:
    """A copy of the host's table from a state folder (read, never written).

    Either the RocksDB state of `detemplate run --state`, or the data folder of a stream
    worker (DETEMPLATE_DATA_DIR: Faust's ``v1/tables/<table>-<partition>.db``, holding the
    changelog records of worker/state/changelog.py), opened read-only.
    """
    path = Path(state)
    if (path / "CURRENT").is_file():
        return _offline_table(path, host, params)
    partitions = sorted(path.glob("v*/tables/*-*.db")) or sorted(path.glob("tables/*-*.db"))
    if partitions:
        return _stream_table(path, partitions, host, params)
    raise ConfigError(
        f"{state} is not a RocksDB state folder (of `detemplate run --state`) or a worker's DETEMPLATE_DATA_DIR"
    )


def _offline_table(path: Path, host: str, params: EngineParams) -> tuple[HostTable, str]:
    from ..state.rocks import RocksStore

    store = RocksStore(path, params.table)
    try:
        table = store.get(host)
        copy = copy_table(table) if table is not None else None
    finally:
        store.close()  # nothing was put, so nothing is written
    if copy is None:
        return HostTable(params.table), f"an empty table: host {host!r} is not in the state at {path}"
    return copy, f"a copy of the host's table in the state at {path} ({copy.pages} pages; the state is not changed)"


def _stream_table(path: Path, partitions: list[Path], host: str, params: EngineParams) -> tuple[HostTable, str]:
    from rocksdict import AccessType, Options, Rdict

    from ..settings import load as load_settings
    from ..state.changelog import StateLayout, host_prefix
    from ..state.rocks import scan_prefix

    settings = load_settings()
    # The snapshot period and the table bound must be the worker's: its DETEMPLATE_* settings apply here too.
    layout = StateLayout(params, settings.snapshot_every, max_table_entries=settings.max_table_entries)
    prefix = host_prefix(host)
    for db_path in partitions:
        try:
            db = Rdict(str(db_path), Options(raw_mode=True), access_type=AccessType.read_only())
        except Exception as exc:  # rocksdict raises plain Exception for I/O and corruption
            raise StateError(f"cannot open the worker state {db_path}: {exc}") from exc
        try:
            records = {k[len(prefix):]: v for k, v in scan_prefix(db, prefix).items()}
            table = layout.load(records)
        except Exception as exc:
            if isinstance(exc, DetemplateError):
                raise
            raise StateError(f"cannot read the worker state {db_path}: {exc}") from exc
        finally:
            db.close()
        if table is not None:
            return table, (
                f"the host's table rebuilt from the worker state {db_path.name} in {path} ({table.pages} pages; "
                "read only)"
            )
    return HostTable(params.table), f"an empty table: host {host!r} is in none of the worker's partitions at {path}"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "show",
        help="render an HTML view of a page with its template blocks marked, and its host's stats",
        description=(
            "Decide one page with the same pipeline as `run` and write an HTML view of it: every block "
            "shaded by verdict and labelled with its template ratio, the DF of its segments and the method "
            "that decided it, plus the host's table size and template share page by page. The state is "
            "only read: the page is decided on a copy of the host's table."
        ),
        epilog=(
            "Examples: detemplate show https://blog.example/a.html --input crawl.jsonl --state state/ -o a.html; "
            "detemplate show site/page.html --input site/ -o view.html. A URL is looked up in --input (the "
            "state holds no pages)."
        ),
    )
    p.add_argument("target", metavar="URL-or-FILE", help="the page's URL (found in --input) or an .html file")
    p.add_argument("-o", "--output", default="show.html", help="write the HTML view here (default: show.html)")
    p.add_argument(
        "--state",
        metavar="DIR",
        help="decide against the host's table in this state: a `run --state` folder or a worker's data folder "
        "(read only; for a worker's, set DETEMPLATE_SNAPSHOT_EVERY as the worker has it)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="INPUT",
        help="JSONL, WARC or folder holding the page and its host's other pages, for the history (repeatable)",
    )
    p.add_argument("--host", help="the page's host, when it is not the one `run` would give it")
    add_param_argument(
        p,
        "override an algorithm parameter, as in `run` (use the same ones the state was built with)",
    )
    p.set_defaults(func=cmd_show)
