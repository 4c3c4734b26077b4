"""A page's title and the language it declares, read from the parsed lexbor tree.

Cheap by design (docs/formats.md measures it): the first ``<title>`` is looked for among the
head's elements first (a few of them), and in the whole tree only when the head has none (a
CSS lookup from the root: on a freshly parsed page 0.1-0.2 ms against 8 us); the head precedes
the body, so a title in the head is the first in document order, the answer a lookup from the
root gives. Then the root's ``lang`` attribute, and only when that is missing a lookup of
``<meta http-equiv="content-language">`` (looking in the head first was slower here: most
pages without ``lang`` declare no language at all). Nothing is guessed: a page that declares
no language has none.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

MAX_TITLE_CHARS = 1000  # a title longer than this is cut (some pages put their whole text there)
MAX_LANG_CHARS = 35  # BCP 47's longest useful tags are shorter; anything longer is not a tag


def page_title(tree: LexborHTMLParser) -> str | None:
    """The text of the page's first <title>, whitespace-normalised; None when it has none or it is empty."""
    node = _in_head(tree, "title")
    if node is None:
        node = tree.css_first("title")  # a <title> outside the head (an SVG's), or none
        if node is None:
            return None
    text = " ".join(node.text(deep=True).split())
    return text[:MAX_TITLE_CHARS] or None


def _in_head(tree: LexborHTMLParser, tag: str) -> LexborNode | None:
    """The first element named `tag` in the head (document order), or None."""
    head = tree.head
    if head is None:
        return None
    for node in head.traverse():
        if node.tag == tag:
            return node
    return None


def page_lang(tree: LexborHTMLParser) -> str | None:
    """The language the page declares: <html lang> (or xml:lang), else <meta http-equiv=content-language>."""
    root = tree.root
    if root is not None:
        attrs = root.attributes
        found = _lang(attrs.get("lang")) or _lang(attrs.get("xml:lang"))
        if found:
            return found
    for node in tree.css("meta[http-equiv]"):
        if (node.attributes.get("http-equiv") or "").strip().lower() == "content-language":
            found = _lang((node.attributes.get("content") or "").split(",")[0])
            if found:
                return found
    return None


def _lang(value: str | None) -> str | None:
    """A language tag as written (trimmed, "_" read as "-"); None when empty or clearly not a tag."""
    if not value:
        return None
    tag = value.strip().replace("_", "-")
    if not tag or len(tag) > MAX_LANG_CHARS or not all(c.isascii() and (c.isalnum() or c == "-") for c in tag):
        return None
    return tag
