"""Link resolution (engine/links.py): the compiled loop gives the Python loop's URLs.

`absolute_links_python` with `_resolve_href` is the reference (tests/engine/detectors/
test_pagelets.py holds it to urljoin); page/_walk.pyx `absolute_links` resolves the common
shapes itself and hands the others back. Both run here on the same bases and hrefs:
every shape of the probe, generated sites' links, and arbitrary hrefs from hypothesis.
"""

from __future__ import annotations

from typing import Any

import pytest
from detemplate.engine import links
from detemplate.engine.page import compiled
from hypothesis import given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from tests.factories import make_site

MOD = compiled.module()  # the extension itself, not what the probe check let through: the tests check it
needs_kernel = pytest.mark.skipif(MOD is None, reason=f"the compiled walk is not in use: {compiled.status()}")

BASES = (
    *links.PROBE_BASES,
    "https://h.example/",
    "http://H.example/a/b/c",
    "https://h.example/a.b/c..d/e",
    "https://h.example/.x/y",
    "https://h.example/d/../e/f",
    "https://h.example:8443/d/p.html?x=1#frag",
    "https://user@h.example/d/",
    "https://h.example",
    "HTTP://h.example/x/",
    "ftp://h.example/x/",
)


def both(base: str, hrefs: list[str]) -> tuple[list[str], list[str]]:
    """The compiled loop's URLs and the Python loop's, each with a cold cache."""
    links._RESOLVED.clear()
    fast = links._absolute_links(base, hrefs, MOD)
    links._RESOLVED.clear()
    return fast, links._absolute_links(base, hrefs, None)


def test_the_links_are_compiled_when_the_walk_is() -> None:
    assert links.links_kernel() is MOD


@needs_kernel
@pytest.mark.parametrize("base", BASES)
def test_the_compiled_loop_agrees_on_every_probe_shape(base: str) -> None:
    hrefs = list(links.PROBE_HREFS)
    fast, python = both(base, hrefs)
    assert fast == python
    for href in hrefs:
        assert both(base, [href])[0] == both(base, [href])[1], href
    # The Python loop again with a warm cache (each URL as the compiled loop cached it).
    assert links._absolute_links(base, hrefs, None) == python


@needs_kernel
def test_the_compiled_loop_agrees_on_generated_sites() -> None:
    compared = 0
    for layout in ("blog", "docs", "news"):
        for sp in make_site(f"{layout}.example", 6, layout=layout):
            tree = LexborHTMLParser(sp.page.html)
            hrefs = [a.attributes.get("href") or "" for a in tree.css("a")]
            fast, python = both(sp.page.url, hrefs)
            assert fast == python
            compared += len(python)
    assert compared > 100


HREF_PARTS = st.sampled_from(
    ["a", "b.html", "/", "//", ".", "..", "./", "../", "?", "#", ":", "x:", "http:", "https://o.example", "HTTP://",
     "%2e", "?q=../x", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "é", "\U0001f600", "mailto:", "javascript:", "~"]
)


@needs_kernel
@given(
    st.lists(st.one_of(HREF_PARTS, st.text(max_size=4)), max_size=8).map("".join),
    st.sampled_from(BASES),
)
def test_the_compiled_loop_agrees_on_arbitrary_hrefs(href: str, base: str) -> None:
    fast, python = both(base, [href, href.strip(), "/" + href, "a/" + href])
    assert fast == python


@needs_kernel
def test_a_links_kernel_that_differs_on_the_probe_is_not_used() -> None:
    mod: Any = MOD

    class Off:
        @staticmethod
        def absolute_links(hrefs, origin, where, resolve):  # type: ignore[no-untyped-def]
            out: list[str] = mod.absolute_links(hrefs, origin, where, resolve)
            return [*out[:-1], out[-1] + "?"] if out else out  # the last URL with an empty query

    class Failing:
        @staticmethod
        def absolute_links(*args):  # type: ignore[no-untyped-def]
            raise TypeError("a build for another signature")

    assert links.checked_links(mod) is mod
    assert links.checked_links(Off) is None
    assert links.checked_links(Failing) is None
    assert links.checked_links(object()) is None
    assert links.checked_links(None) is None
    assert links.links_kernel() is mod  # the check leaves the choice as it was
