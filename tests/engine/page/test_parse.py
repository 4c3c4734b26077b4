"""The compiled parse (page/_walk.pyx `parse_document`, page/guards.py `parse_page`): the tree
selectolax's parser builds, as the compiled walk and page readers read it, from pooled documents.

Where the extension is not built these tests say so and skip; `make test` builds it.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from detemplate.engine.errors import BadInputError
from detemplate.engine.page import compiled, guards
from detemplate.engine.params import SegmentParams
from detemplate.tools.samples import make_site
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from tests.factories import markup

PARAMS = SegmentParams()
PARSE = guards.document_parser()
MOD = compiled.module()
needs_parse = pytest.mark.skipif(PARSE is None, reason=f"the compiled parse is not in use: {compiled.status()}")


def _read(tree: Any, params: SegmentParams = PARAMS) -> Any:
    """What the engine reads of a tree (guards._read), or the error the walk raised."""
    try:
        return guards._read(MOD, compiled.walker(params.block_tags, params.skip_tags), tree, params)
    except BadInputError as exc:
        return ("error", exc.reason)


def _parsed(parse: Any, html: str, params: SegmentParams) -> Any:
    """What the engine reads of a page parsed by `parse` (html, params), or why the guards refused it."""
    try:
        tree = parse(html, params)
    except BadInputError as exc:
        return ("refused", exc.reason)
    return _read(tree, params)


def _same(html: str, params: SegmentParams = PARAMS) -> None:
    assert PARSE is not None
    assert _read(PARSE(html), params) == _read(LexborHTMLParser(html), params)
    assert _parsed(guards.parse_page, html, params) == _parsed(guards.parse, html, params)


@needs_parse
def test_generated_sites_read_as_selectolax_parses_them() -> None:
    for page in make_site("s.example", 8, seed=3, redesign=4):
        _same(page.page.html)


@needs_parse
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    markup(
        ["div", "p", "a", "span", "ul", "li", "table", "td", "script", "noscript", "head", "title", "body",
         "template", "svg", "math", "select", "option", "x-el", "my-long-custom-element", "base", "meta"],
        st.sampled_from(
            ['<a href="/x">', '<html lang="fr">', '<base href="/b/">',
             '<meta http-equiv="content-language" content="de">']
        ),
        st.text(min_size=0, max_size=12),
        st.sampled_from(["\u00a0", "\u3000", "&nbsp;", "<!-- c -->", "\ud800", "\udfff", "\x00", "\r\n"]),
        st.sampled_from(["The end.", "Für más è", "日本語", "\U0001f600 emoji", "a\x00b"]),
        max_size=60,
    )
)
def test_arbitrary_markup_reads_as_selectolax_parses_it(html: str) -> None:
    # Lone surrogates included: a str that is not ASCII is encoded as selectolax encodes it
    # (errors ignored); an ASCII one is parsed from its own bytes.
    _same(html)


@needs_parse
@pytest.mark.parametrize("html", [
    "<p>" + "x" * 100_000 + "</p>",
    "<div>" * 500 + "too deep" + "</div>" * 500,
    "<p>caf\u00e9</p>" * 2000,
    "plain text, no markup at all",
])
def test_large_and_refused_pages_read_alike(html: str) -> None:
    _same(html)
    _same(html, SegmentParams(max_nodes=1000))


@needs_parse
def test_a_page_kept_while_others_are_parsed_is_unchanged() -> None:
    """A page's document goes back to the pool only when the page is freed: one kept (a held
    first page) while more pages than the pool holds are parsed and freed reads the same."""
    pages = [p.page.html for p in make_site("k.example", 12, seed=5)]
    kept = PARSE(pages[0])
    before = _read(kept)
    for html in pages[1:] * 2:
        assert _read(PARSE(html)) == _read(LexborHTMLParser(html))
    others = [PARSE(html) for html in pages[1:]]  # more alive at once than the pool holds
    assert [_read(t) for t in others] == [_read(LexborHTMLParser(h)) for h in pages[1:]]
    del others
    assert _read(kept) == before == _read(LexborHTMLParser(pages[0]))


# A doctype sets the document's compatibility mode, and a <table> closes an open <p> except in
# quirks mode: the same markup under each kind of doctype (none: quirks).
DOCTYPES = [
    "",
    "<!doctype html>",
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">',
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">',
]


@needs_parse
def test_a_pooled_document_parses_each_doctype_as_a_new_one_does() -> None:
    """A cleaned document kept its last page's compatibility mode, which lexbor sets only from
    a quirky doctype: an HTML5 page after a page without a doctype was parsed in quirks mode
    (its <p> kept the <table>), so a page's tree depended on the page parsed before it."""
    assert MOD is not None and MOD.compat_offset() >= 0
    pages = [f"{doctype}<body><p>text<table><tr><td>cell</td></tr></table><p>after" for doctype in DOCTYPES]
    fresh = [_read(LexborHTMLParser(html)) for html in pages]
    assert fresh[0] != fresh[1]  # the modes give two trees
    for before in pages:
        for html, expected in zip(pages, fresh, strict=True):
            PARSE(before)  # freed at once: its document back in the pool, for the next parse
            assert _read(PARSE(html)) == expected


@needs_parse
def test_the_pipeline_parses_with_it_only_where_the_compiled_walk_reads_the_tree() -> None:
    html = make_site("p.example", 1)[0].page.html
    assert not isinstance(guards.parse_page(html, PARAMS), LexborHTMLParser)
    assert isinstance(guards.parse_page(html, SegmentParams(path_mode="tag_class")), LexborHTMLParser)
    assert isinstance(guards.parse(html, PARAMS), LexborHTMLParser)  # the tools' parse, and --html's
    with pytest.raises(BadInputError):
        guards.parse_page("", PARAMS)  # the guards first, as `parse`


@needs_parse
def test_a_parse_that_differs_on_the_probes_is_not_used() -> None:
    class Scripting:
        """The real module, but its parse runs with scripting on (a <noscript> is text then)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(MOD, name)

        @staticmethod
        def parse_document(html: str) -> LexborHTMLParser:
            return LexborHTMLParser(html, scripting=True)

    class NotFound(Scripting):
        @staticmethod
        def parse_document(html: str) -> Any:
            return MOD.parse_document(html)

        @staticmethod
        def init_documents(library: str, error: type) -> str:
            return "lxb_html_document_parse not found"

    class Failing(NotFound):
        @staticmethod
        def init_documents(library: str, error: type) -> None:
            raise TypeError("a build for another signature")

    assert guards._checked_parser(MOD) is not None
    assert guards._checked_parser(Scripting()) is None
    assert guards._checked_parser(NotFound()) is None
    assert guards._checked_parser(Failing()) is None
    assert guards._checked_parser(object()) is None
    assert guards._checked_parser(None) is None


@needs_parse
def test_a_document_not_parsed_has_no_tree_and_the_parse_needs_its_functions() -> None:
    assert MOD.Document().root is None and MOD.Document().head is None and MOD.Document().body is None
    # In a fresh process, before `init_documents` found lexbor's functions: an error, not a crash.
    code = "from detemplate.engine.page import _walk; _walk.parse_document('<p>x</p>')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "init_documents() has not succeeded" in done.stderr


@needs_parse
def test_a_large_page_s_document_is_destroyed_not_pooled() -> None:
    """A cleaned document keeps memory in proportion to its last page until it parses again:
    only the documents of pages up to 1 MB of UTF-8 go back to the pool (at most four)."""
    small = make_site("m.example", 1)[0].page.html
    for _ in range(6):
        held = [PARSE(small) for _ in range(6)]  # more alive than the pool holds
        del held
    assert MOD.pooled_documents() == 4
    large = "<html><body>" + "<p>x</p>" * 200_000 + "</body></html>"
    assert len(large.encode()) > 1 << 20
    pooled = MOD.pooled_documents()
    page = PARSE(large)
    assert MOD.pooled_documents() == pooled - 1  # it took one from the pool
    del page
    assert MOD.pooled_documents() == pooled - 1  # and did not give it back
    page = PARSE(small)
    del page
    assert MOD.pooled_documents() == pooled - 1  # a small page's goes back where it came from
    assert _read(PARSE(small)) == _read(LexborHTMLParser(small))
