"""Hostile pages: whatever comes in ends as a clean page or a dead letter with a reason.

Property tests feed the one decision function (detemplate.engine.pipeline.decide) malformed HTML,
random text and bytes decoded every which way, NUL bytes and control characters; the
table tests build pathological shapes (deep nesting, huge sibling lists, huge
attributes) and check that the configured limits turn them into dead letters.
"""

from __future__ import annotations

import re
import string

import pytest
from detemplate.engine.errors import BadInputError
from detemplate.engine.model import RawPage
from detemplate.engine.page import guards
from detemplate.engine.page.guards import nesting_estimate
from detemplate.engine.params import EngineParams, SegmentParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.io.codec import encode_clean, encode_dead
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

PARAMS = EngineParams()
WORD = re.compile(r"\w+")
REASONS = {"empty", "not_html", "too_large", "too_deep", "too_many_nodes"}

TAGS = ["div", "p", "a", "span", "ul", "li", "table", "tr", "td", "script", "style", "b", "nav", "footer", "br"]


def _decide(html: str, params: EngineParams = PARAMS) -> tuple[str, str]:
    """Decide a page on a fresh table; return ('clean', '') or ('dead', reason), checking invariants."""
    table = HostTable(params.table)
    before = table.to_bytes()
    outcome = decide(RawPage("https://h.example/p", html, "h.example"), table, params)
    if outcome.dead is not None:
        assert outcome.clean is None
        assert outcome.dead.reason in REASONS, outcome.dead.reason
        assert outcome.dead.detail
        assert table.to_bytes() == before, "a dead page must leave the table as it was"
        encode_dead(outcome.dead)
        return "dead", outcome.dead.reason
    clean = outcome.clean
    assert clean is not None
    assert clean.page_no == 1
    for block in clean.blocks:
        assert block.chars > 0
        assert 0.0 <= block.ratio <= 1.0
    # Every kept word comes from the page's text: nothing is invented. (A segment joins
    # the text of inline elements as a browser renders it, so a word is a piece of the
    # page's visible text with its white space and hidden elements taken out.)
    tree = LexborHTMLParser(html)
    visible = ""
    if tree.root is not None:
        hidden = [n for n in tree.root.traverse(include_text=False) if n.tag in PARAMS.segment.skip_tags]
        for node in reversed(hidden):  # the innermost first: an outer node frees its subtree
            if node is not tree.root:
                node.decompose()
        visible = "".join(tree.root.text(separator="").split())
    assert all(word in visible for word in WORD.findall(clean.text))
    encode_clean(clean)
    return "clean", ""


markup = st.recursive(
    st.text(alphabet=string.ascii_letters + " <>&;/=\"'\n\t\x00é中", max_size=40),
    lambda inner: st.builds(
        lambda tag, attrs, body, close: f"<{tag}{attrs}>{body}" + (f"</{tag}>" if close else ""),
        st.sampled_from(TAGS),
        st.sampled_from(["", ' class="x y"', " id=z", ' href="/a"', " class=", " =<"]),
        st.lists(inner, max_size=5).map("".join),
        st.booleans(),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markup)
def test_malformed_markup_is_decided_or_dead_lettered(html: str) -> None:
    _decide("<html><body>" + html)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_arbitrary_text_is_decided_or_dead_lettered(text: str) -> None:
    _decide(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.sampled_from(["utf-8", "latin-1", "cp1252", "utf-16", "shift_jis"]))
def test_random_bytes_in_any_charset_are_decided_or_dead_lettered(data: bytes, charset: str) -> None:
    _decide(data.decode(charset, errors="replace"))


def test_the_same_page_twice_gives_the_same_verdicts() -> None:
    html = "<html><body><nav><a href=/>Home</a></nav><p>Text with <b>bold</b> words.</p></body></html>"
    first = decide(RawPage("u", html, "h"), HostTable(PARAMS.table), PARAMS)
    second = decide(RawPage("u", html, "h"), HostTable(PARAMS.table), PARAMS)
    assert first.clean is not None and second.clean is not None
    assert encode_clean(first.clean) == encode_clean(second.clean)


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("just words, no markup at all", "not_html"),
        ("\x00" * 100 + "<p>binary</p>", "not_html"),
        ("<html><body>" + "<div>" * 2000 + "deep" + "</div>" * 2000, "too_deep"),
        ("<html><body><ul>" + "<li>item</li>" * 300_000 + "</ul>", "too_many_nodes"),
    ],
)
def test_pathological_pages_are_dead_with_their_reason(html: str, reason: str) -> None:
    assert _decide(html) == ("dead", reason)


def test_absurd_nesting_is_refused_before_the_parser_sees_it() -> None:
    # 100,000 nested <div>s would take lexbor's tree builder tens of seconds.
    html = "<html><body>" + "<div>" * 100_000 + "x" + "</div>" * 100_000
    table = HostTable(PARAMS.table)
    outcome = decide(RawPage("https://h.example/deep", html, "h.example"), table, PARAMS)
    assert outcome.dead is not None
    assert outcome.dead.reason == "too_deep"
    assert "estimated before parsing" in outcome.dead.detail


def test_the_nesting_is_estimated_only_where_it_could_refuse_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate counts opening tags: a page with no more "<" than 10 x max_depth cannot be
    estimated past it, so it is not scanned; one with more is."""
    scanned: list[int] = []
    estimate = guards._nesting
    monkeypatch.setattr(guards, "_nesting", lambda html: scanned.append(len(html)) or estimate(html))
    limit = 10 * PARAMS.segment.max_depth
    assert limit > 2_000  # the shipped depth: pages of 2,000 to 4,000 tags were scanned for nothing
    deep = "<html><body>" + "<div>" * (limit - 2) + "x"  # limit "<" in all, nested limit - 2 deep
    assert deep.count("<") == limit
    guards.check_html(deep, PARAMS.segment)
    assert scanned == []
    deeper = "<html><body>" + "<div>" * (limit + 1) + "x"
    with pytest.raises(BadInputError, match="estimated before parsing"):
        guards.check_html(deeper, PARAMS.segment)
    assert scanned == [len(deeper)]


def test_many_tags_that_do_not_nest_are_not_refused() -> None:
    # 30,000 list items and formatting tags left open: flat to the parser.
    html = "<html><body><ul>" + "<li><b>item" * 30_000 + "</ul></body></html>"
    assert nesting_estimate(html) < 10
    assert _decide(html, EngineParams(segment=SegmentParams(max_nodes=500_000))) == ("clean", "")


def test_a_page_over_the_byte_limit_is_too_large() -> None:
    params = EngineParams(segment=SegmentParams(max_page_bytes=10_000))
    assert _decide("<p>" + "x" * 20_000 + "</p>", params) == ("dead", "too_large")


def test_huge_attributes_and_nul_bytes_do_not_stop_a_page() -> None:
    html = '<html><body><div class="' + "c" * 1_000_000 + '"><p>kept\x00text</p></div></body></html>'
    assert _decide(html) == ("clean", "")


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        ("<html><body><p>" + "x" * 50_000_000, "too_large"),  # 50 MB
        ("<html><body>" + "<br>" * 2_490_000, "too_many_nodes"),  # 2.5 million siblings in 10 MB
        ("<html><body>" + "<i>x</i>" * 1_000_000, "too_many_nodes"),
        ("<html><body>" + "<div>" * 19_000 + "x", "too_deep"),  # deep, with few tags
    ],
)
def test_huge_shapes_are_refused_before_the_parser_builds_a_tree(html: str, reason: str) -> None:
    # Each of these cost lexbor seconds and hundreds of MB to build before the walk's
    # limits refused them (docs/measurements.md "Hostile pages").
    outcome = decide(RawPage("https://h.example/huge", html, "h.example"), HostTable(PARAMS.table), PARAMS)
    assert outcome.dead is not None
    assert outcome.dead.reason == reason
    assert reason == "too_large" or "estimated before parsing" in outcome.dead.detail
