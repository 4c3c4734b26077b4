"""detemplate.engine.pipeline: decide() and process_page() on generated sites."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from detemplate.engine.model import (
    CONTENT,
    METHOD_COLD,
    METHOD_MARKUP,
    METHOD_TABLE,
    TEMPLATE,
    Block,
    Outcome,
    RawPage,
    Segment,
)
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide, kept_text_python, process_page, replay_page
from detemplate.engine.table import HostTable
from detemplate.io.codec import encode_clean, encode_dead, encode_event
from detemplate.state import MemoryStore
from detemplate.state.rocks import RocksStore
from selectolax.lexbor import LexborHTMLParser

from tests.factories import interleave, make_page, make_site, norm

PARAMS = EngineParams()
# The table's own cold start, without the page-level model (tests/engine/detectors/test_pagelevel.py has that).
TABLE_ONLY = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, enabled=False))
# Wang et al.'s rule alone: repetition is template evidence everywhere (no content region).
TABLE_RULE = dataclasses.replace(TABLE_ONLY, region=dataclasses.replace(PARAMS.region, enabled=False))


def leaked(template_texts: tuple[str, ...], kept_blocks: list[str]) -> list[str]:
    """Template texts found in kept blocks: short labels ("Home") must be a whole block,
    since the random article text may hold the same word."""
    return [t for t in template_texts if any(t == b or (len(t) > 15 and t in b) for b in kept_blocks)]


def run(pages: list, params: EngineParams = PARAMS) -> tuple[HostTable, list[Outcome]]:
    table = HostTable(params.table)
    return table, [decide(sp.page, table, params) for sp in pages]


@pytest.mark.parametrize("layout", ["blog", "docs", "news"])
def test_template_removed_and_content_kept_after_five_pages(layout: str) -> None:
    site = make_site(f"{layout}.example", 30, seed=2, layout=layout)
    _, outcomes = run(site)
    for i, (sp, out) in enumerate(zip(site, outcomes, strict=True)):
        assert out.clean is not None and out.dead is None
        kept = norm(out.clean.text)
        missing = [g for g in sp.gold_blocks if g not in kept]
        assert not missing, f"page {i}: content dropped: {missing}"
        if i >= 5:
            found = leaked(sp.template_texts, [b.text for b in out.clean.blocks if b.verdict == CONTENT])
            assert not found, f"page {i}: template kept: {found}"
            for block in out.clean.blocks:
                if any(t in block.text for t in (sp.template_texts[0], sp.template_texts[-1])):
                    assert block.verdict == TEMPLATE


def test_footer_and_nav_blocks_are_marked_template_with_their_ratio() -> None:
    site = make_site("blog.example", 8, seed=4)
    _, outcomes = run(site)
    last = outcomes[-1].clean
    assert last is not None
    legal = max(site[-1].template_texts, key=len)  # the footer's legal sentence
    footer = [b for b in last.blocks if legal in b.text]
    nav = [b for b in last.blocks if b.text == "About"]
    assert footer and nav
    for block in footer + nav:
        assert block.verdict == TEMPLATE
        assert block.ratio > PARAMS.table.template_ratio
        assert block.template_chars <= block.chars
    assert last.template_chars > 0 and last.chars > last.template_chars
    assert any(b.verdict == CONTENT for b in last.blocks)


def test_first_page_of_a_host_is_cold_and_keeps_everything() -> None:
    site = make_site("cold.example", 3)
    _, outcomes = run(site, TABLE_ONLY)
    first = outcomes[0].clean
    assert first is not None and first.page_no == 1
    # Kept whole but for the sidebar's popular-posts box, which its class names, and the header's
    # nav and the footer, which HTML puts beside the content (decision.py).
    assert {b.method for b in first.blocks} == {METHOD_COLD, METHOD_MARKUP}
    assert {b.verdict for b in first.blocks if b.method == METHOD_COLD} == {CONTENT}
    markup = {(b.path, b.verdict, b.role) for b in first.blocks if b.method == METHOD_MARKUP}
    assert markup == {
        ("html/body/div/aside/div", TEMPLATE, "related"), ("html/body/div/aside/div/ol/li", TEMPLATE, "related"),
        ("html/body/header/nav/ul/li", TEMPLATE, "template"),
        ("html/body/footer", TEMPLATE, "template"), ("html/body/footer/ul/li", TEMPLATE, "template"),
    }
    assert site[0].template_texts[0] in first.text
    assert {b.method for b in outcomes[2].clean.blocks} == {METHOD_TABLE}  # type: ignore[union-attr]


def test_without_early_threshold_the_first_pages_stay_cold() -> None:
    params = dataclasses.replace(TABLE_ONLY, table=dataclasses.replace(PARAMS.table, early_df=0))
    site = make_site("paper.example", 7)
    _, outcomes = run(site, params)
    # Besides the sections the markup names (the "most read" box: method markup, every page).
    methods = [{b.method for b in o.clean.blocks} - {METHOD_MARKUP} for o in outcomes]  # type: ignore[union-attr]
    threshold = params.table.template_df
    assert methods[: threshold - 1] == [{METHOD_COLD}] * (threshold - 1)
    assert methods[threshold - 1 :] == [{METHOD_TABLE}] * (len(site) - threshold + 1)
    assert all(
        b.verdict == CONTENT for o in outcomes[: threshold - 1] for b in o.clean.blocks  # type: ignore[union-attr]
        if b.method == METHOD_COLD
    )


def test_page_numbers_count_the_hosts_own_pages() -> None:
    store = MemoryStore()
    pages = interleave(make_site("a.example", 4), make_site("b.example", 2), make_site("c.example", 3))
    numbers = [(sp.page.host, process_page(sp.page, store, PARAMS).clean.page_no) for sp in pages]  # type: ignore[union-attr]
    assert [n for h, n in numbers if h == "a.example"] == [1, 2, 3, 4]
    assert [n for h, n in numbers if h == "b.example"] == [1, 2]
    assert sorted(store.hosts()) == ["a.example", "b.example", "c.example"]


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        ("", "empty"),
        ("plain text, no markup", "not_html"),
        ("<html><body>" + "<div>" * 300 + "deep" + "</div>" * 300 + "</body></html>", "too_deep"),
        ("<html><body>" + "<p>x</p>" * 1_000 + "</body></html>", "too_large"),
    ],
)
def test_dead_pages_leave_the_table_unchanged(html: str, reason: str) -> None:
    params = dataclasses.replace(
        PARAMS, segment=dataclasses.replace(PARAMS.segment, max_page_bytes=5_000, max_depth=200)
    )
    site = make_site("dead.example", 6, paragraphs=1)
    table, _ = run(site, params)
    before = table.to_bytes()
    bad = make_page(url="https://dead.example/bad", host="dead.example", html=html, source="in.jsonl:7")
    out = decide(bad, table, params)
    assert out.clean is None and out.events == () and out.applied == ()
    assert out.dead is not None
    assert (out.dead.reason, out.dead.url, out.dead.host, out.dead.source) == (
        reason,
        "https://dead.example/bad",
        "dead.example",
        "in.jsonl:7",
    )
    assert out.dead.detail
    assert table.to_bytes() == before
    # The next good page gets the next page number, as if the dead one had not come.
    nxt = decide(make_site("dead.example", 7, paragraphs=1)[6].page, table, params)
    assert nxt.clean is not None and nxt.clean.page_no == 7


def test_a_dead_first_page_creates_no_table() -> None:
    store = MemoryStore()
    out = process_page(make_page(host="new.example", html=""), store, PARAMS)
    assert out.dead is not None
    assert store.get("new.example") is None and list(store.hosts()) == []


def test_duplicate_segments_are_applied_once() -> None:
    html = "<html><body><ul>" + "<li>Again</li>" * 5 + "</ul><div>x</div></body></html>"
    table = HostTable(PARAMS.table)
    out = decide(make_page(html=html), table, PARAMS)
    assert len(out.applied) == 2 and list(out.applied) == sorted(set(out.applied))
    assert all(df == 1 for df, _ in table.state().values())


def test_replaying_applied_keys_rebuilds_the_table() -> None:
    pages = make_site("replay.example", 40, seed=9, redesign=25)
    table, outcomes = run(pages)
    rebuilt = HostTable(PARAMS.table)
    for out in outcomes:
        assert out.cluster is not None  # clusters are on by default
        replay_page(rebuilt, out.applied, out.cluster, out.cluster_signature, PARAMS)
    assert rebuilt.to_bytes() == table.to_bytes()
    assert table.clusters is not None and len(table.clusters.clusters) >= 1


def _body_text(html: str) -> str:
    body = LexborHTMLParser(html).body
    assert body is not None
    for node in body.css("script, style"):
        node.decompose()
    return norm(body.text(separator=" "))


def test_with_html_removes_template_text_and_keeps_content() -> None:
    site = make_site("html.example", 12, seed=7, layout="news")
    table = HostTable(PARAMS.table)
    for sp in site[:-1]:
        decide(sp.page, table, PARAMS)
    twin = HostTable.from_bytes(table.to_bytes(), PARAMS.table)
    last = site[-1]
    with_html = decide(last.page, table, PARAMS, with_html=True)
    without = decide(last.page, twin, PARAMS)
    assert with_html.clean is not None and without.clean is not None
    assert without.clean.html is None
    # The verdicts do not depend on whether HTML was asked for.
    assert dataclasses.replace(with_html.clean, html=None) == without.clean
    html = with_html.clean.html
    assert html is not None and html.lstrip().lower().startswith(("<!doctype", "<html"))
    text = _body_text(html)
    for gold in last.gold_blocks:
        assert gold in text
    assert not leaked(last.template_texts, [text])
    assert "<footer" in html  # elements stay; only template text goes
    assert _body_text(last.page.html) != text


def _outcome_bytes(out: Outcome) -> tuple[bytes, ...]:
    parts = [encode_clean(out.clean)] if out.clean is not None else [encode_dead(out.dead)]  # type: ignore[arg-type]
    parts.extend(encode_event(e) for e in out.events)
    parts.append(repr(out.applied).encode())
    return tuple(parts)


def test_memory_and_rocks_stores_give_identical_outcomes(tmp_path: Path) -> None:
    pages = [
        sp.page
        for sp in interleave(
            make_site("a.example", 30, seed=1, layout="blog", redesign=18),
            make_site("b.example", 25, seed=2, layout="docs"),
            make_site("c.example", 20, seed=3, layout="news"),
        )
    ]
    pages.insert(10, make_page(url="https://a.example/bad", host="a.example", html="not html"))
    memory = MemoryStore()
    # cache_hosts=1: every host switch writes a table back and reads one in.
    rocks = RocksStore(tmp_path / "state", PARAMS.table, cache_hosts=1)
    try:
        for page in pages:
            mine = process_page(page, memory, PARAMS, with_html=True)
            theirs = process_page(page, rocks, PARAMS, with_html=True)
            assert _outcome_bytes(mine) == _outcome_bytes(theirs)
        for host in ("a.example", "b.example", "c.example"):
            assert rocks.get(host).to_bytes() == memory.get(host).to_bytes()  # type: ignore[union-attr]
    finally:
        rocks.close()


def _blocks_by_text(out: Outcome) -> dict[str, str]:
    assert out.clean is not None
    return {b.text: b.verdict for b in out.clean.blocks}


def test_template_block_needs_a_ratio_strictly_above_the_threshold() -> None:
    # "shared7" (7 chars) repeats on every page; each page adds its own 3-char line.
    # Block "shared7 abc": ratio 7/10 = 0.7, not above 0.7: content. With "xy" (2 chars):
    # 7/9 = 0.78: template.
    table = HostTable(TABLE_RULE.table)
    for i in range(6):
        decide(make_page(html=f"<html><body><div>shared7<p>p{i:02d}</p></div></body></html>"), table, TABLE_RULE)
    at = decide(make_page(html="<html><body><div>shared7<p>abc</p></div></body></html>"), table, TABLE_RULE)
    above = decide(make_page(html="<html><body><div>shared7<p>xy</p></div></body></html>"), table, TABLE_RULE)
    assert _blocks_by_text(at) == {"shared7 abc": CONTENT}
    assert _blocks_by_text(above) == {"shared7 xy": TEMPLATE}


def test_early_threshold_is_every_page_so_far() -> None:
    # Documented rule: below template_df pages, threshold = max(early_df, pages).
    table = HostTable(TABLE_RULE.table)
    assert PARAMS.table.early_df == 2 and PARAMS.table.template_df == 5

    def page(*texts: str) -> Outcome:
        html = "<html><body>" + "".join(f"<div>{t}</div>" for t in texts) + "</body></html>"
        return decide(make_page(html=html), table, TABLE_RULE)

    page("everywhere", "one and three")
    assert _blocks_by_text(page("everywhere", "only two")) == {"everywhere": TEMPLATE, "only two": CONTENT}
    # Page 3: threshold 3. "one and three" has df 2 now: not template yet.
    assert _blocks_by_text(page("everywhere", "one and three")) == {"everywhere": TEMPLATE, "one and three": CONTENT}


# -- pagelets in the host's table --------------------------------------------------------------

# No pagelet keys; pagelet keys for the events only; the signal in the verdicts too (the default).
PLAIN = dataclasses.replace(PARAMS, pagelets=dataclasses.replace(PARAMS.pagelets, enabled=False, events=False))
EVENTS = dataclasses.replace(PARAMS, pagelets=dataclasses.replace(PARAMS.pagelets, enabled=False, events=True))
SIGNAL = dataclasses.replace(PARAMS, pagelets=dataclasses.replace(PARAMS.pagelets, enabled=True, events=True))


def test_pagelet_events_list_the_template_pagelets_of_the_page() -> None:
    from detemplate.io.codec import event_dict

    site = make_site("pl.example", 40, seed=5, redesign=25)
    table, outcomes = run(site, EVENTS)
    assert table.tagged_keys() > 0
    events = [(i, e) for i, out in enumerate(outcomes) for e in out.events]
    assert [e.type for _, e in events] == ["template.learned", "template.changed"]
    for i, e in events:
        out = outcomes[i]
        assert out.clean is not None and e.pagelets is not None
        report = e.pagelets
        assert 0 < report.template_pagelets <= report.page_pagelets and report.listed
        details = event_dict(e)["details"]
        assert details["template_pagelets"] == report.template_pagelets
        for p, d in zip(report.listed, details["pagelets"], strict=True):
            assert d["shingle"] == f"{p.shingle:016x}" and table.df(p.shingle) >= 0
            assert p.df >= 2 and p.links >= PARAMS.pagelets.min_links
            blocks = out.clean.blocks[p.first_block : p.end_block]
            assert blocks and p.text.startswith(blocks[0].text[:20])
            assert d["blocks"] == list(range(p.first_block, p.end_block)) and len(d["text"]) <= 80
        texts = " ".join(p.text for p in report.listed)
        assert "privacy" in texts.lower(), texts  # the footer's link list is a template pagelet
        assert not any(g in texts for g in site[i].gold_blocks if len(g) > 30)  # no article text


def test_pagelet_keys_do_not_change_verdicts_or_template_counts() -> None:
    """Tracking pagelets (for events) leaves the clean pages and the segment counts of the
    events as they are without them: only the pagelet lists are added."""
    site = make_site("same.example", 40, seed=3, layout="news", redesign=25)
    plain_table, plain = run(site, PLAIN)
    tracked_table, tracked = run(site, EVENTS)
    assert len(tracked_table) > len(plain_table) and tracked_table.template_count == plain_table.template_count
    for a, b in zip(plain, tracked, strict=True):
        assert a.clean == b.clean
        assert [(e.type, e.details) for e in a.events] == [(e.type, e.details) for e in b.events]
        assert all(e.pagelets is None for e in a.events) and all(e.pagelets is not None for e in b.events)
        assert set(a.applied) < set(b.applied) or not b.events  # the pagelet keys come on top


def test_replaying_applied_keys_with_pagelets_and_cluster_statistics_rebuilds_the_table() -> None:
    from detemplate.engine.keys import is_tagged_key

    params = dataclasses.replace(SIGNAL, clusters=dataclasses.replace(SIGNAL.clusters, statistics=True))
    pages = make_site("replay-pl.example", 40, seed=9, redesign=25)
    table, outcomes = run(pages, params)
    rebuilt = HostTable(PARAMS.table)
    for out in outcomes:
        keys = list(out.applied)
        n = sum(1 for k in keys if not is_tagged_key(k))
        # Segment keys sorted and distinct, then the tagged ones: pagelet keys, then layout
        # keys (each sorted), then one cluster key per segment key.
        assert keys[:n] == sorted(set(keys[:n])) and len(keys) >= 2 * n
        assert all(is_tagged_key(k) for k in keys[n:])
        middle = keys[n : len(keys) - n]
        assert len(middle) == len(set(middle))
        assert out.cluster is not None
        replay_page(rebuilt, keys, out.cluster, out.cluster_signature, params)
    assert rebuilt.to_bytes() == table.to_bytes()


def test_pagelet_signal_turns_blocks_only_with_enabled() -> None:
    site = make_site("turn.example", 30, seed=11, layout="docs")
    _, tracked = run(site, EVENTS)
    _, signal = run(site, SIGNAL)
    methods = {b.method for out in tracked for b in out.clean.blocks}  # type: ignore[union-attr]
    assert "pagelet" not in methods
    for a, b in zip(tracked, signal, strict=True):
        assert a.applied == b.applied  # the same keys in the table either way
        assert a.clean is not None and b.clean is not None
        for x, y in zip(a.clean.blocks, b.clean.blocks, strict=True):
            if y.method == "pagelet":
                assert y.verdict == TEMPLATE and x.ratio == y.ratio <= PARAMS.table.template_ratio


def test_pagelet_outcomes_are_identical_across_stores(tmp_path: Path) -> None:
    pages = [
        sp.page
        for sp in interleave(
            make_site("a.example", 30, seed=1, layout="blog", redesign=18),
            make_site("b.example", 25, seed=2, layout="docs"),
        )
    ]
    memory = MemoryStore()
    rocks = RocksStore(tmp_path / "state", PARAMS.table, cache_hosts=1)
    try:
        for page in pages:
            mine = process_page(page, memory, SIGNAL)
            theirs = process_page(page, rocks, SIGNAL)
            assert _outcome_bytes(mine) == _outcome_bytes(theirs)
    finally:
        rocks.close()


# An article whose own text goes on after a nested list and table: the article's block holds
# its heading and three paragraphs, around the list's and the table's blocks.
IN_ORDER = (
    "<html><body><div><a href='/'>Home</a> <a href='/a'>About</a></div><article><h1>A title</h1>"
    "<p>First paragraph, before the list.</p><ul><li>item one</li><li>item two</li></ul>"
    "<p>Second paragraph, after the list.</p><table><tr><td>a cell</td></tr></table>"
    "<p>Third paragraph, after the table.</p>Its last words<br>after a break</article></body></html>"
)


@pytest.mark.parametrize("with_html", [False, True])  # the compiled walk where it runs; the Python one
def test_the_kept_text_is_in_document_order_a_paragraph_a_line(with_html: bool) -> None:
    page = RawPage("https://order.example/a", IN_ORDER, "order.example")
    out = decide(page, HostTable(TABLE_ONLY.table), TABLE_ONLY, with_html)  # a first page: all kept
    assert out.clean is not None
    assert out.clean.text.split("\n") == [
        "Home About",  # two links of one block, a line
        "A title",  # a heading and each paragraph, a line each
        "First paragraph, before the list.",
        "item one",
        "item two",
        "Second paragraph, after the list.",
        "a cell",
        "Third paragraph, after the table.",
        "Its last words",
        "after a break",
    ]
    # The blocks are as before: each element's own text, in the order the elements open.
    assert [b.text for b in out.clean.blocks][:3] == [
        "Home About",
        "A title First paragraph, before the list. Second paragraph, after the list. Third paragraph, after the table. "
        "Its last words after a break",
        "item one",
    ]


def test_a_removed_block_between_two_runs_of_a_kept_one_parts_them() -> None:
    seg = lambda text: Segment(hash(text), text, len(text))  # noqa: E731
    blocks = [Block("html/body/article", [seg("one"), seg("two"), seg("three")], 0),
              Block("html/body/article/aside", [seg("share this")], 1)]
    texts = ["one two three", "share this"]
    runs = [0, 2, 1, 1, 0, 1]  # one two | share this | three
    assert kept_text_python(blocks, texts, runs, [False, True], ["one two three"]) == "one two\nthree"
    assert kept_text_python(blocks, texts, runs, [False, False], texts) == "one two\nshare this\nthree"
    assert kept_text_python(blocks, texts, runs, [True, False], ["share this"]) == "share this"
    assert kept_text_python(blocks, texts, [], [False, False], texts) == "one two three\nshare this"  # no runs


def test_forgetting_the_caches_empties_them_and_changes_no_decision() -> None:
    from detemplate.engine import links
    from detemplate.engine.detectors import clusters
    from detemplate.engine.page import cues
    from detemplate.engine.pipeline import forget_caches

    params = EngineParams()
    pages = [sp.page for sp in interleave(*(make_site(f"f{n}.example", 4, seed=n) for n in range(3)))]

    def outcomes() -> list[object]:
        store = MemoryStore()
        return [process_page(page, store, params) for page in pages]

    first = outcomes()
    again = outcomes()  # with the caches full
    caches = (cues.HINTS, cues.LAYOUT_CLASSES, links._RESOLVED, clusters._PATH_KEYS)
    for cache in caches:
        cache["sentinel"] = 0  # type: ignore[index]
    forget_caches(params)
    assert not any("sentinel" in cache for cache in caches)
    assert first == again == outcomes()
