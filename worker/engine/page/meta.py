"""A page's title and the language it declares, read from the parsed lexbor tree.

Cheap by design (docs/formats.md measures it): the first ``<title>`` is looked for among the
head's elements first (a few of them), and in the whole tree only when the head has none; the
head precedes the body, so a title in the head is the first in document order, the answer a
lookup from the root gives. Then the root's ``lang`` attribute, and only when that is missing
the ``<meta http-equiv>`` elements (``content-language``). Nothing is guessed: a page that
declares no language has none.

Where the compiled walk is in use, its `title_text`, `root_langs` and `http_equiv_metas` (and
`base_hrefs`, for engine/links.py) read these in C (`meta_kernel`):
selectolax's node objects and CSS queries, which the Python functions here use, cost 24-26 us a
page on ../shared/crawl, the C readers 14-15 (docs/measurements.md, "A first pass a seventh
cheaper"). They are used only after they gave the Python functions' answers on the probe
pages below.
"""

from __future__ import annotations

from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from . import compiled

MAX_TITLE_CHARS = 1000  # a title longer than this is cut (some pages put their whole text there)
MAX_LANG_CHARS = 35  # BCP 47's longest useful tags are shorter; anything longer is not a tag


def page_title(tree: LexborHTMLParser) -> str | None:
    """The text of the page's first <title>, whitespace-normalised; None when it has none or it is empty."""
    mod = meta_kernel()
    raw = title_text_python(tree) if mod is None else mod.title_text(_address(tree.head), _address(tree.root))
    if raw is None:
        return None
    text = " ".join(raw.split())
    return text[:MAX_TITLE_CHARS] or None


def title_text_python(tree: LexborHTMLParser) -> str | None:
    """The raw text of the page's first <title> (the reference for page/_walk.pyx `title_text`)."""
    node = _in_head(tree, "title")
    if node is None:
        node = tree.css_first("title")  # a <title> outside the head (an SVG's), or none
        if node is None:
            return None
    return node.text(deep=True)


def _address(node: LexborNode | None) -> int:
    return 0 if node is None else node.mem_id


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
    if root is None:
        return None
    mod = meta_kernel()
    lang, xml_lang = root_langs_python(root) if mod is None else mod.root_langs(root.mem_id)
    found = _lang(lang) or _lang(xml_lang)
    if found:
        return found
    for equiv, content in http_equiv_metas_python(tree) if mod is None else mod.http_equiv_metas(root.mem_id):
        if equiv.strip().lower() == "content-language":
            found = _lang((content or "").split(",")[0])
            if found:
                return found
    return None


def root_langs_python(root: LexborNode) -> tuple[str | None, str | None]:
    """The root's lang and xml:lang values (the reference for page/_walk.pyx `root_langs`)."""
    attrs = root.attributes
    return attrs.get("lang"), attrs.get("xml:lang")


def http_equiv_metas_python(tree: LexborHTMLParser) -> list[tuple[str, str | None]]:
    """(http-equiv, content) of each <meta> with an http-equiv value, in document order (the
    reference for page/_walk.pyx `http_equiv_metas`)."""
    out = []
    for node in tree.css("meta[http-equiv]"):
        attrs = node.attributes
        equiv = attrs.get("http-equiv")
        if equiv is not None:
            out.append((equiv, attrs.get("content")))
    return out


def _lang(value: str | None) -> str | None:
    """A language tag as written (trimmed, "_" read as "-"); None when empty or clearly not a tag."""
    if not value:
        return None
    tag = value.strip().replace("_", "-")
    if not tag or len(tag) > MAX_LANG_CHARS or not all(c.isascii() and (c.isalnum() or c == "-") for c in tag):
        return None
    return tag


# Pages on which the compiled readers must give the Python functions' answers: a title in
# the head (after other elements, with an entity and white space), one only in an SVG, one
# with markup inside, none; lang and xml:lang, empty ones; content-language metas in the
# head and the body, upper case, without a value, with several languages; base elements in
# the head and the body, one without href, one with an empty href; a template's contents.
META_PROBES = (
    "<html lang='en-GB'><head><meta charset=utf-8><title> A &amp; b\n c </title><base href='/d/'></head>"
    "<body>x</body></html>",
    "<html><head><style>t{}</style></head><body><svg><title>In <b>an</b> SVG</title></svg><title>late</title>"
    "</body></html>",
    "<html xml:lang='de'><head><META HTTP-EQUIV='Content-Language' CONTENT='fr, en'></head><body><p>x</p>"
    "</body></html>",
    "<html lang=''><head><meta http-equiv><meta http-equiv=refresh content=5><title></title></head>"
    "<body><meta http-equiv=' content-language ' content='pt_BR'><base><base href=''><base href=' /b/ '></body></html>",
    "<template><title>not this</title><meta http-equiv=content-language content=es></template><p>no head</p>",
    "<html><head><noscript><title>n</title></noscript><base href='https://o.example/x/'><base href='/y/'>"
    "</head></html>",
    "",
)


def meta_kernel() -> Any:
    """The extension module where its page readers are in use, else None; chosen once, on
    first use, with the page walk."""
    return compiled.checked(_checked_meta)


def _checked_meta(mod: Any) -> Any:
    return compiled.agreeing(mod, ("title_text", "root_langs", "http_equiv_metas", "base_hrefs"), _meta_agrees)


def _meta_agrees(mod: Any) -> bool:
    for html in META_PROBES:
        tree = LexborHTMLParser(html)
        head, body, root = tree.head, tree.body, tree.root
        if mod.title_text(_address(head), _address(root)) != title_text_python(tree):
            return False
        if root is not None and (
            mod.root_langs(root.mem_id) != root_langs_python(root)
            or mod.http_equiv_metas(root.mem_id) != http_equiv_metas_python(tree)
        ):
            return False
        if mod.base_hrefs(_address(head), _address(body)) != base_hrefs_python(tree):
            return False
    return True


def base_hrefs(tree: LexborHTMLParser) -> list[str | None]:
    """The href values of the <base> children of the head and then of the body (engine/links.py
    `base_url` takes the first that is not blank)."""
    mod = meta_kernel()
    return base_hrefs_python(tree) if mod is None else mod.base_hrefs(_address(tree.head), _address(tree.body))


def base_hrefs_python(tree: LexborHTMLParser) -> list[str | None]:
    """The href values of the <base> children of the head and then of the body (the reference
    for page/_walk.pyx `base_hrefs`)."""
    return [
        node.attrs.get("href")
        for parent in (tree.head, tree.body)
        if parent is not None
        for node in parent.iter()
        if node.tag == "base"
    ]
