"""A host's first page decided once its second page is in the table (engine/firstpages.py):
what the held decision keeps, where the output goes, the bound, and the guard."""

from __future__ import annotations

from collections import Counter

import pytest
from detemplate.engine import firstpages, pipeline
from detemplate.engine.firstpages import FirstPages, decide_held, process_pages
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams, with_overrides
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.state.memory import MemoryStore

from tests.factories import interleave, make_site

_SIDEBAR = "".join(f"<li><a href='/guide/{w}.html'>{w.title()} guide</a></li>" for w in
                   ("install", "configure", "deploy", "upgrade", "monitor", "backup", "restore", "tune"))
_TOC = "".join(f"<li><a href='/ref/{w}.html'>{w.title()} reference</a></li>" for w in
               ("parser", "lexer", "scheduler", "registry", "cache", "session", "router", "logger", "codec", "plugin"))


def _docs_page(url: str, main: str) -> RawPage:
    return RawPage(url=url, host="docs.example", source="test", html=(
        "<html><head><title>Widget docs</title></head><body>"
        "<header><a href='/'>Widget</a> <a href='/api/'>API</a> <a href='/blog/'>Blog</a></header>"
        f"<nav class='sidebar'><ul>{_SIDEBAR}</ul></nav>"
        f"<main><article>{main}</article></main>"
        "<footer><p>Copyright 2024 the Widget authors. Built with a documentation generator.</p></footer>"
        "</body></html>"))


HOME = _docs_page("https://docs.example/", f"<h1>Widget</h1><p>Widget turns sprockets into gears.</p><ul>{_TOC}</ul>")
INSTALL = _docs_page("https://docs.example/guide/install.html", "<h1>Install</h1>" + "".join(
    f"<p>Step {i}: run the installer with option {i} and wait for the progress bar to reach the end "
    f"before step {i + 1}.</p>" for i in range(6)))


def test_a_documentation_home_page_keeps_its_table_of_contents_and_loses_the_layout() -> None:
    # Alone, the model reads the page as links and the guard keeps it whole (header and footer
    # too) but for the sidebar's nav, which HTML puts beside the content (the footer holds the
    # page's most plain text: it stays); with the second page in the table, the layout is the
    # pages' shared part.
    params = EngineParams()
    alone = decide(HOME, HostTable(params.table), params)
    held, ballot = decide_held(HOME, alone, INSTALL, params)
    assert alone.clean is not None and held.clean is not None and ballot is not None and ballot.held
    assert "Install guide" not in alone.clean.text and "Widget API Blog" in alone.clean.text
    assert "Copyright" in alone.clean.text
    toc = [f"{w.title()} reference" for w in ("parser", "lexer", "scheduler", "registry", "cache", "session",
                                               "router", "logger", "codec", "plugin")]
    assert held.clean.text.splitlines() == ["Widget", "Widget turns sprockets into gears.", *toc]
    # What the host's table has of the page, and its number and cluster, are those of its arrival.
    assert (held.clean.page_no, held.clean.cluster, held.applied, held.events) == (
        alone.clean.page_no, alone.clean.cluster, alone.applied, alone.events)


def test_the_held_decision_never_keeps_much_less_than_the_page_alone() -> None:
    # With no share of the page's kept text allowed to go, the held decision (which removes the
    # layout the page alone kept) gives way to the page alone, whole.
    params = with_overrides(EngineParams(), ["pagelevel.max_new_removed_share=0"])
    alone = decide(HOME, HostTable(params.table), params)
    held, ballot = decide_held(HOME, alone, INSTALL, params)
    assert held is alone and ballot is None


def _order(pages: list[RawPage], params: EngineParams) -> list[tuple[str, int, int | None]]:
    return [(d.page.url, d.outcome.clean.page_no if d.outcome.clean else -1, d.at)
            for d in process_pages(pages, MemoryStore(), params)]


def test_a_first_page_goes_out_just_before_its_second_decided_with_it() -> None:
    sites = [make_site(f"s{n}.example", 4, seed=n, layout=("blog", "docs", "news")[n]) for n in range(3)]
    pages = [sp.page for sp in interleave(*sites)]  # s0 s1 s2 s0 s1 s2 ...
    params = EngineParams()
    out = list(process_pages(pages, MemoryStore(), params))
    assert [d.page.url for d in out] == [pages[i].url for i in (0, 3, 1, 4, 2, 5, *range(6, 12))]
    assert all(d.at is None for d in out)
    # The first page's output is the held decision, with the host's second page.
    alone = decide(pages[0], HostTable(params.table), params)
    assert out[0].outcome == decide_held(pages[0], alone, pages[3], params)[0]
    # Each host's pages still go out in their order.
    for site in sites:
        nos = [d.outcome.clean.page_no for d in out if d.page.host == site[0].page.host and d.outcome.clean]
        assert nos == [1, 2, 3, 4]


def test_a_first_page_whose_second_comes_late_goes_out_alone_after_the_bound() -> None:
    lone = make_site("late.example", 2, seed=7, layout="docs")
    others = [sp.page for sp in make_site("busy.example", 6, seed=8, layout="blog")]
    pages = [lone[0].page, *others, lone[1].page]  # the late host's second page at position 7
    params = with_overrides(EngineParams(), ["pagelevel.hold_first=3"])
    order = _order(pages, params)
    # busy's first page waits for its second (position 2); late's first goes out alone after
    # position 0 + 3, before position 4's output; late's second is page 2 of its host.
    assert order == [
        (others[0].url, 1, None), (others[1].url, 2, None), (others[2].url, 3, None),
        (lone[0].page.url, 1, 3), (others[3].url, 4, None), (others[4].url, 5, None), (others[5].url, 6, None),
        (lone[1].page.url, 2, None),
    ]
    released = next(d for d in process_pages(pages, MemoryStore(), params) if d.page.url == lone[0].page.url)
    assert released.outcome == decide(lone[0].page, HostTable(params.table), params)  # as decided alone
    # Without holding, every page goes out at once, as decided alone.
    off = with_overrides(EngineParams(), ["pagelevel.hold_first=0"])
    assert [u for u, _, _ in _order(pages, off)] == [p.url for p in pages]


def test_pages_still_held_at_the_end_go_out_alone_in_input_order() -> None:
    a, b = (make_site(f"{h}.example", 1, seed=n)[0].page for n, h in enumerate("ab"))
    params = EngineParams()
    held = FirstPages(params)
    for at, page in enumerate((a, b)):
        out = decide(page, HostTable(params.table), params)
        assert held.decided(page, out, None, at) == []
    assert held.oldest() == 0 and len(held) == 2
    flushed = held.flush()
    assert [(d.page.url, d.at) for d in flushed] == [(a.url, params.pagelevel.hold_first),
                                                      (b.url, 1 + params.pagelevel.hold_first)]
    assert held.oldest() is None and held.flush() == []


def test_a_host_starting_afresh_lets_its_old_first_page_go_alone() -> None:
    # A host whose table was dropped (expiry) comes back with a first page while the old one is
    # still held: the old one goes out as decided alone, the new one is held.
    params = EngineParams()
    one, two = (sp.page for sp in make_site("back.example", 2, seed=3))
    held = FirstPages(params)
    first = decide(one, HostTable(params.table), params)
    assert held.decided(one, first, None, 0) == []
    again = decide(two, HostTable(params.table), params)  # a fresh table: page 1 again
    out = held.decided(two, again, None, 1)
    assert [(d.page.url, d.outcome) for d in out] == [(one.url, first)]
    assert held.oldest() == 1


def test_a_first_page_the_guard_gives_alone_keeps_its_ballot_of_then() -> None:
    # `eval --loco` replays each gold page's ballot: a page given as decided alone keeps the
    # ballot it was decided with, a cold one.
    params = with_overrides(EngineParams(), ["pagelevel.max_new_removed_share=0"])
    out = list(process_pages([HOME, INSTALL], MemoryStore(), params, ballots=True))
    assert [d.page.url for d in out] == [HOME.url, INSTALL.url]
    assert out[0].outcome == decide(HOME, HostTable(params.table), params)
    assert out[0].ballot is not None and not out[0].ballot.held and not out[0].ballot.warm


def test_a_held_page_is_walked_once_and_decided_as_if_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The decision again takes the page's walk from its arrival (FirstPages.walks): each page
    # is parsed and walked once, and every output is what a walk anew gives.
    sites = [make_site(f"w{n}.example", 3, seed=10 + n, layout=("blog", "docs", "news")[n % 3]) for n in range(5)]
    pages = [sp.page for sp in interleave(*sites)]
    params = EngineParams()
    walks: Counter[str] = Counter()
    walk_page = pipeline.walk_page

    def counted(page: RawPage, *args: object) -> object:
        walks[page.url] += 1
        return walk_page(page, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "walk_page", counted)
    kept = [(d.page.url, d.outcome) for d in process_pages(pages, MemoryStore(), params)]
    assert sorted(walks.values()) == [1] * len(pages)
    # Only as many walks as fit in the budget: here the first two hosts' first pages.
    monkeypatch.setattr(firstpages, "HELD_WALK_CHARS", len(pages[0].html) + len(pages[1].html))
    walks.clear()
    assert [(d.page.url, d.outcome) for d in process_pages(pages, MemoryStore(), params)] == kept
    assert sorted(walks.values()) == [1] * (len(pages) - 3) + [2] * 3
    # With --html the output changes the tree: the first page is walked again.
    walks.clear()
    list(process_pages(pages, MemoryStore(), params, with_html=True))
    assert sorted(walks.values()) == [1] * (len(pages) - 5) + [2] * 5
