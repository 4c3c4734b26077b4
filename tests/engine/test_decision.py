"""detemplate.engine.decision and the layout detector: where repetition is evidence of template."""

from __future__ import annotations

import dataclasses
import random

import detemplate.engine.decision as decision_module
import numpy as np
import pytest
from detemplate.engine.decision import (
    ROLE_COMMENTS,
    ROLE_MAIN,
    ROLE_OTHER,
    ROLE_RELATED,
    ROLE_TEMPLATE,
    cold_threshold,
    decide_blocks,
    region_nodes,
    text_level,
)
from detemplate.engine.detectors.base import Ballot
from detemplate.engine.detectors.layout import content_region
from detemplate.engine.model import CONTENT, METHOD_COLD, METHOD_MARKUP, TEMPLATE, Outcome, RawPage
from detemplate.engine.page import parse, walk
from detemplate.engine.page.cues import F_THINT
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide, decide_with_ballot
from detemplate.engine.table import HostTable
from detemplate.tools.samples import SHOP_STYLES, make_shop, norm

PARAMS = EngineParams()
# The table and the region without the page-level model: what these tests are about.
NO_MODEL = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, enabled=False))

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda sigma omega river stone cloud".split()
NAV = (
    "<nav><ul><li><a href='/'>Home</a></li><li><a href='/docs'>Docs</a></li><li><a href='/blog'>Blog</a></li></ul>"
    "</nav>"
)
FOOTER = "<footer><p>Copyright 2026 Example Project. All rights reserved.</p></footer>"
INHERITED = (
    "<section class='inherited'><h3>Methods inherited from class Object</h3>"
    "<p><a href='/o#clone'>clone</a>, <a href='/o#equals'>equals</a>, <a href='/o#hash'>hashCode</a>, "
    "<a href='/o#str'>toString</a></p></section>"
)
EDIT = "<div class='edit'><a href='/edit'>Edit this page on the project's repository</a></div>"


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def page(i: int, *, inherited: bool = True, edit: bool = True) -> RawPage:
    rng = random.Random(i)
    paras = "".join(f"<p>{sentence(rng)}</p>" for _ in range(4))
    main = f"<main><div class='content'><h1>Class number {i}</h1>{paras}{INHERITED if inherited else ''}"
    main += f"{EDIT if edit else ''}</div></main>"
    html = f"<html><body><header>{NAV}</header>{main}{FOOTER}</body></html>"
    return RawPage(f"https://docs.example/c{i}.html", html, "docs.example")


def verdicts(outcome: Outcome) -> dict[str, tuple[str, str]]:
    assert outcome.clean is not None
    return {b.text: (b.verdict, b.role) for b in outcome.clean.blocks}


def run(pages: list[RawPage], params: EngineParams = NO_MODEL) -> list[Outcome]:
    table = HostTable(params.table)
    return [decide(p, table, params) for p in pages]


def test_repetition_counts_only_where_the_layout_is() -> None:
    # The inherited methods on one page in three, the rest on every page.
    outs = run([page(i, inherited=i % 3 == 0) for i in range(13)])
    last = verdicts(outs[-1])
    # The site's layout: repeated at paths that never carry new text, on every page.
    assert last["Home"] == (TEMPLATE, ROLE_TEMPLATE)
    assert last["Copyright 2026 Example Project. All rights reserved."][0] == TEMPLATE
    # Inside the content region, a line at such a path is template too...
    assert last["Edit this page on the project's repository"][0] == TEMPLATE
    # ... but a block that repeats there on only some of the host's pages is content.
    inherited = [t for t in last if t.startswith("Methods inherited")]
    assert inherited and all(last[t] == (CONTENT, ROLE_MAIN) for t in inherited)
    assert any(t.startswith("Class number 12") and v[0] == CONTENT for t, v in last.items())


def test_without_the_region_the_table_removes_repeated_content() -> None:
    rule = dataclasses.replace(NO_MODEL, region=dataclasses.replace(NO_MODEL.region, enabled=False))
    last = verdicts(run([page(i) for i in range(12)], rule)[-1])
    inherited = [t for t in last if t.startswith("Methods inherited")]
    assert inherited and all(last[t][0] == TEMPLATE for t in inherited)


def test_a_block_repeated_on_every_page_is_layout() -> None:
    # Repeated on every page at a path that never carries new text: by the host's pages
    # alone, that is the site's layout, even inside the content region.
    last = verdicts(run([page(i) for i in range(12)])[-1])
    inherited = [t for t in last if t.startswith("Methods inherited")]
    assert inherited and all(last[t][0] == TEMPLATE for t in inherited)


def test_repetition_inside_the_region_takes_at_most_its_share_of_the_regions_text() -> None:
    # An API's classes that inherit the same members, one after another (a crawl sorted by
    # URL): the inherited section is at paths that never carried new text, on every page so
    # far, so it looks like the host's layout; the page's own text is three short lines.
    # Past `max_removed_share` of the region's text the table's removals inside the region
    # are undone; the navigation and the footer outside it stay template.
    members = "".join(f"<p><a href='/base#{w}'>{w}</a> ({WORDS[k + 1]}: Tree, {WORDS[k + 2]}: Int): Void</p>"
                      for k, w in enumerate(WORDS[:5]))

    def node_page(i: int) -> RawPage:
        own = (f"<h1>Class Node{i}</h1><p>Reads the {WORDS[i % 16]} input {i}.</p>"
               f"<p>Since version {i}.{i % 7}.</p>")
        body = f"<h3>Methods inherited from BaseNode</h3>{members}"
        html = (f"<html><body><header>{NAV}</header><main><div class='content'>{own}"
                f"<section class='inherited'>{body}</section></div></main>{FOOTER}</body></html>")
        return RawPage(f"https://api.example/Node{i}.html", html, "api.example")

    pages = [node_page(i) for i in range(12)]
    off = dataclasses.replace(NO_MODEL, pagelevel=dataclasses.replace(NO_MODEL.pagelevel, max_removed_share=1.0))
    without = verdicts(run(pages, off)[-1])
    inherited = [t for t in without if t.startswith("Methods inherited from BaseNode")]
    assert inherited and all(without[t][0] == TEMPLATE for t in inherited)  # the case: it looks like layout

    last = run(pages)[-1]
    kept = verdicts(last)
    assert all(kept[t][0] == CONTENT for t in inherited)
    assert any(t.startswith("Class Node11") and v[0] == CONTENT for t, v in kept.items())
    assert kept["Home"][0] == TEMPLATE and kept["Copyright 2026 Example Project. All rights reserved."][0] == TEMPLATE
    assert last.clean is not None and f"{WORDS[0]} ({WORDS[1]}: Tree, {WORDS[2]}: Int): Void" in last.clean.text


def test_outside_the_region_a_layout_path_is_template_before_its_text_is_frequent() -> None:
    # A box beside the content that shows one of two texts in turn: each text is on fewer
    # than template_df of the host's pages, so the table alone keeps it; its path is on every
    # page and carried new text on only the first two, so it is the host's layout.
    rng = random.Random(7)
    texts = [sentence(rng, 9) for _ in range(2)]

    def boxed(i: int) -> RawPage:
        paras = "".join(f"<p>{sentence(random.Random(100 + i))}</p>" for _ in range(4))
        html = f"<html><body><header>{NAV}</header><main><h1>Story {i}</h1>{paras}</main>"
        html += f"<aside><p>{texts[i % 2]}</p></aside></body></html>"
        return RawPage(f"https://news.example/s{i}.html", html, "news.example")

    last = verdicts(run([boxed(i) for i in range(8)])[-1])
    assert last[texts[1]][0] == TEMPLATE
    assert any(t.startswith("Story 7") and v[0] == CONTENT for t, v in last.items())
    # The layout path is what removes it: with layout_novelty 0 no path is layout, and the
    # table alone keeps the box.
    no_layout = dataclasses.replace(NO_MODEL, region=dataclasses.replace(NO_MODEL.region, layout_novelty=0.0))
    assert verdicts(run([boxed(i) for i in range(8)], no_layout)[-1])[texts[1]][0] == CONTENT


def test_the_ballot_replays_to_the_live_verdicts() -> None:
    # eval --loco replays the decision over kept ballots: it must give what decide gave.
    table = HostTable(PARAMS.table)
    for i in range(9):
        outcome, ballot = decide_with_ballot(page(i), table, PARAMS)
        assert ballot is not None and outcome.clean is not None
        replayed = decide_blocks(ballot, PARAMS)
        assert [t == TEMPLATE for t in (b.verdict for b in outcome.clean.blocks)] == replayed.template
        assert [b.method for b in outcome.clean.blocks] == replayed.method
        assert [b.role for b in outcome.clean.blocks] == replayed.role


def test_a_cold_page_without_the_model_is_kept_whole_but_for_its_nav_and_footer() -> None:
    outcome = decide(page(0), HostTable(NO_MODEL.table), NO_MODEL)
    assert outcome.clean is not None
    beside = [b for b in outcome.clean.blocks if "/nav" in b.path or "/footer" in b.path]
    assert [b.text for b in beside] == ["Home", "Docs", "Blog", "Copyright 2026 Example Project. All rights reserved."]
    assert {(b.verdict, b.method, b.role) for b in beside} == {(TEMPLATE, METHOD_MARKUP, ROLE_TEMPLATE)}
    rest = [b for b in outcome.clean.blocks if b not in beside]
    assert {(b.verdict, b.method, b.role) for b in rest} == {(CONTENT, METHOD_COLD, ROLE_MAIN)}


def test_a_nav_or_footer_that_holds_the_main_text_keeps_it_and_one_inside_it_does_not() -> None:
    # An article inside a footer (or a page wrapped in a nav) is the page's text; a nav of
    # links to other pages inside that footer still goes.
    body = f"<p>{_article(0)}</p><nav><a href='/a'>Alpha page</a> <a href='/b'>Beta page</a></nav>"
    for outer in ("footer", "nav"):
        html = f"<html><body>{NAV}<{outer}><h1>Post</h1>{body}</{outer}></body></html>"
        out = decide(RawPage("https://news.example/p", html, "news.example"), HostTable(NO_MODEL.table), NO_MODEL)
        assert out.clean is not None
        assert "Paragraph 0 sentence 11" in out.clean.text and "Post" in out.clean.text
        assert "Alpha page" not in out.clean.text and "Home" not in out.clean.text


def test_content_region_is_the_deepest_element_with_the_share_of_new_plain_text() -> None:
    html = (
        "<html><body><div class='side'><a href='/a'>a link list</a> <a href='/b'>and more</a></div>"
        "<div class='main'><div class='lead'>new words here</div><div class='body'>" + "x" * 200 + "</div></div>"
        "</body></html>"
    )
    cues = walk(parse(html, PARAMS.segment), PARAMS.segment)
    all_new = [sum(s.length for s in b.segments) for b in cues.blocks]
    node = content_region(cues, all_new, 0.8)
    assert cues.tag[node] == "div" and node == cues.node_of_block[-1]  # the 200-character body: 93%
    node = content_region(cues, all_new, 0.95)
    assert cues.parent[cues.node_of_block[-1]] == node  # needs the lead as well: their container
    assert content_region(cues, [0] * len(all_new), 0.8) == 0  # no new text: the whole page


def test_region_widens_to_the_hosts_container() -> None:
    cues = walk(parse("<html><body><main><div><p>one</p></div><div><p>two</p></div></main></body></html>",
                      PARAMS.segment), PARAMS.segment)
    ballot = Ballot(PARAMS, cues.blocks, 5, cues)
    first_div, main, body = cues.node_of_block[0], cues.parent[cues.node_of_block[0]], 1
    ballot.region = ([first_div, main, body, 0], [0.2, 0.6, 1.0, 1.0])
    assert region_nodes(ballot, 0.5)[0] == main
    assert region_nodes(ballot, 0.1)[0] == first_div
    assert region_nodes(ballot, 0.9)[0] == body


@pytest.mark.parametrize(("cls", "links", "role"), [("comments", False, ROLE_COMMENTS),
                                                     ("box", True, ROLE_RELATED), ("related", False, ROLE_RELATED)])
def test_page_specific_text_the_model_removes_gets_its_role(cls: str, links: bool, role: str) -> None:
    body = "<a href='/x'>read this other story</a>" if links else "a reader wrote this today"
    html = f"<html><body><div class='content'><p>{'y' * 300}</p></div><div class='{cls}'>{body}</div></body></html>"
    cues = walk(parse(html, PARAMS.segment), PARAMS.segment)
    ballot = Ballot(PARAMS, cues.blocks, 9, cues, warm=True)
    ballot.novel = [sum(s.length for s in b.segments) for b in cues.blocks]  # all new
    ballot.novelty = [1.0] * len(cues.blocks)
    ballot.presence = [1.0] * len(cues.blocks)
    ballot.region = ([cues.node_of_block[0]], [1.0])  # the content div
    ballot.scores = np.array([0.0, 0.99])
    decided = decide_blocks(ballot, PARAMS)
    assert decided.template == [False, True]
    assert decided.role == [ROLE_MAIN, role]


def test_layout_tagged_key_is_keys_tag_of_mix64() -> None:
    import numpy as np
    from detemplate.engine import keys
    from detemplate.engine.detectors.layout import tagged_key

    spread = [(i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(200)]
    values = [0, 1, (1 << 64) - 1, 0x5851F42D4C957F2D, *spread]
    for salt in (0, 0x5BD1E9955BD1E995):
        expected = keys.tag(keys.mix64(np.asarray(values, dtype=np.uint64) ^ np.uint64(salt)))
        assert [tagged_key(v, salt) for v in values] == [int(v) for v in expected]


def test_a_duplicate_on_a_young_host_keeps_its_content() -> None:
    # The second page of a host repeats the first word for word (the same article at two
    # URLs): every segment is on every page so far, and one page of layout counts cannot
    # tell the article from the template. It is judged as a first page, so the article stays.
    article = " ".join(f"Sentence {i} of the article says something of its own, at length." for i in range(30))
    html = (
        "<html><body><nav><a href=/>Home</a> <a href=/news>News</a> <a href=/about>About</a></nav>"
        f"<main><article><h1>The story</h1><p>{article}</p></article></main>"
        "<footer>Copyright 2026 Example Media</footer></body></html>"
    )
    params = EngineParams()
    table = HostTable(params.table)
    first = decide(RawPage("https://dup.example/a", html, "dup.example"), table, params)
    second = decide(RawPage("https://dup.example/a?ref=home", html, "dup.example"), table, params)
    assert first.clean is not None and second.clean is not None
    assert "Sentence 29 of the article" in first.clean.text
    assert "Sentence 29 of the article" in second.clean.text
    # The table alone (no layout, no rule) removes the duplicate's article: the failure prevented.
    params_off = dataclasses.replace(params, region=dataclasses.replace(params.region, enabled=False))
    table = HostTable(params.table)
    decide(RawPage("https://dup.example/a", html, "dup.example"), table, params_off)
    again = decide(RawPage("https://dup.example/b", html, "dup.example"), table, params_off)
    assert again.clean is not None and "Sentence 29 of the article" not in again.clean.text


def test_text_level_is_the_score_under_which_a_share_of_the_text_lies() -> None:
    scores = [0.9, 0.001, 0.05, 0.001]
    chars = [10, 60, 20, 10]  # by rising score: 0.001 (70 chars), 0.05 (90), 0.9 (100)
    assert text_level(scores, chars, 0.5) == 0.001
    assert text_level(scores, chars, 0.7) == 0.001
    assert text_level(scores, chars, 0.71) == 0.05
    assert text_level(scores, chars, 0.9) == 0.05
    assert text_level(scores, chars, 0.95) == 0.9
    assert text_level(scores, chars, 0.0) == 0.001
    assert text_level([], [], 0.5) == 0.0
    assert text_level([0.3, 0.7], [0, 0], 0.5) == 0.0  # no text: no level


def _region_ballot(body: str, scores: list[float]) -> tuple[Ballot, list[str]]:
    """A warm page's ballot whose content region is the first block's element (the content
    div, when its text comes first); all its text new."""
    html = f"<html><body><div class='content'>{body}</div></body></html>"
    cues = walk(parse(html, PARAMS.segment), PARAMS.segment)
    ballot = Ballot(PARAMS, cues.blocks, 9, cues, warm=True)
    ballot.novel = [sum(s.length for s in b.segments) for b in cues.blocks]
    ballot.novelty = [1.0] * len(cues.blocks)
    ballot.presence = [1.0] * len(cues.blocks)
    ballot.region = ([cues.node_of_block[0]], [1.0])
    ballot.scores = np.asarray(scores)
    return ballot, [" ".join(seg.text for seg in b.segments) for b in cues.blocks]


def test_inside_the_region_the_model_removes_only_link_lists_far_above_the_regions_text() -> None:
    line = "Paragraph {} of the article, written at length for its readers. "
    prose = "".join(f"<p>{line.format(i) * 3}</p>" for i in range(3))
    teasers = "<ul><li><a href='/a'>Other story one</a> <a href='/b'>Other story two</a></li></ul>"
    footnote = "<ol><li>A footnote of this article, in prose, with a source named.</li></ol>"
    # The article (one block of three paragraphs) scores 1e-4, the two boxes 0.99.
    ballot, texts = _region_ballot(prose + teasers + footnote, [1e-4, 0.99, 0.99])
    assert texts[1].startswith("Other story one") and texts[2].startswith("A footnote")
    # The link list is removed; the footnote, prose, never is by the model; the article stays.
    assert decide_blocks(ballot, PARAMS).template == [False, True, False]
    # The same link list on a page whose own text scores high (a documentation page): kept.
    ballot, _ = _region_ballot(prose + teasers + footnote, [0.2, 0.99, 0.99])
    assert decide_blocks(ballot, PARAMS).template == [False, False, False]
    # Without the ratio, the absolute floor alone decides: the link list goes again.
    absolute = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, inner_ratio=0.0))
    assert decide_blocks(ballot, absolute).template == [False, True, False]


def test_a_first_pages_threshold_follows_its_own_text() -> None:
    # With a ratio (the default is none: a fixed threshold, chosen by eval --loco).
    plp = dataclasses.replace(PARAMS.pagelevel, cold_ratio=10.0, threshold=0.05)
    chars = [100, 100, 100, 100, 100]
    # A news article: its text scores 1e-4, so the floor holds.
    assert cold_threshold(np.asarray([1e-4, 1e-4, 1e-4, 0.03, 0.9]), chars, plp) == plp.cold_floor
    # A documentation index: all its text scores high, so the threshold rises, up to the ceiling.
    assert cold_threshold(np.asarray([0.002, 0.003, 0.004, 0.03, 0.9]), chars, plp) == pytest.approx(0.02)
    assert cold_threshold(np.asarray([0.2, 0.3, 0.4, 0.5, 0.9]), chars, plp) == plp.threshold
    off = dataclasses.replace(plp, cold_ratio=0.0)
    assert cold_threshold(np.asarray([0.2, 0.3, 0.4, 0.5, 0.9]), chars, off) == off.threshold


def test_a_first_page_the_model_would_remove_nearly_whole_at_its_floor_is_kept_whole() -> None:
    # One long table of like rows, the model's scores a little over the floor everywhere: it has
    # misread the page. A raised threshold would leave some rows and drop the others; the guard
    # reads the model at its floor and keeps the page whole. (With a threshold relative to the
    # page's text, as the default is; without one, floor and threshold are the same.)
    params = dataclasses.replace(
        PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, cold_ratio=10.0, threshold=0.05, cold_floor=0.02)
    )
    over = 0.025  # a little over the floor, under the threshold
    rows = "".join(f"<tr><td>cell {j:03d} of the table</td></tr>" for j in range(40))
    cues = walk(parse(f"<html><body><table>{rows}</table></body></html>", params.segment), params.segment)
    ballot = Ballot(params, cues.blocks, 1, cues)
    ballot.scores = np.asarray([over if i % 2 else 0.2 for i in range(len(cues.blocks))])
    assert cold_threshold(ballot.scores.tolist(), ballot.tally().chars, params.pagelevel) == params.pagelevel.threshold
    decided = decide_blocks(ballot, params)
    assert not any(decided.template)
    # Below the guard, the raised threshold decides: the rows at 0.2 go, those a little over
    # the floor stay. (Four short rows are left there: the guard of a page it would leave a
    # line of is off.)
    ballot.scores = np.asarray([0.001 if i < 4 else (over if i % 2 else 0.2) for i in range(len(cues.blocks))])
    unguarded = dataclasses.replace(params, pagelevel=dataclasses.replace(params.pagelevel, cold_min_kept=0))
    assert sum(decide_blocks(ballot, unguarded).template) == sum(1 for s in ballot.scores if s > 0.05)


def test_a_first_page_the_model_would_leave_a_line_of_is_kept_whole() -> None:
    # A documentation site's home page: a table of contents, every line a link, and a
    # copyright line. The model reads every link far over its floor and the copyright line as
    # prose: it would keep the copyright line alone, which is no page's content.
    toc = "".join(f"<li><a href='/ch{j}.html'>{j}. Chapter number {j}</a></li>" for j in range(30))
    html = f"<html><body><ul>{toc}</ul><p>Copyright 2021, The Authors. Made with a generator.</p></body></html>"
    cues = walk(parse(html, PARAMS.segment), PARAMS.segment)
    ballot = Ballot(PARAMS, cues.blocks, 1, cues)
    assert cues.blocks[0][1][0][1].startswith("Copyright")  # the body's own line, first in the walk
    ballot.scores = np.asarray([0.0001] + [0.9] * (len(cues.blocks) - 1))
    assert not any(decide_blocks(ballot, PARAMS).template)
    # Without that guard the model decides: the contents go, the copyright line stays.
    off = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, cold_min_kept=0))
    assert decide_blocks(ballot, off).template == [False] + [True] * (len(cues.blocks) - 1)


def test_outside_the_region_new_prose_as_content_like_as_the_regions_text_stays() -> None:
    # A narrow region (one section of a documentation page) and, beside it, another section
    # of new prose and a new link list; the model scores both 0.3, over outer_threshold.
    body = (
        "<section class='a'><p>" + "The first section explains the API at length. " * 8
        + "</p></section><section class='b'><p>" + "The second section says more of its own. " * 4
        + "</p></section><ul><li><a href='/x'>Another page</a> <a href='/y'>And one more</a></li></ul>"
    )
    # The region is the first block's element: the first section alone; all text new to the host.
    ballot, texts = _region_ballot(body, [0.1, 0.3, 0.3])
    assert texts[1].startswith("The second section") and texts[2].startswith("Another page")
    # The region's own text scores 0.1: the second section (0.3) is within 10 times that.
    assert decide_blocks(ballot, PARAMS).template == [False, False, True]  # the link list still goes
    # A news page: the region's text scores 0.001, so the same 0.3 is far above it.
    ballot.scores = np.asarray([0.001, 0.3, 0.3])
    assert decide_blocks(ballot, PARAMS).template == [False, True, True]
    # Text the host has seen before is not protected.
    ballot.scores = np.asarray([0.1, 0.3, 0.3])
    ballot.novel = [ballot.novel[0], 0, ballot.novel[2]]
    assert decide_blocks(ballot, PARAMS).template == [False, True, True]


COMMENTS = (
    "<div class='comments-area'><h3>3 thoughts on this</h3><ol class='commentlist'>"
    "<li class='comment'><p>I tried this on my own machine and it worked well, thanks for the write-up.</p></li>"
    "<li class='comment'><p>Does the second step still apply to the newer release of the library?</p></li>"
    "<li class='comment'><p>Great article, I shared it with my whole team this morning.</p></li></ol></div>"
)


RELATED = (  # other stories: new ones on every page
    "<div class='related-posts'><h3>More on this topic</h3><p>Why the {a} changed its course last spring "
    "and what the village of {b} did about it.</p></div>"
)


GALLERY = (  # a slideshow of photos beside the article: each caption prose, new on every page
    "<div class='{cls}'><ul>"
    "<li><img src='/a.jpg'><p>1/3 Villagers of {a} carry sandbags to the river bank before the storm arrives.</p></li>"
    "<li><img src='/b.jpg'><p>2/3 The old bridge at {b} under water on the second morning of the floods.</p></li>"
    "<li><img src='/c.jpg'><p>3/3 Volunteers hand out blankets in the school hall, which became a shelter.</p></li>"
    "</ul></div>"
)


def _article(i: int) -> str:
    return " ".join(f"Paragraph {i} sentence {k} explains the topic of this page in plain words." for k in range(12))


@pytest.mark.parametrize(
    "gallery", ["story-gallery", "slider slider-module", "author-bio", "about-the-author", "modal fade"]
)
@pytest.mark.parametrize("params", [PARAMS, NO_MODEL], ids=["model", "no-model"])
def test_comments_and_related_sections_leave_the_text_with_their_roles(params: EngineParams, gallery: str) -> None:
    # Readers' comments, a box of other stories, a gallery's captions and the byline are
    # page-specific text that the page-level model (trained on repetition) and the table take
    # for content: the markup names them.
    table = HostTable(params.table)
    for i in range(3):  # a cold page, then warm ones
        html = f"<html><body>{NAV}<article class='post has-comments'><h1>Post {i}</h1>" \
               f"<div class='article-byline'>By Ann {WORDS[i + 6]}, staff writer, March {i + 2}, 2017</div>" \
               f"<p>{_article(i)}</p>" \
               f"{GALLERY.format(cls=gallery, a=WORDS[i + 3], b=WORDS[-i - 4])}" \
               f"</article>{RELATED.format(a=WORDS[i], b=WORDS[-i - 1])}{COMMENTS.replace('this', f'post {i}')}" \
               f"{FOOTER}</body></html>"
        out = decide(RawPage(f"https://blog.example/p{i}", html, "blog.example"), table, params)
        assert out.clean is not None
        assert f"Paragraph {i} sentence 11" in out.clean.text  # the article whose class says it has comments stays
        assert "shared it with my whole team" not in out.clean.text
        roles = {(b.verdict, b.role) for b in out.clean.blocks if "Great article" in b.text}
        assert roles == {(TEMPLATE, ROLE_COMMENTS)}
        roles = {(b.verdict, b.role) for b in out.clean.blocks if "what the village" in b.text}
        assert roles == {(TEMPLATE, ROLE_RELATED)}
        roles = {(b.verdict, b.role) for b in out.clean.blocks if "/3 " in b.text or "staff writer" in b.text}
        assert roles == {(TEMPLATE, ROLE_OTHER)}
        roles = {(b.verdict, b.role) for b in out.clean.blocks if f"Paragraph {i} sentence 11" in b.text}
        assert roles == {(CONTENT, ROLE_MAIN)}


def test_comment_words_that_name_no_comments_section_set_nothing_aside() -> None:
    # A documentation comment ("tsd-comment"), sections whose id is their heading's words, a
    # "read more" admonition, a class that holds "modal" inside a word, a page wrapper whose
    # class says the site uses comments and an element whose class names a gallery (both hold
    # the main text).
    doc = (
        "<html><body class='use-disqus'><main><section id='comments'><h2>Comments</h2>"
        "<p>A comment in code starts with a hash sign and runs to the end of the line.</p></section>"
        f"<div class='tsd-comment'><p>Reads a block of words from a register, one at a time.</p></div>"
        "<section id='recommending'><p>Recommending items to a user takes a trained pipeline.</p></section>"
        "<div class='readmore admonition'><p>See also the chapter on waves for the same idea.</p></div>"
        "<div class='multimodal-models'><p>A multimodal model reads text and images together.</p></div>"
        f"<div class='gallery-page'><p>{_article(0)}</p></div></main></body></html>"
    )
    out = decide(RawPage("https://docs.example/a", doc, "docs.example"), HostTable(NO_MODEL.table), NO_MODEL)
    assert out.clean is not None
    assert all(b.verdict == CONTENT and b.role == ROLE_MAIN for b in out.clean.blocks)


POLL = (  # a reader poll inside the article's element: the story's own question, prose-like options
    "<form action='/vote'><p>Should the village of {a} rebuild the old bridge before the winter comes?</p>"
    "<label><input type='radio'> Yes, the bridge at {b} is the only way to the school.</label>"
    "<label><input type='radio'> No, the money is better spent on the river bank.</label>"
    "<p>By voting you agree to our terms of use and our policy.</p><button>Vote</button></form>"
)


@pytest.mark.parametrize("params", [PARAMS, NO_MODEL], ids=["model", "no-model"])
def test_a_form_beside_the_main_text_leaves_the_text_and_a_form_around_it_does_not(params: EngineParams) -> None:
    # A poll's question and options (page-specific, so the table never removes them) are
    # controls, not text to read; the same blocks in a form that wraps the whole page
    # (ASP.NET's) are the page's.
    for wrap in (False, True):
        table = HostTable(params.table)
        for i in range(3):  # a cold page, then warm ones
            poll = POLL.format(a=WORDS[i + 3], b=WORDS[-i - 4])
            body = f"{NAV}<main><h1>Post {i}</h1><p>{_article(i)}</p>{poll}</main>{FOOTER}"
            if wrap:
                inner = body.replace("<form", "<div").replace("</form>", "</div>")
                body = f"<form id='aspnetForm' action='/p{i}'>{inner}</form>"
            html = f"<html><body>{body}</body></html>"
            out = decide(RawPage(f"https://news.example/p{i}", html, "news.example"), table, params)
            assert out.clean is not None
            assert f"Paragraph {i} sentence 11" in out.clean.text
            poll_blocks = [b for b in out.clean.blocks if "the old bridge" in b.text or "the bridge at" in b.text]
            roles = {(b.verdict, b.role) for b in poll_blocks}
            if wrap:  # the form holds the main text: whatever else decides these blocks, not the form
                assert roles and all(role != ROLE_OTHER for _, role in roles), roles
            else:
                assert roles == {(TEMPLATE, ROLE_OTHER)}, roles


@pytest.mark.parametrize("params", [PARAMS, NO_MODEL], ids=["model", "no-model"])
def test_a_form_that_holds_most_of_the_text_keeps_it_whichever_block_is_longest(params: EngineParams) -> None:
    # The page's form holds the article, cut into short paragraphs; a long legal notice
    # outside it is the block with the most plain text. The form is no sign-up box beside the
    # main text: its blocks keep their verdicts.
    line = "tells one short part of the story in plain words."
    article = "".join(f"<div><p>Paragraph {k} {line}</p></div>" for k in range(12))
    notice = " ".join(f"Notice sentence {k} of the publisher's long legal terms for every reader." for k in range(6))
    html = (f"<html><body><form id='aspnetForm' action='/story'>{NAV}<h1>The story</h1>{article}</form>"
            f"<div class='legal'><p>{notice}</p></div></body></html>")
    out = decide(RawPage("https://news.example/story", html, "news.example"), HostTable(params.table), params)
    assert out.clean is not None
    story = [b for b in out.clean.blocks if b.text.startswith("Paragraph ")]
    assert len(story) == 12 and all(b.role != ROLE_OTHER for b in story), [(b.verdict, b.role) for b in story]
    if params is NO_MODEL:
        assert all(f"Paragraph {k} tells" in out.clean.text for k in range(12))


def _shop_kept(style: str, params: EngineParams, n: int = 120) -> tuple[float, list[str]]:
    """The share of the product values kept on a generated shop's pages after its 60th, and
    the kept text of its last page."""
    shop = make_shop(f"{style}.shop.example", n, seed=3, style=style)
    table = HostTable(params.table)
    kept = total = 0
    texts = []
    for k, sp in enumerate(shop):
        out = decide(sp.page, table, params)
        assert out.clean is not None
        text = norm(out.clean.text)
        texts.append(text)
        if k >= 60:
            total += len(sp.values)
            kept += sum(v in text for v in sp.values)
    return kept / total, texts


@pytest.mark.parametrize("style", SHOP_STYLES)
def test_a_products_fields_beside_its_description_are_content(style: str) -> None:
    # The description holds most of a product page's new text, so it is the page's content
    # region; the title, author, price and attribute values sit beside it, and the values
    # recur across products (a format on 60% of them, a language on 80%). They are content
    # slots of the host: kept, while the shop's layout around them goes.
    share, texts = _shop_kept(style, PARAMS)
    assert share >= 0.98
    last = texts[-1]
    for template in ("Copyright 2024 Bookshop Ltd.", "Customers also bought", "Home Books", "Able Acid"):
        assert template not in last
    if style in ("table", "deep", "box"):  # a table's labels and values are blocks of their own
        assert "Publisher" not in last
        # The delivery time, the same on every product, is the slot's constant text: the shop's.
        assert "2 to 3 working days" not in last
    if style == "box":
        # The buy box's text is mostly the shop's (the button, the delivery notice), but the
        # title in it is new to the host on every page: the box is kept, notice and all.
        assert "Usually dispatched within two working days." in last
    # Without the slots the table's repetition and the model remove most recurring values
    # (and without the region's widening over a container split between page types, which
    # keeps the list style's values too: its description's element held the host's regions
    # on 81-90% of its pages, under `region.wide_share`, and the region widens to the product).
    off = dataclasses.replace(PARAMS, region=dataclasses.replace(PARAMS.region, slot_constant=0.0, wide_share=0.0))
    assert _shop_kept(style, off)[0] < share - 0.1


def _last_ballot(pages: list[RawPage]) -> Ballot:
    """The ballot of the last of one host's pages, decided in turn with the default params."""
    table = HostTable(PARAMS.table)
    ballot = None
    for p in pages:
        _, ballot = decide_with_ballot(p, table, PARAMS)
    assert ballot is not None
    return ballot


def test_a_region_among_sections_of_one_kind_widens_to_the_element_around_them() -> None:
    # A class page of three member groups with one class and tag (TypeDoc's member groups):
    # the page's new text is in a different group from page to page. One key for all three
    # would have enclosed the regions on every page and held the region to one group; told
    # apart by their place, each group encloses a third of them, and the region widens to main.
    def member_page(i: int) -> RawPage:
        rng = random.Random(i)
        groups = []
        for g in range(3):
            body = (f"<p>{sentence(rng, 18)}</p><p>{sentence(rng, 18)}</p>" if i % 3 == g
                    else f"<p>Shared member {g}: returns the value it was given, unchanged and checked.</p>")
            groups.append(f"<section class='group'><h2>Group {g}</h2>{body}</section>")
        html = (f"<html><body><header>{NAV}</header><main><h1>Class number {i}</h1>{''.join(groups)}</main>"
                f"{FOOTER}</body></html>")
        return RawPage(f"https://api.example/c{i}.html", html, "api.example")

    ballot = _last_ballot([member_page(i) for i in range(30)])
    assert ballot.cues is not None and ballot.region is not None
    chain, shares = ballot.region
    assert ballot.cues.tag[chain[0]] == "section" and shares[0] < PARAMS.region.container_share
    first, _end = region_nodes(ballot, PARAMS.region.container_share)
    assert ballot.cues.tag[first] == "main"


def _class_page(i: int, summary: str = "summary", linked: bool = False) -> RawPage:
    """A class page of an API reference (Javadoc's shape): the class's description, a summary
    table of its methods (their types, names and one-line descriptions) and the methods'
    details, in one container. Three pages in five say most of their new text in the
    details, the others in the description; the method names and types recur across classes."""
    rng = random.Random(i)
    methods = rng.sample(["getActive", "getBudget", "getUser", "getRate", "getName", "getId", "isOpen", "size"], 3)
    long_details = i % 5 < 3
    about = f"<p>{sentence(rng, 5)}</p>" if long_details else f"<p>{sentence(rng, 30)}</p><p>{sentence(rng, 30)}</p>"
    rows = ""
    for m in methods:
        line = f"<a href='/{m}.html'>{sentence(rng, 7)}</a>" if linked else sentence(rng, 7)
        rows += (f"<tr><td>{rng.choice(['Boolean', 'Double', 'String'])}</td><td><a href='#{m}'>{m}()</a></td>"
                 f"<td>{line}</td></tr>")
    details = "".join(
        f"<div class='method'><h4>{m}</h4><p>{sentence(rng, 30 if long_details else 6)}</p></div>" for m in methods
    )
    html = (
        f"<html><body><header>{NAV}</header><div class='contentContainer'>"
        f"<div class='description'><h2>Interface Widget{i}</h2>{about}</div>"
        f"<div class='{summary}'><h3>Method Summary</h3><table>{rows}</table></div>"
        f"<div class='details'><h3>Method Detail</h3>{details}</div></div>{FOOTER}</body></html>"
    )
    return RawPage(f"https://api.example/Widget{i}.html", html, "api.example")


def test_a_region_in_one_part_of_a_container_split_between_page_types_widens_to_the_container() -> None:
    # Where the host's pages put their regions in two parts of one container (the method
    # details on most class pages, the description on others), the deepest element that
    # enclosed them on most pages is one part; the method summary beside it, whose names
    # and types recur from class to class, lay outside the region and went for its
    # repetition. Nothing in the container beside the region names template or navigation,
    # and most of its text is not in links: the region is the whole container.
    pages = [_class_page(i) for i in range(28)]
    ballot = _last_ballot(pages)
    assert ballot.cues is not None and ballot.region is not None
    chain, shares = ballot.region
    (details, *_), (share, *_) = chain, shares
    assert ballot.cues.tag[details] == "div" and PARAMS.region.container_share <= share < PARAMS.region.wide_share
    first, _end = region_nodes(ballot, PARAMS.region.container_share, PARAMS.region.wide_share)
    assert first != details and first in chain and ballot.cues.tag[first] == "div"
    assert region_nodes(ballot, PARAMS.region.container_share)[0] == details  # wide_share 0: off

    last = verdicts(run(pages, PARAMS)[-1])
    off_params = dataclasses.replace(PARAMS, region=dataclasses.replace(PARAMS.region, wide_share=0.0))
    off = verdicts(run(pages, off_params)[-1])
    rows = [t for t in last if "()" in t]
    assert len(rows) == 3
    assert all(last[t][0] == CONTENT for t in rows)
    assert any(off[t][0] == TEMPLATE for t in rows)  # what the split container cost
    assert last["Home"][0] == TEMPLATE and off["Home"][0] == TEMPLATE  # the site's layout either way


@pytest.mark.parametrize("summary, linked", [("sidebar", False), ("summary", True)])
def test_a_container_split_between_page_types_is_not_widened_over_a_named_box_or_a_link_list(
    summary: str, linked: bool
) -> None:
    # The same pages with the summary in a box whose class names template (a sidebar), or
    # with its lines links to other pages (most of its text in links: other stories): the
    # region stays in its part of the container.
    ballot = _last_ballot([_class_page(i, summary, linked) for i in range(28)])
    assert ballot.cues is not None and ballot.region is not None
    (details, *_), (share, *_) = ballot.region
    assert share < PARAMS.region.wide_share
    assert region_nodes(ballot, PARAMS.region.container_share, PARAMS.region.wide_share)[0] == details


def test_a_region_in_a_template_named_element_widens_past_it() -> None:
    # An API's member pages (a Haxe documentation generator's shape): the class name and a
    # line of description are the page's only new text, in `div.page-header`, which the
    # host's regions were on most pages; the members below vary from class to class. A
    # header is no content container: the region widens to the element that encloses the
    # header and the members, which the host's regions were in as well.
    pool = [f"method{k} (value:Int):Void" for k in range(40)]

    def member_page(i: int) -> RawPage:
        rng = random.Random(i)
        members = "".join(f"<div class='member'>{m}</div>" for m in rng.sample(pool, 3))
        html = (f"<html><body><header>{NAV}</header><div class='main-col'><div class='page-header'><h1>class "
                f"Widget{i} extends Base</h1><p>{sentence(rng, 6)}</p></div><div class='members'>{members}</div>"
                f"</div>{FOOTER}</body></html>")
        return RawPage(f"https://api.example/w{i}.html", html, "api.example")

    ballot = _last_ballot([member_page(i) for i in range(30)])
    assert ballot.cues is not None and ballot.region is not None
    (header, column, *_), (share, *_) = ballot.region
    assert ballot.cues.flags[header] & F_THINT and share >= PARAMS.region.container_share
    assert not ballot.cues.flags[column] & F_THINT
    assert region_nodes(ballot, PARAMS.region.container_share)[0] == column


def test_a_heading_with_linked_names_beside_the_region_is_content() -> None:
    # An API page (rustdoc's shape): its definition (the region) and beside it the heading that
    # names the item, whose path's names are links (most of the line in links: short names,
    # not titles of other pages), and a line of other pages' titles. The model reads both
    # lines as related links; the heading is the page's own, the titles are a link list.
    rng = random.Random(12)

    def member(i: int) -> RawPage:
        heading = (f"<h1>Constant <a href='/i.html'>mylib</a>::<a href='/c/i.html'>consts</a>::"
                   f"<a href='#'>LIMIT_{i}</a> <a href='/src/{i}'>[src]</a></h1>")
        also = "".join(f"<a href='/p{j}'>{sentence(rng, 6)}</a> " for j in range(2))
        html = (f"<html><body><header>{NAV}</header><main><div class='member'>{heading}"
                f"<div class='line'>See {also}</div><div class='text'><pre>pub const LIMIT_{i}: u32 = {7 * i};"
                f"</pre></div></div></main>{FOOTER}</body></html>")
        return RawPage(f"https://api.example/m{i}.html", html, "api.example")

    pages = [member(i) for i in range(20)]
    last = verdicts(run(pages, PARAMS)[-1])
    assert last["Constant mylib::consts::LIMIT_19 [src]"][0] == CONTENT
    assert last["pub const LIMIT_19: u32 = 133;"][0] == CONTENT
    assert all(v[0] == TEMPLATE for t, v in last.items() if t.startswith("See "))
    # Every such line a link list (the rule before): the heading leaves the text.
    every = dataclasses.replace(PARAMS, region=dataclasses.replace(PARAMS.region, slot_link_chars=0.0))
    assert verdicts(run(pages, every)[-1])["Constant mylib::consts::LIMIT_19 [src]"][0] == TEMPLATE


def test_a_link_list_and_a_labelled_notice_beside_the_region_stay_template() -> None:
    # Beside an article's text (the region), in the same element: its title (new on every
    # page), a list of links to other stories (new titles every page), and a notice whose
    # text is the same on every page, at a path that has new text on every page.
    rng = random.Random(11)

    def story(i: int) -> RawPage:
        others = "".join(f"<li><a href='/s{j}'>{sentence(rng, 5)}</a></li>" for j in range(3))
        paras = "".join(f"<p>{sentence(random.Random(300 + i))}</p>" for _ in range(5))
        html = (f"<html><body><header>{NAV}</header><main><div class='story'><div class='line'>Story number {i}</div>"
                f"<div class='line'>Corrections are welcome by mail</div><ul class='more'>{others}</ul>"
                f"<div class='text'>{paras}</div></div></main>{FOOTER}</body></html>")
        return RawPage(f"https://news.example/s{i}.html", html, "news.example")

    outs = run([story(i) for i in range(20)], PARAMS)
    last = verdicts(outs[-1])
    assert last["Story number 19"][0] == CONTENT
    assert last["Corrections are welcome by mail"][0] == TEMPLATE
    assert all(v[0] == TEMPLATE for t, v in last.items() if t.endswith(".") and len(t.split()) == 5)


def _first_page_ballot(html: str, link_score: float = 0.9) -> Ballot:
    """A host's first page whose model scores every link block `link_score`, the rest 0."""
    cues = walk(parse(html, PARAMS.segment), PARAMS.segment)
    ballot = Ballot(PARAMS, cues.blocks, 1, cues)
    ballot.scores = np.array([link_score if 2 * cues.achars[n] >= cues.chars[n] else 0.0 for n in cues.node_of_block])
    return ballot


def _home_page(intro: str, items: int) -> str:
    toc = "".join(f"<li><a href='/p{i}.html'>Chapter number {i} of the guide</a><ul><li><a href='/p{i}a.html'>"
                  f"Its first section</a></li></ul></li>" for i in range(items))
    return (f"<html><body><nav><a href='/'>Home</a> <a href='/about'>About</a></nav><div class='body'><section>"
            f"<h1>Welcome</h1><p>{intro}</p><div class='toctree'><ul>{toc}</ul></div></section></div></body></html>")


def test_a_first_page_whose_main_element_is_mostly_links_keeps_it_whole() -> None:
    # A documentation home page: an introduction, then the site's table of contents inside
    # the same element. The model alone would take the lists for navigation.
    intro = ("Welcome to the user documentation of the project. It explains how to install it, how to run it "
             "from the command line and from a program, and how each of its parts works, with worked examples of each.")
    ballot = _first_page_ballot(_home_page(intro, 8))
    decided = decide_blocks(ballot, PARAMS)
    texts = [ballot.cues.text[n] for n in ballot.cues.node_of_block]
    kept = {t for t, template in zip(texts, decided.template, strict=True) if not template}
    assert "Home About" not in kept  # outside the main element: the model's verdict stands
    assert any(t.startswith("Welcome") for t in kept)
    assert {"Chapter number 3 of the guide", "Its first section"} <= kept
    assert set(decided.method) == {"pagelevel"}
    # The guard's share is the later pages' (`max_removed_share`): at 1.0 nothing is kept for it.
    never = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, max_removed_share=1.0))
    decided = decide_blocks(ballot, never)
    assert not any(t for t, template in zip(texts, decided.template, strict=True)
                   if not template and t.startswith("Chapter"))


def test_a_first_page_whose_main_element_is_mostly_text_keeps_the_models_removals() -> None:
    # An article with a short list of links inside its element: the list is a small part of
    # the element's text, so the model's verdict on it stands.
    rng = random.Random(3)
    article = " ".join(sentence(rng) for _ in range(12))
    ballot = _first_page_ballot(_home_page(article, 2))
    decided = decide_blocks(ballot, PARAMS)
    texts = [ballot.cues.text[n] for n in ballot.cues.node_of_block]
    removed = {t for t, template in zip(texts, decided.template, strict=True) if template}
    assert {"Home About", "Chapter number 1 of the guide", "Its first section"} <= removed
    assert not any(t.startswith("Welcome") for t in removed)


def _book_page(i: int, body: str) -> RawPage:
    side = "".join(f"<li><a href='/ch{k}.html'>Chapter {k}: {WORDS[k]} and {WORDS[k + 1]}</a></li>" for k in range(8))
    html = (f"<html><body><div class='sidebar'><ul>{side}</ul></div><div class='page'>"
            f"<div class='menu-bar'><h1 class='menu-title'>The Example Cookbook</h1></div>"
            f"<main>{body}</main></div></body></html>")
    return RawPage(f"https://book.example/p{i}.html", html, "book.example")


def test_a_later_page_whose_new_text_is_nearly_all_links_keeps_them() -> None:
    # A young host's third page is an index: a heading that is an anchor link, then a table
    # of links to the recipes under a header row. Its new text outside links is the header
    # row, so that is its content region, and the model, outside it, removes the links: the
    # page's content. Past `max_new_removed_share` of the page's new text the model's
    # removals of it are undone; the sidebar the table learned stays template.
    rng = random.Random(7)
    prose = [_book_page(i, "<h1>Recipe " + str(i) + "</h1>" + "".join(f"<p>{sentence(rng, 20)}</p>"
                                                                          for _ in range(4))) for i in range(2)]
    rows = "".join(
        f"<tr><td><a href='/r{k}.html'>Generate {WORDS[k]} values with a {WORDS[k + 2]} {WORDS[k + 3]}</a></td>"
        f"<td><a href='/crate{k}'>{WORDS[k + 1]}-crate</a></td><td><a href='/cat{k}'>{WORDS[k + 4]}</a></td></tr>"
        for k in range(9)
    )
    index = _book_page(2, "<h1><a class='header' href='#algorithms'>Algorithms</a></h1><table><thead><tr>"
                          f"<th>Recipe</th><th>Crates</th><th>Categories</th></tr></thead><tbody>{rows}</tbody></table>")
    pages = [*prose, index]
    recipes = [f"Generate {WORDS[k]} values with a {WORDS[k + 2]} {WORDS[k + 3]}" for k in range(9)]

    off = dataclasses.replace(PARAMS, pagelevel=dataclasses.replace(PARAMS.pagelevel, max_new_removed_share=1.0))
    without = verdicts(run(pages, off)[-1])
    assert sum(without[r][0] == TEMPLATE for r in recipes) >= 7  # the case: the model removes the index

    last = run(pages, PARAMS)[-1]
    kept = verdicts(last)
    assert all(kept[r][0] == CONTENT for r in recipes)
    assert kept["Chapter 0: alpha and beta"][0] == TEMPLATE  # the table's verdict on the sidebar stands
    assert last.clean is not None and all(r in last.clean.text for r in recipes)


def _headline_page(i: int, headline: str) -> RawPage:
    """A news article with its headline in a header block beside the byline, a breadcrumb
    that repeats the headline, and the title naming it."""
    rng = random.Random(i)
    body = "".join(f"<p>{sentence(rng, 22)}</p>" for _ in range(6))
    html = (
        f"<html><head><title>{headline} | The Daily Example</title></head><body><header>{NAV}</header>"
        f"<ul class='breadcrumb'><li><a href='/'>Home</a></li><li>{headline}</li></ul>"
        f"<div class='wrap'><div class='article-header'><h1>{headline}</h1><span>By Ann Lee</span></div>"
        f"<div class='article-body'>{body}</div></div>{FOOTER}</body></html>"
    )
    return RawPage(f"https://news.example/{i}.html", html, "news.example")


HEADLINES = (
    "Council approves the new river bridge",
    "Storm closes schools across the county",
    "Local team wins the regional final",
    "Museum reopens after a long restoration",
)


@pytest.mark.parametrize("i", range(len(HEADLINES)))
def test_the_headline_the_title_names_is_kept_from_the_model(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A host's first page: the model alone decides, and it scores the short header block
    # above the article (a template word in its class, few words) as the site's. The title
    # names the headline, so the block that holds it stays; the breadcrumb's entry that
    # repeats it is a list item, and the navigation and footer stay template.
    headline = HEADLINES[i]
    out = decide(_headline_page(i, headline), HostTable(PARAMS.table), PARAMS)
    assert out.clean is not None
    blocks = [b for b in out.clean.blocks if headline in b.text]
    assert [b.verdict for b in blocks] == [TEMPLATE, CONTENT]  # the breadcrumb's entry, the header block
    assert blocks[1].text.startswith(headline) and headline in out.clean.text
    assert "All rights reserved" not in out.clean.text
    # Without the rule the model removes the headline: the test above can fail.
    monkeypatch.setattr(decision_module, "keep_headline", lambda *args: None)
    off = decide(_headline_page(i, headline), HostTable(PARAMS.table), PARAMS)
    assert off.clean is not None and headline not in off.clean.text


def _article_with_boxes(i: int) -> RawPage:
    """A news article whose element holds, beside its byline and paragraphs, the site's
    share bar and an advertisement label, every page the same; all share one tag path."""
    rng = random.Random(i)
    paras = [f"<div class='para'>{sentence(rng, 24)} {sentence(rng, 18)}</div>" for _ in range(5)]
    html = (
        f"<html><head><title>Story {i} | The Courier</title></head><body><header>{NAV}</header><main><article>"
        f"<div class='byline'>By Ann Lee, {i % 28 + 1} March</div>{paras[0]}{paras[1]}"
        "<div class='ad-slot'>Advertisement</div>"
        f"{''.join(paras[2:])}<div class='share'>Share this article: Facebook Twitter Email</div>"
        f"</article></main>{FOOTER}</body></html>"
    )
    return RawPage(f"https://courier.example/story/{i}.html", html, "courier.example")


def test_the_sites_named_boxes_inside_the_article_are_template(monkeypatch: pytest.MonkeyPatch) -> None:
    # Inside the region repetition counts at the host's layout paths only, and the share bar
    # and the advertisement label share the path of the article's paragraphs (div under
    # article), which carry new text on every page. Their class names them and their text is
    # on every page: the site's, not the story's. The paragraphs, whose path is the same,
    # stay.
    pages = [_article_with_boxes(i) for i in range(30)]

    def last_text() -> str:
        table = HostTable(PARAMS.table)
        out = None
        for p in pages:
            out = decide(p, table, PARAMS)
        assert out is not None and out.clean is not None
        return out.clean.text

    text = last_text()
    assert "Share this article" not in text and "Advertisement" not in text
    rng = random.Random(29)
    assert sentence(rng, 24) in text  # the story's first paragraph
    # Without the rule the table's repetition off the layout paths stands unheard.
    monkeypatch.setattr(decision_module, "named_constants", lambda *args: None)
    off = last_text()
    assert "Share this article" in off and "Advertisement" in off


HEADLINES = [f"{w.capitalize()} {v} and the {u} of the week" for w in WORDS for v in WORDS[:6] for u in WORDS[-4:]]


def _magazine_page(i: int, blog: bool) -> RawPage:
    """A magazine's page: a review (its text in `div.review`) or, on a page of another type, a
    blog post (in `div.post`), in the column `div.column` beside a box of the site's latest
    headlines, each a link, new on every page."""
    rng = random.Random(i)
    latest = "".join(f"<li><a href='/s/{i}/{k}'>{h}</a></li>" for k, h in enumerate(rng.sample(HEADLINES, 30)))
    paras = "".join(f"<p>{sentence(rng, 30)}</p>" for _ in range(6))
    own = (f"<div class='post'><h1>Post {i}</h1>{paras}</div>" if blog
           else f"<div class='review'><h1>Review {i}</h1>{paras}</div>")
    html = (f"<html><body><header>{NAV}</header><div class='column'>{own}"
            f"<div class='latest'><h3>Latest</h3><ul>{latest}</ul></div></div>{FOOTER}</body></html>")
    return RawPage(f"https://magazine.example/{'blog' if blog else 'review'}/{i}.html", html, "magazine.example")


def test_a_page_of_a_type_new_to_its_host_does_not_widen_over_a_column_of_links() -> None:
    # A magazine's reviews, then its first blog post. The post's text is where the host's
    # earlier pages had none, so its element enclosed none of their regions, and the region
    # widened to the column that holds the host's regions, with the box of the site's latest
    # headlines beside the post: links the model reads as template, new on every page, which
    # inside the region stayed. The region is the post's part of the column now.
    pages = [_magazine_page(i, blog=False) for i in range(8)] + [_magazine_page(8, blog=True)]
    last = verdicts(decide_all(pages, PARAMS))
    off_params = dataclasses.replace(PARAMS, region=dataclasses.replace(PARAMS.region, link_column_score=2.0))
    off = verdicts(decide_all(pages, off_params))
    headlines = [t for t in last if t in HEADLINES]
    assert len(headlines) == 30
    assert all(off[t][0] == CONTENT for t in headlines)  # what the widening kept
    assert all(last[t][0] == TEMPLATE for t in headlines)
    post = [t for t in last if t.startswith("Post 8 ")]
    assert len(post) == 1 and last[post[0]][0] == CONTENT  # the post's own text stays


def test_an_index_keeps_the_column_of_links_beside_its_little_text() -> None:
    # The same host's index page of posts: a line of its own beside the column of links, which
    # is its content. The region widens over it as before (under `link_column_plain` of plain text).
    pages = [_magazine_page(i, blog=False) for i in range(8)]
    rng = random.Random(99)
    latest = "".join(f"<li><a href='/s/99/{k}'>{h}</a></li>" for k, h in enumerate(rng.sample(HEADLINES, 30)))
    html = (f"<html><body><header>{NAV}</header><div class='column'><div class='post'>"
            f"<h1>All posts</h1><p>Every post of the month.</p></div>"
            f"<div class='latest'><h3>Latest</h3><ul>{latest}</ul></div></div>{FOOTER}</body></html>")
    pages.append(RawPage("https://magazine.example/blog/index.html", html, "magazine.example"))
    last = verdicts(decide_all(pages, PARAMS))
    off_params = dataclasses.replace(PARAMS, region=dataclasses.replace(PARAMS.region, link_column_score=2.0))
    off = verdicts(decide_all(pages, off_params))
    headlines = [t for t in last if t in HEADLINES]
    assert len(headlines) == 30
    assert [last[t][0] for t in headlines] == [off[t][0] for t in headlines]


def decide_all(pages: list[RawPage], params: EngineParams) -> Outcome:
    """The last of one host's pages, decided in turn."""
    return run(pages, params)[-1]
