"""detemplate.io.markdown: the kept content with its structure, from the engine's own walk and verdicts."""

from __future__ import annotations

from detemplate import process_page
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams, with_overrides
from detemplate.io.markdown import render_markdown
from detemplate.state.memory import MemoryStore
from markdown_it import MarkdownIt

from tests.factories import make_site

PAGE = """<html lang="en"><head><title>Doc</title></head><body>
<div><ul><li><a href="/">Home</a></li><li><a href="/blog">Blog</a></li></ul></div>
<main><article>
<h1>Install <em>the</em> tool</h1>
<p>Read the <a href="guide.html">guide</a> first, then run <code>pip install x_y</code>.</p>
<h2>Steps</h2>
<ol><li>Download</li><li>Configure<ul><li>edit the file</li></ul></li></ol>
<pre><code class="language-sh">make setup
---
make test</code></pre>
<table><tr><th>flag</th><th>meaning</th></tr><tr><td>-v</td><td>verbose | loud</td></tr></table>
<p>2024. A year; # not a heading; * not a list</p>
<blockquote><p>Quoted words.</p></blockquote>
</article></main>
<div><p>Copyright footer</p></div>
</body></html>"""


def all_content() -> EngineParams:
    # The page-level model off: a host's first page is kept whole (method cold), so every block is
    # content (PAGE has no nav or footer element: their blocks leave the text on any page).
    return with_overrides(EngineParams(), ["pagelevel.enabled=false"])


def test_structure_is_kept_as_markdown() -> None:
    params = all_content()
    clean = process_page(RawPage("https://d.example/docs/install", PAGE, "d.example"), MemoryStore(), params).clean
    assert clean is not None and all(b.verdict == "content" for b in clean.blocks)
    md, structured = render_markdown(PAGE, clean, params.segment)
    assert structured
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    kinds = [t.type for t in tokens]
    assert kinds.count("heading_open") == 2 and [t.tag for t in tokens if t.type == "heading_open"] == ["h1", "h2"]
    assert "ordered_list_open" in kinds and kinds.count("bullet_list_open") == 2  # the menu and the nested list
    assert "table_open" in kinds and "blockquote_open" in kinds
    fence = next(t for t in tokens if t.type == "fence")
    assert fence.info == "sh" and fence.content.splitlines() == ["make setup", "--- ", "make test"]
    links = [t.attrGet("href") for t in tokens if t.type == "inline" for t in t.children or [] if t.type == "link_open"]
    assert links == ["https://d.example/", "https://d.example/blog", "https://d.example/docs/guide.html"]
    inline = " ".join(t.content for t in tokens if t.type == "inline")
    assert "`pip install x_y`" in inline
    assert "verbose \\| loud" in md  # a pipe in a cell does not split it
    # Text that looks like Markdown syntax stays text.
    para = next(t for t in tokens if t.type == "inline" and "A year" in t.content)
    assert [c.type for c in para.children or []] == ["text"]
    assert not any(line == "---" for line in md.splitlines())


def test_template_blocks_are_left_out() -> None:
    params = EngineParams()
    store = MemoryStore()
    site = make_site("t.example", 12, seed=5, layout="docs")
    for sp in site[:-1]:
        process_page(sp.page, store, params)
    last = site[-1].page
    clean = process_page(last, store, params).clean
    assert clean is not None
    template = [b.text for b in clean.blocks if b.verdict == "template"]
    assert template
    md, structured = render_markdown(last.html, clean, params.segment)
    assert structured
    for text in template:
        if text not in clean.text:  # a template block's text that no content block repeats
            assert text[:30] not in md.replace("\\", "")


def test_every_generated_page_keeps_its_structure() -> None:
    """The renderer's blocks match the engine's on every page of the generated sites (no fallback)."""
    params = EngineParams()
    store = MemoryStore()
    for layout in ("blog", "docs", "news"):
        for sp in make_site(f"{layout}.example", 15, seed=7, layout=layout):
            clean = process_page(sp.page, store, params).clean
            assert clean is not None
            _, structured = render_markdown(sp.page.html, clean, params.segment)
            assert structured, sp.page.url
