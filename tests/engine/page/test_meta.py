"""page/meta.py: a page's title (the head's first, else the first anywhere) and its declared language."""

from __future__ import annotations

import pytest
from detemplate.engine.page.meta import MAX_TITLE_CHARS, page_lang, page_title
from selectolax.lexbor import LexborHTMLParser

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
