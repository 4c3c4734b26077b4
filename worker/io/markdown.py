"""The kept content of a clean page as Markdown: headings, lists, tables, code blocks and
links kept as structure (`run --format markdown`).

The engine decides blocks, not markup: a clean page says, for each block in document
order, whether it is content. The renderer parses the page again (only when Markdown is
asked for), runs the engine's own walk on it (`engine.page.walk`, which returns the
text nodes of every segment) and gives each text node its block: the nearest enclosing
layout element (`SegmentParams.block_tags`; the page root above all), blocks numbered
in document order as the walk numbers them. It checks the result against the clean
page (as many blocks, each with the same characters apart from white space) and renders
only the text nodes of
content blocks, in the markup around them. A page where the check fails (it cannot,
unless the walk changes under it) is rendered as the clean page's plain text, and
`render_markdown` says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..engine.links import base_url
from ..engine.model import TEMPLATE, CleanPage
from ..engine.page import parse, walk
from ..engine.params import SegmentParams

TEXT_ID = 2
_INLINE = frozenset(
    """a abbr b bdi bdo cite code data del dfn em font i img ins kbd label mark q s samp small span strike
    strong sub sup time tt u var wbr br""".split()
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_ESCAPE = re.compile(r"([\\`*_\[\]<>])")
# What would make a paragraph's line a heading, a list item, a quote or a table row.
_LINE_START = re.compile(r"^([#+\-=>|])|^(\d+)([.)])", re.M)
_SPACES = re.compile(r"[ \t\r\n\f]+")


def render_markdown(html: str, page: CleanPage, params: SegmentParams) -> tuple[str, bool]:
    """(the page's content as Markdown, whether the structure could be kept); see the module docstring."""
    tree = parse(html, params)
    text_nodes: list[tuple[LexborNode, int]] = []
    blocks = walk(tree, params, text_nodes).blocks
    keep = _kept_nodes(tree, text_nodes, blocks, page, params.block_tags)
    if keep is None:
        return _escape_lines(page.text), False
    root = tree.body or tree.root
    if root is None:
        return "", True
    out = _Renderer(keep, params.skip_tags, base_url(tree, page.url)).blocks(root)
    return "\n\n".join(out), True


def _kept_nodes(
    tree: LexborHTMLParser,
    text_nodes: list[tuple[LexborNode, int]],
    blocks: Sequence[object],
    page: CleanPage,
    block_tags: frozenset[str],
) -> dict[int, bool] | None:
    """Text node (mem_id) -> whether its block is content; None when the blocks do not match the page's."""
    root = tree.root
    if root is None or len(blocks) != len(page.blocks):
        return None
    owner_of: list[int] = []
    for node, _ in text_nodes:
        up = node.parent
        while up is not None and up.mem_id != root.mem_id and up.tag not in block_tags:
            up = up.parent
        owner_of.append(root.mem_id if up is None else up.mem_id)
    owners = set(owner_of)
    order = [n.mem_id for n in root.traverse(include_text=False) if n.mem_id in owners]
    if len(order) != len(page.blocks):
        return None
    number = {mem_id: i for i, mem_id in enumerate(order)}
    texts: list[list[str]] = [[] for _ in order]
    keep: dict[int, bool] = {}
    for (node, _), owner in zip(text_nodes, owner_of, strict=True):
        i = number[owner]
        texts[i].append("".join((node.text_content or "").split()))
        keep[node.mem_id] = page.blocks[i].verdict != TEMPLATE
    # A block's text joins its runs' text nodes with white space where the page has it and
    # between two elements' words (page/python.py `join_pieces`), so the check compares the
    # characters, white space aside.
    if any("".join(t) != "".join(b.text.split()) for t, b in zip(texts, page.blocks, strict=True)):
        return None
    return keep


def _escape_lines(text: str) -> str:
    return "\n\n".join(_paragraph(_escape(line)) for line in text.split("\n"))


def _escape(text: str) -> str:
    """Inline text with Markdown's inline markers escaped."""
    return _ESCAPE.sub(r"\\\1", text)


def _line_start(m: re.Match[str]) -> str:
    return "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3)


class _Renderer:
    def __init__(self, keep: dict[int, bool], skip_tags: frozenset[str], base: str) -> None:
        self.keep = keep
        self.skip = skip_tags
        self.base = base

    # -- block level: a list of Markdown blocks (paragraphs, headings, lists, ...) ----

    def blocks(self, node: LexborNode) -> list[str]:
        out: list[str] = []
        run: list[str] = []
        for child in node.iter(include_text=True):
            if child.tag_id == TEXT_ID:
                run.append(self._text(child))
                continue
            tag = child.tag or ""
            if tag.startswith("-") or tag in self.skip:
                continue
            if tag in _INLINE:
                run.append(self._wrap(child, tag, self.inline(child)))
                continue
            self._flush(run, out)
            out.extend(self._block(child, tag))
        self._flush(run, out)
        return out

    def _flush(self, run: list[str], out: list[str]) -> None:
        if run:
            text = _paragraph("".join(run))
            if text:
                out.append(text)
            run.clear()

    def _block(self, node: LexborNode, tag: str) -> list[str]:
        if tag in _HEADINGS:
            text = _SPACES.sub(" ", self.inline(node)).strip()
            return [f"{'#' * _HEADINGS[tag]} {text}"] if text else []
        if tag in ("ul", "ol", "menu"):
            return self._list(node, ordered=tag == "ol")
        if tag == "pre":
            return self._code(node)
        if tag == "table":
            return self._table(node)
        if tag == "blockquote":
            inner = self.blocks(node)
            return ["\n".join("> " + line if line else ">" for line in "\n\n".join(inner).split("\n"))] if inner else []
        if tag == "hr":
            return []
        return self.blocks(node)

    def _list(self, node: LexborNode, ordered: bool) -> list[str]:
        items: list[str] = []
        n = 0
        for child in node.iter(include_text=False):
            if child.tag != "li":
                items.extend(self.blocks(child) if child.tag not in self.skip else [])
                continue
            inner = self.blocks(child)
            if not inner:
                continue
            n += 1
            mark = f"{n}. " if ordered else "- "
            pad = " " * len(mark)
            lines = "\n\n".join(inner).split("\n")
            items.append(mark + lines[0] + "".join("\n" + (pad + line if line else "") for line in lines[1:]))
        return ["\n".join(items)] if items else []

    def _code(self, node: LexborNode) -> list[str]:
        code = self._raw(node).strip("\n")
        if not code.strip():
            return []
        fence = "```"
        while fence in code:
            fence += "`"
        lang = ""
        inner = node.css_first("code")
        cls = (inner.attributes.get("class") if inner is not None else None) or node.attributes.get("class") or ""
        for word in cls.split():
            if word.startswith(("language-", "lang-")):
                lang = word.split("-", 1)[1]
                break
        # No line of a page's body is exactly "---" (that line opens the next page): a code
        # line "---" gets a trailing space.
        code = re.sub(r"(?m)^---$", "--- ", code)
        return [f"{fence}{lang}\n{code}\n{fence}"]

    def _raw(self, node: LexborNode) -> str:
        """The kept text under `node` as written (for code)."""
        return "".join(
            t.text_content or ""
            for t in node.traverse(include_text=True)
            if t.tag_id == TEXT_ID and self.keep.get(t.mem_id)
        )

    def _table(self, node: LexborNode) -> list[str]:
        rows: list[list[str]] = []
        for tr in node.css("tr"):
            cells = [
                _SPACES.sub(" ", self.inline(cell)).strip().replace("|", "\\|")
                for cell in tr.iter(include_text=False)
                if cell.tag in ("td", "th")
            ]
            if any(cells):
                rows.append(cells)
        if not rows:
            return []
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines.extend("| " + " | ".join(r) + " |" for r in rows[1:])
        return ["\n".join(lines)]

    # -- inline: one string -------------------------------------------------------------

    def _text(self, node: LexborNode) -> str:
        raw = node.text_content or ""
        if node.mem_id in self.keep:
            return _escape(raw) if self.keep[node.mem_id] else ""
        return " " if raw and raw.isspace() else ""  # whitespace between kept words

    def inline(self, node: LexborNode) -> str:
        parts: list[str] = []
        for child in node.iter(include_text=True):
            if child.tag_id == TEXT_ID:
                parts.append(self._text(child))
                continue
            tag = child.tag or ""
            if tag.startswith("-") or tag in self.skip:
                continue
            inner = self.inline(child)
            parts.append(self._wrap(child, tag, inner))
        return "".join(parts)

    def _wrap(self, node: LexborNode, tag: str, inner: str) -> str:
        if tag == "br":
            return "\n"
        if not inner.strip():
            return inner if inner.isspace() else ""
        lead = " " if inner[:1].isspace() else ""
        trail = " " if inner[-1:].isspace() else ""
        core = _SPACES.sub(" ", inner).strip()
        if tag == "a":
            href = (node.attributes.get("href") or "").strip()
            url = urljoin(self.base, href) if href else ""
            if url.startswith(("http://", "https://")):
                if any(c in url for c in " ()<>"):
                    url = "<" + url.replace(">", "%3E").replace("<", "%3C") + ">"
                return f"{lead}[{core}]({url}){trail}"
        elif tag in ("em", "i"):
            return f"{lead}*{core}*{trail}"
        elif tag in ("strong", "b"):
            return f"{lead}**{core}**{trail}"
        elif tag in ("code", "kbd", "samp", "tt"):
            plain = _SPACES.sub(" ", self._raw(node)).strip()
            tick = "``" if "`" in plain else "`"
            pad = " " if plain.startswith("`") or plain.endswith("`") else ""
            return f"{lead}{tick}{pad}{plain}{pad}{tick}{trail}"
        return inner


def _paragraph(text: str) -> str:
    """A paragraph's inline text: runs of whitespace one space, line breaks kept, and no line
    that Markdown would read as a heading, list item, quote or table row (nor as the `---`
    that opens a page)."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _LINE_START.sub(_line_start, "\n".join(line for line in lines if line))
