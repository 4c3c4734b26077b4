"""page/meta.py: a page's title (the head's first, else the first anywhere) and its declared language."""

from __future__ import annotations

import pytest
from detemplate.engine.page import compiled
from detemplate.engine.page.meta import (
    MAX_TITLE_CHARS,
    META_PROBES,
    _checked_meta,
    base_hrefs_python,
    http_equiv_metas_python,
    meta_kernel,
    page_lang,
    page_title,
    root_langs_python,
    title_text_python,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from tests.factories import markup

SVG = "<svg><title>A chart of the series</title><rect/></svg>"


def _css_title(tree: LexborHTMLParser) -> str | None:
    """The reference: the first <title> in document order, by a lookup from the root."""
    node = tree.css_first("title")
    if node is None:
        return None
    return " ".join(node.text(deep=True).split())[:MAX_TITLE_CHARS] or None


@pytest.mark.parametrize(("html", "title"), [
    ("<html><head><title>  The   page\n title </title></head><body><p>x</p></body></html>", "The page title"),
    (f"<html><head><meta charset=utf-8><title>Head</title></head><body>{SVG}</body></html>", "Head"),
    (f"<html><head><meta charset=utf-8></head><body>{SVG}</body></html>", "A chart of the series"),  # none in the head
    ("<html><head><noscript><title>Nested</title></noscript><title>Second</title></head><body></body></html>", None),
    ("<title>Before any head</title><p>text</p>", "Before any head"),  # the parser puts it in the head
    ("<html><head><title>   </title></head><body><p>x</p></body></html>", None),  # empty: none
    ("<html><body><p>no title at all</p></body></html>", None),
    ("<p>text</p><title>Late</title>", "Late"),  # after body text: the parser still puts it in the head
])
def test_the_title_is_the_first_in_document_order(html: str, title: str | None) -> None:
    tree = LexborHTMLParser(html)
    assert page_title(tree) == _css_title(tree)
    if title is not None:
        assert page_title(tree) == title


def test_a_long_title_is_cut() -> None:
    tree = LexborHTMLParser(f"<html><head><title>{'word ' * 400}</title></head><body></body></html>")
    title = page_title(tree)
    assert title is not None and len(title) == MAX_TITLE_CHARS


@pytest.mark.parametrize(("html", "lang"), [
    ("<html lang='en-GB'><head></head><body></body></html>", "en-GB"),
    ("<html><head><meta http-equiv='Content-Language' content='de, en'></head><body></body></html>", "de"),
    ("<html lang=' '><head><meta http-equiv='content-language' content='pt_BR'></head></html>", "pt-BR"),
    ("<html><head></head><body><p>none</p></body></html>", None),
])
def test_the_declared_language(html: str, lang: str | None) -> None:
    assert page_lang(LexborHTMLParser(html)) == lang


# -- the compiled readers (page/_walk.pyx title_text, root_langs, http_equiv_metas, base_hrefs) --

needs_fast = pytest.mark.skipif(compiled.module() is None, reason="the compiled walk is not built here")
META_TAGS = ["html", "head", "body", "title", "meta", "base", "svg", "noscript", "template", "div", "p", "b"]


def readers_agree(html: str) -> None:
    """The compiled readers give what selectolax's node objects and CSS queries give."""
    mod = compiled.module()
    tree = LexborHTMLParser(html)
    head, body, root = tree.head, tree.body, tree.root
    address = [0 if node is None else node.mem_id for node in (head, body, root)]
    assert mod.title_text(address[0], address[2]) == title_text_python(tree)
    assert mod.base_hrefs(address[0], address[1]) == base_hrefs_python(tree)
    if root is not None:
        assert mod.root_langs(root.mem_id) == root_langs_python(root)
        assert mod.http_equiv_metas(root.mem_id) == http_equiv_metas_python(tree)


@needs_fast
@pytest.mark.parametrize("html", META_PROBES)
def test_the_compiled_readers_agree_on_the_probes(html: str) -> None:
    readers_agree(html)


@needs_fast
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    markup(
        META_TAGS,
        st.sampled_from([
            "<html lang='fr'>", "<html xml:lang=''>", "<HTML LANG=de-AT>",
            "<meta http-equiv=content-language content='nl, en'>",
            "<META HTTP-EQUIV='Content-Language'>", "<meta http-equiv>", "<meta content=x http-equiv=' refresh'>",
            "<base href='/a/'>", "<base>", "<BASE HREF=''>", "<svg><title>in svg</title></svg>", "<title>t</title>",
            "<title></title>", "<!-- c -->",
        ]),
        st.text(min_size=0, max_size=8),
        max_size=40,
    )
)
def test_the_compiled_readers_agree_on_arbitrary_markup(html: str) -> None:
    readers_agree(html)


@needs_fast
def test_the_readers_are_compiled_when_the_walk_is_and_refused_when_they_differ() -> None:
    mod = compiled.module()

    class Off:
        root_langs = http_equiv_metas = base_hrefs = staticmethod(lambda *args: [])

        @staticmethod
        def title_text(head: int, root: int) -> str | None:
            text = mod.title_text(head, root)
            return None if text is None else text.upper()  # a title read otherwise

    assert meta_kernel() is mod
    assert _checked_meta(mod) is mod
    assert _checked_meta(Off) is None
    assert _checked_meta(None) is None
