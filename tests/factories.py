"""Test fixtures: the synthetic sites of detemplate.tools.samples, plus a small hand-made page."""

from __future__ import annotations

from collections.abc import Sequence

from detemplate.engine.model import RawPage
from detemplate.tools.samples import SitePage, gold_text, interleave, make_site, norm, write_jsonl, write_warc
from hypothesis import strategies as st

__all__ = [
    "SitePage", "gold_text", "interleave", "make_page", "make_site", "markup", "norm", "write_jsonl", "write_warc",
]

_DEFAULT_HTML = (
    "<html><head><title>t</title></head><body>"
    "<div class='nav'><a href='/'>Home</a> <a href='/about'>About</a></div>"
    "<article><p>Some page text for a test.</p></article>"
    "<footer><p>Footer text</p></footer></body></html>"
)


def make_page(**overrides: str) -> RawPage:
    """A small valid RawPage; any field can be overridden (url, html, host, source)."""
    fields = {"url": "https://example.com/p/1.html", "html": _DEFAULT_HTML, "host": "example.com", "source": "test"}
    fields.update(overrides)
    return RawPage(**fields)




def markup(tags: Sequence[str], *pieces: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    """Markup for property tests: up to `max_size` opening and closing tags of `tags` and `pieces`, joined."""
    opening = st.sampled_from(tags).map(lambda t: f"<{t}>")
    closing = st.sampled_from(tags).map(lambda t: f"</{t}>")
    return st.lists(st.one_of(opening, closing, *pieces), max_size=max_size).map("".join)
