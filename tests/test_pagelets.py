"""Pagelets, shingles and templates (worker.detect.pagelets, `detemplate templates`)."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from tests.factories import make_site, write_jsonl
from worker.detect import pagelet_cmd
from worker.detect.pagelets import (
    PageletConfig,
    PageRecord,
    global_templates,
    local_templates,
    page_pagelets,
    read_page,
    resolve,
)
from worker.model import RawPage
from worker.params import SegmentParams
from worker.segment import segment_tree

SEG = SegmentParams()


def _pagelets(html: str, url: str = "https://h.example/a/b.html", **cfg: int) -> list:
    return page_pagelets(LexborHTMLParser(html), url, SEG, PageletConfig(**cfg))


NAV = "".join(f'<li><a href="/s{i}/">Section {i}</a></li>' for i in range(5))
PAGE = f"""<html><head><title>x</title><script>var a = 1;</script></head><body>
<div id="top"><ul class="nav">{NAV}</ul></div>
<article><h1>Title here</h1><p>Text with <a href="ref.html#part">one link</a> in it.</p></article>
<footer><a href="/a">A</a> <a href="/b">B</a> <a href="mailto:x@y.z">mail</a></footer>
</body></html>"""


def test_partition_follows_definition_2() -> None:
    pls = _pagelets(PAGE)
    paths = [p.path for p in pls]
    # body's children: div (5 links, >= k), article (1), footer (2 http links, 3 <a href>).
    # div's only child ul holds 5 links, so div is split; ul's children hold 1 link each: ul is a pagelet.
    assert paths == ["html/body/div/ul", "html/body/article", "html/body/footer"]
    nav, article, footer = pls
    assert nav.links == [f"https://h.example/s{i}/" for i in range(5)]
    assert article.links == ["https://h.example/a/ref.html"]  # relative, fragment dropped
    assert footer.links == ["https://h.example/a", "https://h.example/b"]  # mailto: is no page link
    assert article.text == "Title here Text with one link in it."
    assert "var a" not in " ".join(p.text for p in pls)


def test_partition_with_larger_k_keeps_bigger_regions() -> None:
    # With k = 6 no child of body holds 6 links: body itself is the one pagelet.
    assert [p.path for p in _pagelets(PAGE, k=6)] == ["html/body"]
    # With k = 1 an element is split while any child holds a link: down to the anchors themselves.
    small = [p.path for p in _pagelets(PAGE, k=1)]
    assert small.count("html/body/div/ul/li/a") == 5 and "html/body/div/ul/li" not in small


def test_base_href_resolves_links() -> None:
    html = '<html><head><base href="https://cdn.example/x/"></head><body><p><a href="y.html">y</a></p></body></html>'
    (p,) = _pagelets(html, url="https://h.example/page.html")
    assert p.links == ["https://cdn.example/x/y.html"]
    # An archived page's <base> after an inserted toolbar, in the body, counts too.
    body_base = (
        '<html><body><script>x</script><base href="https://arch.example/w/"><p><a href="z">z</a></p></body></html>'
    )
    assert _pagelets(body_base, url="https://h.example/page.html")[0].links == ["https://arch.example/w/z"]
    assert resolve("https://h.example/a/", "javascript:void(0)") is None
    assert resolve("https://h.example/a/", "#top") is None
    assert resolve("https://h.example/a/", "//o.example/z") == "https://o.example/z"


def test_pagelet_keys_are_the_segment_keys() -> None:
    tree = LexborHTMLParser(PAGE)
    seg_keys = {s.key for b in segment_tree(tree, SEG) for s in b.segments}
    pl_keys = [k for p in page_pagelets(tree, "https://h.example/", SEG) for k in p.keys]
    assert pl_keys and set(pl_keys) <= seg_keys


def _nav(items: list[str]) -> str:
    lis = "".join(f'<li><a href="/{w.lower()}/">{w}</a></li>' for w in items)
    return f"<html><body><nav><ul>{lis}</ul></nav><main><p>body</p></main></body></html>"


ITEMS = ["Home", "World", "Business", "Politics", "Science", "Health", "Sports", "Travel", "Style", "Opinion"]


def test_shingle_sketch_survives_one_changed_item() -> None:
    cfg = {"sketch_size": 8}
    base = _pagelets(_nav(ITEMS), **cfg)[0]
    one = _pagelets(_nav([*ITEMS[:6], "Weather", *ITEMS[7:]]), **cfg)[0]
    other = _pagelets(_nav(["Alpha", "Beta", "Gamma", "Delta", "Omega", "Kappa", "Rho", "Tau", "Phi", "Chi"]), **cfg)[0]
    assert base.path == one.path == "html/body/nav/ul"
    same = sum(a == b for a, b in zip(base.sketch, one.sketch, strict=True))
    assert same >= 4  # resemblance about 0.6: most min-hashes agree
    assert not set(base.sketch) & set(other.sketch)
    assert _pagelets(_nav(ITEMS))[0].sketch == base.sketch[:4]  # deterministic, prefix of a longer sketch


def _record(url: str, nav_items: list[str], links: list[str], content: str) -> PageRecord:
    lis = "".join(f'<li><a href="/{w}/">{w} item</a></li>' for w in nav_items)
    own = "".join(f'<a href="{u}">to {u}</a> ' for u in links)
    html = f"<html><body><nav><ul>{lis}</ul></nav><main><p>{content} {own}</p></main></body></html>"
    return read_page(RawPage(url, html, "h.example"), SEG, PageletConfig())


NAV5 = ["a", "b", "c", "d", "e"]


def test_local_algorithm_groups_shared_pagelets_and_drops_duplicates() -> None:
    recs = [_record(f"https://h.example/{i}", NAV5, [], f"unique words number {i} here") for i in range(4)]
    dup = _record("https://h.example/dup", NAV5, [], "unique words number 0 here")
    found = local_templates("h.example", [*recs, dup])
    assert len(found) == 1
    (t,) = found
    assert t.pages == 4  # the duplicate of page 0 is dropped first
    assert t.path == "html/body/nav/ul" and len(t.links) == 5
    assert local_templates("h.example", recs[:1]) == []


def test_global_algorithm_splits_by_link_components() -> None:
    u = [f"https://h.example/p{i}" for i in range(6)]
    recs = [
        _record(u[0], NAV5, [u[1]], "first page text"),
        _record(u[1], NAV5, [u[2]], "second page text"),
        _record(u[2], NAV5, [], "third page text"),
        # A mirror with the same pagelet that links to none of the above: its own component.
        _record(u[3], NAV5, [u[4]], "fourth page text"),
        _record(u[4], NAV5, [], "fifth page text"),
        _record(u[5], NAV5, [], "lonely page text"),  # a singleton: not a template
    ]
    found = global_templates("h.example", recs)
    groups = sorted(t.pages for t in found if t.path == "html/body/nav/ul")
    assert groups == [2, 3]
    assert {t.pages for t in local_templates("h.example", recs) if t.path == "html/body/nav/ul"} == {6}


def test_generated_site_templates_are_the_template_regions() -> None:
    site = make_site("gen.example", 12, seed=3)
    recs = [read_page(sp.page, SEG, PageletConfig()) for sp in site]
    found = local_templates("gen.example", recs)
    texts = " ".join(t.sample for t in found if t.pages == len(site))
    for label in ("Privacy policy", "Terms of use"):
        assert label in texts
    # No in-article text is part of a template found on more than one page.
    for sp in site:
        for g in sp.gold_blocks:
            assert not any(g in t.sample for t in found if len(g) > 30)


def _run_cmd(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    pagelet_cmd.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_templates_command_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = [sp.page for sp in make_site("one.example", 8, seed=1)] + [sp.page for sp in make_site("two.example", 8)]
    path = write_jsonl(pages, tmp_path / "crawl.jsonl")
    assert _run_cmd(["templates", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["host"] for r in rows} == {"one.example", "two.example"}
    assert all(r["pages"] >= 2 and len(r["shingle"]) == 16 for r in rows)
    assert any(r["pages"] == 8 and "Privacy policy" in r["sample"] for r in rows)
    assert _run_cmd(["templates", str(path), "--algorithm", "global", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "one.example: 8 pages" in out and "templates (global)" in out


# -- template links in the stream pipeline ------------------------------------------------


def test_segment_tree_gives_each_block_its_hrefs() -> None:
    html = """<html><body><div class="logo"><a href="/"><img src="l.png"></a></div>
    <ul><li><a href="/a">A</a></li><li><a href="/b">B</a> and <a href="/c">C</a></li></ul>
    <p>Text <a href="x.html">x</a> <a>no href</a> <a href="">empty</a></p></body></html>"""
    blocks = segment_tree(LexborHTMLParser(html), SEG)
    by_path = {b.path: list(b.links) for b in blocks if b.links}
    assert by_path["html/body/ul/li"] == ["/b", "/c"]
    # The logo link's div has no text: it goes to the nearest block with text, body.
    assert by_path["html/body"] == ["/", "x.html"]
    assert [list(b.links) for b in blocks if b.path == "html/body/ul/li"] == [["/a"], ["/b", "/c"]]


HREFS = [
    *("a.html", "./a.html", "../a.html", "../../../x/y", "b/../c/./d.html", "?q=1", "/r/../s", "/", "..", "."),
    *("x?y=1#f", "//o.example/p/../q", "https://o.example/a/b?c=d", "c/.hidden", "d..e/f", "g?h=../i"),
]


@pytest.mark.parametrize("base", ["https://h.example/d/e/p.html", "http://h.example:8080/", "https://h.example/d/?x=1"])
def test_absolute_links_agree_with_urljoin(base: str) -> None:
    from urllib.parse import urldefrag, urljoin

    from worker.detect.pagelets import absolute_links

    got = [absolute_links(base, [h]) for h in HREFS]
    want = [[urldefrag(urljoin(base, h))[0]] for h in HREFS]
    assert got == want


def test_absolute_links_resolve_and_dedupe() -> None:
    from worker.detect.pagelets import absolute_links

    got = absolute_links(
        "https://h.example/d/p.html",
        ["/a", "b.html#s", "b.html", "#top", "mailto:x@y", "HTTPS://o.example/Z", "//c.example/", " ../up "],
    )
    assert got == [
        "https://h.example/a",
        "https://h.example/d/b.html",
        "https://o.example/Z",
        "https://c.example/",
        "https://h.example/up",
    ]


def _links_inside_and_outside(sp: object) -> tuple[set[str], set[str]]:
    """The page's absolute links inside its known content container, and all the others."""
    from worker.detect.pagelets import absolute_links

    page = sp.page  # type: ignore[attr-defined]
    tree = LexborHTMLParser(page.html)
    container = tree.css_first(sp.content_selector)  # type: ignore[attr-defined]
    assert container is not None
    inside = set(absolute_links(page.url, [a.attributes.get("href") or "" for a in container.css("a[href]")]))
    every = set(absolute_links(page.url, [a.attributes.get("href") or "" for a in tree.css("a[href]")]))
    return inside, every - inside


@pytest.mark.parametrize("layout", ["blog", "docs", "news"])
def test_clean_page_splits_template_and_content_links_on_generated_sites(layout: str) -> None:
    from worker.params import EngineParams
    from worker.pipeline import decide
    from worker.table import HostTable

    params = EngineParams()
    site = make_site(f"{layout}.example", 30, seed=7, layout=layout, redesign=20)
    table = HostTable(params.table)
    checked = 0
    for i, sp in enumerate(site):
        out = decide(sp.page, table, params)
        assert out.clean is not None
        inside, outside = _links_inside_and_outside(sp)
        assert inside == set(sp.links) and len(outside) >= 10
        if i < 5 or 20 <= i < 25:
            continue  # the host's template (and, after the redesign, the new one) is being learned
        content, template = set(out.clean.content_links), set(out.clean.template_links)
        # Every navigation, header, sidebar and footer link lands in template links ...
        assert outside <= template, (i, outside - template)
        # ... and every in-article link in content links, never in template links.
        assert inside <= content and not inside & template, (i, inside & template)
        checked += 1
    assert checked == 20


def test_link_share_command_counts_container_links(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = make_site("share.example", 20, seed=2)
    path = write_jsonl([sp.page for sp in site], tmp_path / "pages.jsonl")
    (tmp_path / "meta.json").write_text(json.dumps({"content_selector": site[0].content_selector}))
    assert _run_cmd(["templates", str(path), "--link-share", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["host"] == "share.example" and row["pages"] == 20
    assert row["template_links"] > row["content_links"] > 0
    # On a host's first pages the page-level model decides; after them the split is exact here.
    assert row["outside_as_template"] >= 0.9
    assert row["inside_as_content"] == 1.0


# -- the pagelet-shingle DF signal ----------------------------------------------------------


def test_pagelet_signal_marks_navigation_not_articles() -> None:
    from worker.detect.pagelets import PageletSignal
    from worker.params import TableParams

    signal = PageletSignal(TableParams())
    site = make_site("sig.example", 12, seed=5)
    marked: list[set[int]] = []
    for sp in site:
        tree = LexborHTMLParser(sp.page.html)
        marked.append(signal.template_keys(sp.page.host, tree, sp.page.url, SEG))
        blocks = segment_tree(tree, SEG)
        texts = {s.key: s.text for b in blocks for s in b.segments}
        got = {texts[k] for k in marked[-1] if k in texts}
        if len(marked) >= 6:
            assert {"Privacy policy", "Terms of use"} <= got  # footer links pagelet
            assert not any(t in g for g in sp.gold_blocks for t in got if len(t) > 20)
    assert not marked[0]  # nothing is known on the host's first page
    assert len(signal.tables["sig.example"]) > 0


def test_pagelet_signal_command_scores_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = make_site("eval.example", 15, seed=6)
    write_jsonl([sp.page for sp in site], tmp_path / "pages.jsonl.gz", gz=True)
    with gzip.open(tmp_path / "gold.jsonl.gz", "wt") as fh:
        for sp in site:
            fh.write(json.dumps({"url": sp.page.url, "content": sp.gold}) + "\n")
    assert _run_cmd(["pagelet-signal", str(tmp_path), "--quorum", "2"]) == 0
    out = capsys.readouterr().out
    assert "macro F1 without the pagelet signal" in out
    row = next(line for line in out.splitlines() if line.startswith(tmp_path.name))
    f1_without, f1_with = float(row.split()[3]), float(row.split()[7])
    assert 0.5 < f1_without <= 1.0 and 0.5 < f1_with <= 1.0


_SEGMENTS = st.sampled_from(["a", "b.html", ".", "..", "c d", "e%20f", "g.h", "..i", "j.."])


@given(
    base_segs=st.lists(_SEGMENTS, max_size=4),
    href_segs=st.lists(_SEGMENTS, min_size=1, max_size=5),
    lead=st.sampled_from(["", "/", "./", "../"]),
    query=st.sampled_from(["", "?x=1", "?y=../z"]),
)
def test_absolute_links_agree_with_urljoin_on_dotted_paths(
    base_segs: list[str], href_segs: list[str], lead: str, query: str
) -> None:
    from urllib.parse import urljoin

    from worker.detect.pagelets import absolute_links

    base = "https://h.example/" + "/".join(base_segs)
    href = lead + "/".join(href_segs) + query
    assert absolute_links(base, [href]) == [urljoin(base, href)]
