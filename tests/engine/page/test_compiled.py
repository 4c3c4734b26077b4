"""The compiled page walk (engine/page/_walk.pyx) gives exactly the Python walk's result.

Both walks run on the same parsed pages: generated sites, hostile markup from
hypothesis, and the pathological shapes the limits are for. Where the extension is not
built these tests say so and skip; `make test` builds it.
"""

from __future__ import annotations

import html
import os
import random
import subprocess
import sys
import unicodedata
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from detemplate.engine import decision
from detemplate.engine.detectors import clusters, layout, pagelets
from detemplate.engine.detectors.base import tally_python
from detemplate.engine.detectors.layout import checked_region, content_region, content_region_python, region_kernel
from detemplate.engine.detectors.pagelevel import (
    checked_kernel,
    compiled_features,
    features,
    features_kernel,
    load_model,
    model_scores,
    page_features,
)
from detemplate.engine.errors import BadInputError
from detemplate.engine.model import CONTENT, TEMPLATE, Block, BlockVerdict, Segment
from detemplate.engine.page import compiled, cues, segment_tree, walk, walk_python
from detemplate.engine.page.cues import F_COMMENTS, F_IN_COMMENTS, F_IN_OTHER, F_IN_RELATED, F_OTHER, F_RELATED
from detemplate.engine.page.tree import PageTree, main_block, node_columns, text_stats
from detemplate.engine.params import PageletParams, SegmentParams, TableParams
from detemplate.engine.pipeline import block_verdicts_python, kept_text_python, segment_keys_python
from detemplate.engine.table import HostTable
from detemplate.tools.samples import LAYOUTS, make_site
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser
from xxhash import xxh3_64_intdigest

from tests.factories import markup

PARAMS = SegmentParams()
FAST = compiled.walker(PARAMS.block_tags, PARAMS.skip_tags)
needs_fast = pytest.mark.skipif(FAST is None, reason=f"the compiled walk is not in use: {compiled.status()}")

PAGELET_PARAMS = (
    PageletParams(),
    PageletParams(k=1, sketch_size=8, min_links=0, min_anchor_share=0.0),
    PageletParams(k=2, sketch_size=3, min_links=1, min_anchor_share=0.3),
)

TAGS = ["div", "p", "a", "span", "ul", "li", "table", "tr", "td", "script", "b", "nav", "footer", "my-el", "svg", "wbr"]


def _outcome(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except BadInputError as exc:
        return ("dead", exc.reason, exc.detail)


def assert_same(html: str, params: SegmentParams = PARAMS) -> None:
    tree = LexborHTMLParser(html)
    fast = compiled.walker(params.block_tags, params.skip_tags)
    assert fast is not None
    root = tree.root
    assert root is not None
    got_runs: list[int] = []
    expected_runs: list[int] = []
    got_tree = _outcome(lambda: PageTree(*fast.walk(root.mem_id, params.max_depth, params.max_nodes, True, got_runs)))
    expected_tree = _outcome(lambda: walk_python(tree, params, None, expected_runs))
    if isinstance(got_tree, PageTree):
        assert isinstance(expected_tree, PageTree)
        assert replace(got_tree, stats=None, columns=None) == expected_tree
        # The segments' document order: every segment of every block, once.
        assert got_runs == expected_runs
        counts = [0] * len(expected_tree.blocks)
        for b, m in zip(expected_runs[0::2], expected_runs[1::2], strict=True):
            counts[b] += m
        assert counts == [len(block.segments) for block in expected_tree.blocks]
        assert np.array_equal(node_columns(got_tree), node_columns(expected_tree))
        # The text statistics (counted by the compiled walk, by _TextStats in Python) and
        # so every feature are the same.
        assert np.array_equal(text_stats(got_tree), text_stats(expected_tree))
        reference = features(expected_tree)
        assert np.array_equal(features(got_tree), reference)
        # The compiled features: the same doubles, bit for bit, from either walk's tree.
        kernel = features_kernel()
        assert kernel is not None
        assert compiled_features(kernel, got_tree).tobytes() == reference.tobytes()
        assert compiled_features(kernel, expected_tree).tobytes() == reference.tobytes()
        # The compiled tally: every other segment key voted template.
        blocks = got_tree.blocks
        voted = {seg.key for block in blocks for seg in block.segments[::2]}
        assert compiled.kernel("tally")(blocks, voted) == tally_python(blocks, voted)
        # The compiled verdict loop.
        chars, tchars = tally_python(blocks, voted)
        n = len(blocks)
        lists = (
            blocks, [" ".join(seg.text for seg in block.segments) for block in blocks], chars, tchars,
            [i % 3 == 0 for i in range(n)], [("table", "pagelevel")[i % 2] for i in range(n)], ["main"] * n,
        )
        got_verdicts = compiled.kernel("block_verdicts")(*lists, BlockVerdict, TEMPLATE, CONTENT)
        assert got_verdicts == block_verdicts_python(*lists)
        assert all(type(v) is BlockVerdict for v in got_verdicts[0])
        # The kept text in document order, with the runs and without (block order).
        for runs in (got_runs, []):
            text_args = (blocks, lists[1], runs, lists[4], got_verdicts[1])
            assert compiled.kernel("kept_text")(*text_args) == kept_text_python(*text_args)
        # The compiled content region: every block's text new, every other block's, none.
        mod = compiled.module()
        for novel in (chars, [c if i % 2 else 0 for i, c in enumerate(chars)], [0] * n):
            for share in (0.5, 0.8, 1.0):
                assert mod.content_region(
                    got_tree.node_of_block, novel, got_tree.chars, got_tree.achars, got_tree.end, share
                ) == content_region_python(expected_tree, novel, share)
        # The page's segment keys, by the kernel and as the walk hands them over (the same
        # int objects as its segments': the table holds those), and its main block.
        assert mod.segment_keys(blocks) == segment_keys_python(blocks)
        assert got_tree.keys == segment_keys_python(blocks)
        assert {id(key) for key in got_tree.keys[0]} <= {id(seg.key) for block in blocks for seg in block.segments}
        assert got_tree.main == (main_block(expected_tree) if blocks else -1)
        # The clusters' path keys, and the table's new keys (every other segment key held).
        assert mod.path_keys(blocks, xxh3_64_intdigest) == {clusters.path_key(block.path) for block in blocks}
        held = sorted({seg.key for block in blocks for seg in block.segments[1::2]})
        table = HostTable(TableParams())
        table.observe(held)
        assert isinstance(table._entries, mod.Entries)
        assert table.new_chars(blocks) == [
            sum(seg.length for seg in block.segments if seg.key not in set(held)) for block in blocks
        ]
        # The compiled pagelet cut and min-hash keys.
        assert pagelets.pagelet_kernels() is not None
        for pagelet_params in PAGELET_PARAMS:
            assert pagelets.page_sketches(got_tree, pagelet_params) == pagelets.page_sketches_python(
                expected_tree, pagelet_params
            )
    else:
        assert got_tree == expected_tree
    fast_runs: list[int] = []
    python_runs: list[int] = []
    got_blocks = _outcome(lambda: fast.walk(root.mem_id, params.max_depth, params.max_nodes, False, fast_runs))
    assert got_blocks == _outcome(lambda: segment_tree(tree, params, [], python_runs))  # text_nodes: the Python walk
    assert fast_runs == python_runs


@needs_fast
def test_the_walks_agree_on_generated_sites() -> None:
    pages = 0
    for n, site_layout in enumerate(LAYOUTS):
        for site_page in make_site(f"s{n}.example", 6, seed=n, layout=site_layout, redesign=3):
            assert_same(site_page.page.html)
            pages += 1
    assert pages == 6 * len(LAYOUTS)


@needs_fast
def test_the_public_functions_use_the_compiled_walk_with_the_same_result() -> None:
    tree = LexborHTMLParser(make_site("s.example", 1)[0].page.html)
    fast_tree = walk(tree, PARAMS)
    assert fast_tree.stats is not None
    assert replace(fast_tree, stats=None, columns=None) == walk_python(tree, PARAMS)
    assert segment_tree(tree, PARAMS) == segment_tree(tree, PARAMS, [])
    assert compiled.status() == "compiled"


@needs_fast
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    markup(
        TAGS,
        st.sampled_from(['<a href="/x">', '<a href="">', '<div class="nav footer">', '<p id="content">']),
        st.text(min_size=0, max_size=12),
        st.sampled_from(["\u00a0", "\u2003", "\u3000", "\x85", "\x1f", "\x0b", " \n\t", "&nbsp;", "<!-- c -->"]),
        st.sampled_from(
            ["The end. ", "And the", "Für más è", "© 2026", "COPYRIGHT", "All Rights Reserved", "İstanbul",
             "a | b · c » d", "1,2;3:4!5?", 'He said "x."', "(so)", "a\x00b the\x00"]
        ),
        max_size=60,
    )
)
@example(html='<a href="/x">\r</a>:<a>\r')  # a pagelet whose only text is no segment
def test_the_walks_agree_on_arbitrary_markup(html: str) -> None:
    assert_same(html)


@needs_fast
@pytest.mark.parametrize(
    ("html", "params"),
    [
        ("<div>" * 500 + "x" + "</div>" * 500, PARAMS),  # too deep
        ("<div>" * 399 + "x" + "</div>" * 399, PARAMS),  # a leaf block at the depth limit
        ("<div>" * 398 + "<span>x</span>" + "</div>" * 398, PARAMS),
        ("<p>x</p>" * 3000, SegmentParams(max_nodes=2000)),  # too many nodes
        ("<p>x</p>" * 3000, SegmentParams(max_nodes=3003)),
        ("<div class='" + "a" * 100_000 + "'>long class</div>", PARAMS),
        ("<p>a\x00b</p><p>\ufffd\ud7ff\U0001f600</p>", PARAMS),
        ("<html><body></body></html>", PARAMS),
        ("<" + "x" * 40 + ">custom</" + "x" * 40 + ">", PARAMS),
    ],
)
def test_the_walks_agree_at_the_limits(html: str, params: SegmentParams) -> None:
    assert_same(html, params)


@needs_fast
def test_class_and_id_looked_up_again_are_what_the_python_walk_reads() -> None:
    # The compiled walk keeps each class and id pair's hints and layout form by the hash of
    # its bytes: a pair met again (on the same page, on the next) reads the same, and the
    # body's entry (no layout form) is its own.
    pairs = [
        ' class="nav menu-active" id="top"', ' class="nav menu-active"', ' id="top"', ' class="" id=""',
        ' class="x" class="y" id="a" id="b"', ' class="related-posts"', ' class="caf\u00e9 \u00fcber" id="m\u00e9"',
        " class", ' id="' + "i" * 600 + '"',
    ]
    body = "".join(f"<div{pair}><p>text of {i}</p></div>" for i, pair in enumerate(pairs))
    for attrs in ("", pairs[0], pairs[1]):
        for _ in range(2):
            assert_same(f"<html><body{attrs}><div{attrs}>{body}</div>{body}</body></html>")


_HINT_PIECES = [text for text, _bit, _kind, _class_only in cues.HINT_MARKS] + [
    "-", "_", " ", "2", "x", "A", "NAV", "\u212a", "\u0130", "\u00e9", "\u00a0", "\u03a3",
]


@needs_fast
@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_HINT_PIECES), max_size=6), st.lists(st.sampled_from(_HINT_PIECES), max_size=4))
def test_the_compiled_hints_are_the_patterns_bits(cls: list[str], ident: list[str]) -> None:
    pair = ("".join(cls), "".join(ident))
    assert compiled.hints()(pair) == cues.hints(pair)


_CLASS_PIECES = [mark for mark, _bit, _kind, _class_only in cues.VOLATILE_MARKS] + [
    " ", "\u00a0", "\u2003", "-", "nav", "A", "OPEN", "\u00e9", "\u0662", "x",
]


@needs_fast
@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_CLASS_PIECES), max_size=8))
def test_the_compiled_layout_classes_are_the_patterns(pieces: list[str]) -> None:
    cls = "".join(pieces)
    assert compiled.layout_classes()(cls) == cues.layout_form(cls)


def _refused_without(monkeypatch: pytest.MonkeyPatch, chooser: Any, marks: str, dropped: str, python: Any) -> None:
    """`chooser` (one of compiled.py's cached choices) refuses the compiled marks when cues'
    `marks` lack `dropped` (the probes find them saying less than the patterns)."""
    assert chooser() is not python
    chooser.cache_clear()
    try:
        monkeypatch.setattr(cues, marks, tuple(m for m in getattr(cues, marks) if m[0] != dropped))
        assert chooser() is python
    finally:
        monkeypatch.undo()
        chooser.cache_clear()
    assert chooser() is not python


@needs_fast
def test_hints_and_layout_classes_go_by_the_compiled_marks_unless_they_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = compiled.hints()
    assert fast is not cues.hints and type(fast).__name__ == "Hints"
    assert all(fast(pair) == cues.hints(pair) for pair in cues.hint_probes())
    _refused_without(monkeypatch, compiled.hints, "HINT_MARKS", "comments", cues.hints)
    _refused_without(monkeypatch, compiled.layout_classes, "VOLATILE_MARKS", "open", cues.layout_classes)


@needs_fast
def test_whitespace_is_what_python_splits_on() -> None:
    from detemplate.engine.page import _walk  # type: ignore[attr-defined]

    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        ch = chr(code)
        text = f"a{ch}b {ch}"
        expected = " ".join(text.split())
        assert _walk.normalize(text.encode()) == expected, (hex(code), unicodedata.name(ch, "?"))


def test_pure_python_is_chosen_by_the_environment() -> None:
    code = (
        "from detemplate import settings; from detemplate.engine import page; "
        "settings.use_walk(settings.load_walk()); print(page.status())"
    )
    env = {**os.environ, "DETEMPLATE_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "python (DETEMPLATE_PURE_PYTHON is set)"


@needs_fast
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["<", "</", "<div", "</div>", "<DIV>", "<p>", "<br>", "<optgroup>", "<optgroupx>", "<b1>"]),
            st.sampled_from(["<a", "<A>", "</a>", "<li>", "<section>", "<my-element>", "<<div>", "</ div>", "<1>"]),
            st.text(alphabet="<>/ divpé😀", max_size=8),
        ),
        max_size=80,
    )
)
def test_the_compiled_tag_scans_agree_with_python(parts: list[str]) -> None:
    from detemplate.engine.page import _walk  # type: ignore[attr-defined]
    from detemplate.engine.page.guards import NOT_NESTING, nesting_estimate

    html = "".join(parts)
    assert _walk.count_tags(html) == html.count("<")
    assert _walk.nesting_estimate(html, NOT_NESTING) == nesting_estimate(html)


@needs_fast
@pytest.mark.parametrize("wide", ["", "\u00e9", "\U0001f600"])  # 1-, 2- and 4-byte strings
def test_the_tag_count_is_exact_across_its_chunks(wide: str) -> None:
    # The compiled count adds up chunks of 255 (1-byte) or 65,535 (2-byte) characters in their
    # own width: lengths on both sides of each chunk's end, all "<" (a chunk's largest count).
    from detemplate.engine.page import _walk  # type: ignore[attr-defined]

    for n in (0, 1, 254, 255, 256, 510, 511, 65_534, 65_535, 65_536, 131_071, 131_072, 200_001):
        for fill in ("<", "a<", "<<a"):
            html = (fill * (n // len(fill) + 1))[:n] + wide
            assert _walk.count_tags(html) == html.count("<"), (n, fill)


@needs_fast
@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=120),
    others=st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=40),
    num_perm=st.sampled_from([1, 8, 64, 128]),
)
def test_the_compiled_cluster_signatures_agree_with_numpy(keys: list[int], others: list[int], num_perm: int) -> None:
    from detemplate.engine.page import _walk  # type: ignore[attr-defined]

    salts = clusters.MinHasher(num_perm, 1).salts
    sig = _walk.minhash32(set(keys), salts)
    assert sig == clusters.minhash32_python(set(keys), salts)
    # The high halves of MinHasher's signature, which the batch clustering uses.
    assert np.array_equal(
        np.frombuffer(sig, dtype="<u4"), (clusters.MinHasher(num_perm, 1).signature(set(keys)) >> np.uint64(32))
    )
    other = _walk.minhash32(others + keys[: len(keys) // 2], salts)
    assert _walk.agree32(sig, other) == clusters.agree32_python(sig, other)
    for bands in {1, max(1, num_perm // 4), num_perm}:
        got = _walk.bands32(sig, bands, clusters._BAND_MULT, clusters._BAND_SALT)
        assert got == clusters.bands32_python(sig, bands, clusters._BAND_MULT, clusters._BAND_SALT)
        assert len(got) == bands


@needs_fast
@given(st.lists(st.text(alphabet="htmlbodyiv/-é😀\x00 ", max_size=30), max_size=20))
def test_the_compiled_path_keys_agree_with_python(paths: list[str]) -> None:
    blocks = [Block(path, [], i, ()) for i, path in enumerate(paths)]
    assert compiled.module().path_keys(blocks, xxh3_64_intdigest) == {clusters.path_key(path) for path in paths}
    assert clusters.page_paths(blocks, "blocks") == {clusters.path_key(path) for path in paths}


@st.composite
def _warm_ballots(draw: st.DrawFn) -> tuple[object, ...]:
    """Arguments of decision.block_decisions_python: one warm page's evidence, with ties."""
    n = draw(st.integers(min_value=0, max_value=30))
    chars = draw(st.lists(st.integers(min_value=0, max_value=400), min_size=n, max_size=n))
    tchars = [draw(st.integers(min_value=0, max_value=c)) for c in chars]
    shares = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0])
    lists = st.lists(shares, min_size=n, max_size=n)
    outright = draw(st.none() | st.builds(bytearray, st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    region = draw(st.booleans())
    nodes = sorted(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))) if region else None
    node_chars = draw(st.lists(st.integers(0, 400), min_size=41, max_size=41)) if region else []
    node_achars = [draw(st.integers(0, c)) for c in node_chars]
    first = draw(st.integers(0, 40)) if region else 0
    end = draw(st.integers(first, 41)) if region else 0
    novelty, presence, scores = draw(st.none() | lists), draw(st.none() | lists), draw(st.none() | lists)
    novel = draw(st.none() | st.just([draw(st.integers(min_value=0, max_value=c)) for c in chars]))
    params = [draw(shares) for _ in range(6)]
    ratios = st.sampled_from([0.0, 0.5, 1.0, 3.0, 300.0])
    return (
        chars, tchars, outright, nodes, node_chars, node_achars, novel, first, end, novelty, presence, scores,
        *params, draw(ratios), draw(ratios), draw(shares),
    )


@needs_fast
@settings(max_examples=300, deadline=None)
@given(_warm_ballots())
def test_the_compiled_decision_agrees_with_python(args: tuple[object, ...]) -> None:
    from detemplate.engine.decision import block_decisions_python
    from detemplate.engine.model import METHOD_PAGELET, METHOD_PAGELEVEL, METHOD_TABLE

    got = compiled.module().block_decisions(*args, METHOD_TABLE, METHOD_PAGELET, METHOD_PAGELEVEL)
    assert got == block_decisions_python(*args)  # type: ignore[arg-type]


@needs_fast
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 1e-4, 0.01, 0.5, 0.99, 1.0]), st.integers(0, 300)), max_size=30),
    st.sampled_from([0.0, 0.2, 0.5, 0.7, 1.0]),
)
def test_the_compiled_text_level_agrees_with_python(blocks: list[tuple[float, int]], quantile: float) -> None:
    from detemplate.engine.decision import text_level_python

    scores, chars = [b[0] for b in blocks], [b[1] for b in blocks]
    assert compiled.module().text_level(scores, chars, quantile) == text_level_python(scores, chars, quantile)


@needs_fast
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 6_000), st.sampled_from([0.05, 0.5, 0.93]))
def test_the_compiled_text_level_sorts_long_pages_as_python_does(seed: int, n: int, quantile: float) -> None:
    """Past the first gaps of the compiled sort (page/_walk.pyx `_sort`): thousands of blocks,
    half of their scores tied."""
    from detemplate.engine.decision import text_level_python

    rng = np.random.default_rng(seed)
    scores = np.where(rng.random(n) < 0.5, rng.choice([0.0, 0.25, 1.0], n), rng.random(n)).tolist()
    chars = rng.integers(0, 400, n).tolist()
    assert compiled.module().text_level(scores, chars, quantile) == text_level_python(scores, chars, quantile)


def test_the_clusters_use_the_compiled_signatures_when_the_walk_is_compiled() -> None:
    is_compiled = compiled.module() is not None
    assert (clusters.kernels().minhash32 is not clusters.minhash32_python) == is_compiled


def test_the_page_level_features_are_compiled_when_the_walk_is() -> None:
    is_compiled = compiled.module() is not None
    assert (features_kernel() is not None) == is_compiled
    tree = walk(LexborHTMLParser(make_site("s.example", 1)[0].page.html), PARAMS)
    X = features(tree)
    assert page_features(tree).tobytes() == X.tobytes()
    # The scores: the same bits as the reference's, for every count of rows (the kernel adds
    # four rows side by side), and the logistic function of X @ weights.
    model = load_model()
    for rows in (X, X[:1], X[:4], X[:7], X[:0]):
        assert model_scores(model, rows).tobytes() == model.scores(rows).tobytes()
    nodes = tree.node_of_block
    assert model_scores(model, X, nodes).tobytes() == model.scores(X)[nodes].tobytes()
    assert model_scores(model, X, nodes[5:]).tobytes() == model.scores(X)[nodes[5:]].tobytes()
    plain = 1.0 / (1.0 + np.exp(-np.clip(X @ model.weights - model.offset, -30.0, 30.0)))
    assert np.allclose(model.scores(X), plain, rtol=1e-12, atol=1e-15)


@needs_fast
def test_a_features_kernel_that_differs_on_the_probe_page_is_not_used() -> None:
    kernel = features_kernel()

    class Off:
        put_columns = staticmethod(kernel.put_columns)
        row_scores = staticmethod(kernel.row_scores)

        @staticmethod
        def page_features(X, *args):  # type: ignore[no-untyped-def]
            written = kernel.page_features(X, *args)
            X[-1, 3] += 1e-12  # one feature of one node off by a little
            return written

    class LogsOff:
        page_features = staticmethod(kernel.page_features)
        row_scores = staticmethod(kernel.row_scores)

        @staticmethod
        def put_columns(X, columns, values):  # type: ignore[no-untyped-def]
            kernel.put_columns(X, columns, values)
            X[0, columns[-1]] += 1e-12  # one log feature off by a little

    class ScoresOff:
        page_features = staticmethod(kernel.page_features)
        put_columns = staticmethod(kernel.put_columns)

        @staticmethod
        def row_scores(X, weights, offset, out):  # type: ignore[no-untyped-def]
            kernel.row_scores(X, weights, offset, out)
            if len(out) > 4:
                out[4] = np.nextafter(out[4], 1.0)  # the first row past the four added side by side

    class Failing:
        put_columns = staticmethod(kernel.put_columns)
        row_scores = staticmethod(kernel.row_scores)

        @staticmethod
        def page_features(*args):  # type: ignore[no-untyped-def]
            raise TypeError("a build for another signature")

    assert checked_kernel(compiled.module()) is not None
    assert checked_kernel(Off) is None
    assert checked_kernel(LogsOff) is None
    assert checked_kernel(ScoresOff) is None
    assert checked_kernel(Failing) is None
    assert checked_kernel(object()) is None


@needs_fast
def test_the_log_columns_round_trip_checks_its_arrays() -> None:
    mod = features_kernel()
    X = np.arange(12.0).reshape(3, 4)
    columns = np.asarray([1, 3], dtype=np.intp)
    with pytest.raises(ValueError, match="do not fit"):
        mod.row_scores(X, np.zeros(3), 0.0, np.empty(3))
    with pytest.raises(ValueError, match="out of range"):
        mod.row_scores(X, np.zeros(4), 0.0, np.empty(2), [0, 3])
    mod.put_columns(X, columns, np.full((3, 2), -1.0))
    assert X.tolist() == [[0.0, -1.0, 2.0, -1.0], [4.0, -1.0, 6.0, -1.0], [8.0, -1.0, 10.0, -1.0]]
    with pytest.raises(ValueError, match="out of range"):
        mod.put_columns(X, np.asarray([1, 4], dtype=np.intp), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="do not fit"):
        mod.put_columns(X, columns, np.zeros((2, 2)))


_SITE_TREE = walk(LexborHTMLParser(make_site("r.example", 2, layout="news")[1].page.html), PARAMS)


@needs_fast
@settings(max_examples=200, deadline=None)
@given(
    novel=st.lists(st.integers(min_value=0, max_value=5000), min_size=len(_SITE_TREE.blocks),
                   max_size=len(_SITE_TREE.blocks)),
    share=st.floats(min_value=0.0, max_value=1.0),
)
def test_the_compiled_content_region_agrees_with_python(novel: list[int], share: float) -> None:
    tree = _SITE_TREE
    got = compiled.module().content_region(tree.node_of_block, novel, tree.chars, tree.achars, tree.end, share)
    assert got == content_region_python(tree, novel, share)


def test_the_content_region_is_compiled_when_the_walk_is() -> None:
    assert (region_kernel() is not None) == (compiled.module() is not None)
    novel = [sum(seg.length for seg in block.segments) for block in _SITE_TREE.blocks]
    assert content_region(_SITE_TREE, novel, 0.8) == content_region_python(_SITE_TREE, novel, 0.8) > 0


@needs_fast
def test_a_region_kernel_that_differs_on_the_probe_page_is_not_used() -> None:
    mod = compiled.module()

    class Off:
        @staticmethod
        def content_region(node_of_block, novel, chars, achars, end, share):  # type: ignore[no-untyped-def]
            found = mod.content_region(node_of_block, novel, chars, achars, end, share)
            return found + 1 if share == 0.8 else found  # one share's node off

    assert checked_region(mod) is mod
    assert checked_region(Off) is None
    assert checked_region(object()) is None
    assert checked_region(None) is None
    assert region_kernel() is mod


_SITE_PATHS = [_SITE_TREE.layout[node] for node in _SITE_TREE.node_of_block]


@needs_fast
@settings(max_examples=200, deadline=None)
@given(
    novel=st.lists(st.integers(min_value=0, max_value=3), min_size=len(_SITE_TREE.blocks),
                   max_size=len(_SITE_TREE.blocks)),
    region=st.integers(min_value=0, max_value=len(_SITE_TREE.parent) - 1),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_the_compiled_layout_keys_and_shares_agree_with_python(novel: list[int], region: int, seed: int) -> None:
    tree, mod = _SITE_TREE, compiled.module()
    found = layout.layout_keys_python(tree, _SITE_PATHS, novel, region)
    assert mod.layout_keys(
        _SITE_PATHS, novel, tree.parent, tree.container, tree.end, region, layout._NEW_TEXT_SALT,
        layout._CONTAINER_SALT, layout._PAGES, layout._KEEP, layout.TAG,
    ) == found
    keys, seen, fresh, chain, enclosing = found
    assert keys == sorted(set(keys)) and layout._PAGES in keys
    assert len(keys) == len({*seen.values(), *enclosing, layout._PAGES}) + len(
        {path for path, n in zip(_SITE_PATHS, novel, strict=True) if n}
    )
    # The DFs of the page's keys (the pages' the largest), and the table's of the others.
    pages = 20 + seed % 7
    dfs = [1 + (seed * (i + 3)) % pages for i in range(len(keys))]
    dfs[keys.index(layout._PAGES)] = pages
    table_df = {key: (seed + i) % 5 for i, key in enumerate(fresh.values())}.__getitem__
    mine = layout.LayoutPage(keys, _SITE_PATHS, novel, seen, fresh, chain, enclosing, layout._PAGES, None)
    got = mod.layout_shares(keys, dfs, _SITE_PATHS, seen, fresh, enclosing, layout._PAGES, table_df)
    assert got == layout.layout_shares_python(mine, dfs, table_df)
    assert len(got[1]) == len(got[2]) == len(_SITE_PATHS)


@needs_fast
def test_a_layout_kernel_that_differs_on_the_probe_page_is_not_used() -> None:
    mod = compiled.module()

    class Off:
        layout_keys = staticmethod(mod.layout_keys)

        @staticmethod
        def layout_shares(keys, dfs, paths, seen, fresh, enclosing, pages_key, table_df):  # type: ignore[no-untyped-def]
            shares, novelty, presence, pages = mod.layout_shares(
                keys, dfs, paths, seen, fresh, enclosing, pages_key, table_df
            )
            return shares, novelty, presence[::-1], pages  # the blocks' presence out of order

    assert layout.checked_layout(mod) is mod
    assert layout.checked_layout(Off) is None
    assert layout.checked_layout(None) is None
    assert layout.layout_kernel() is mod


_ASIDE_SITE = walk(LexborHTMLParser(make_site("a.example", 2, layout="blog")[1].page.html), PARAMS)


@needs_fast
@settings(max_examples=200, deadline=None)
@given(
    main=st.integers(min_value=0, max_value=len(_ASIDE_SITE.blocks) - 1),
    marks=st.lists(st.sampled_from((0, F_COMMENTS, F_RELATED, F_OTHER, F_IN_COMMENTS, F_IN_RELATED, F_IN_OTHER)),
                   min_size=len(_ASIDE_SITE.parent), max_size=len(_ASIDE_SITE.parent)),
    beside=st.lists(st.sampled_from(("form", "nav", "footer", "ul", "li", "p")), max_size=4),
)
def test_the_compiled_aside_blocks_agree_with_python(main: int, marks: list[int], beside: list[str]) -> None:
    """Each block as the main text, sections named anywhere, any elements beside the content."""
    tree = replace(_ASIDE_SITE, flags=[f | m for f, m in zip(_ASIDE_SITE.flags, marks, strict=True)], main=main)
    constants = (*decision._ASIDE_CONSTANTS[:-1], tuple((name, f"role-{name}") for name in beside))
    got = compiled.module().aside_blocks(tree.flags, tree.node_of_block, tree.tag, tree.parent, tree.end, tree.chars,
                                         tree.node_of_block[main], *constants)
    original = decision._BESIDE
    try:
        decision._BESIDE = constants[-1]
        assert got == decision.aside_blocks_python(tree)
    finally:
        decision._BESIDE = original


@needs_fast
def test_an_aside_kernel_that_differs_on_the_probe_page_is_not_used() -> None:
    mod = compiled.module()

    class Off:
        @staticmethod
        def aside_blocks(*args):  # type: ignore[no-untyped-def]
            return {i: "other" for i in mod.aside_blocks(*args)}  # every role "other"

    assert decision.checked_aside(mod) is mod
    assert decision.checked_aside(Off) is None
    assert decision.checked_aside(None) is None
    assert decision.aside_kernel() is mod


@needs_fast
def test_the_layout_and_aside_kernels_refuse_lists_that_do_not_fit() -> None:
    """They read the lists unchecked by index: lists of other lengths are an error, not a crash."""
    tree, mod = _SITE_TREE, compiled.module()
    salts = (layout._NEW_TEXT_SALT, layout._CONTAINER_SALT, layout._PAGES, layout._KEEP, layout.TAG)
    novel = [0] * len(_SITE_PATHS)
    with pytest.raises(ValueError):
        mod.layout_keys(_SITE_PATHS, novel[1:], tree.parent, tree.container, tree.end, 0, *salts)
    with pytest.raises(ValueError):
        mod.layout_keys(_SITE_PATHS, novel, tree.parent, tree.container[1:], tree.end, 0, *salts)
    with pytest.raises(ValueError):
        mod.layout_keys(_SITE_PATHS, novel, tree.parent, tree.container, tree.end, len(tree.parent), *salts)
    keys = mod.layout_keys(_SITE_PATHS, novel, tree.parent, tree.container, tree.end, 0, *salts)[0]
    with pytest.raises(ValueError):
        mod.layout_shares(keys, [1] * (len(keys) - 1), _SITE_PATHS, {}, {}, [], layout._PAGES, None)
    with pytest.raises(ValueError):
        mod.aside_blocks(tree.flags, tree.node_of_block, tree.tag, tree.parent, tree.end, tree.chars[1:], 0,
                         *decision._ASIDE_CONSTANTS)


@needs_fast
def test_the_compiled_roles_are_the_reference_s() -> None:
    """Every branch of a removed block's role: kept, its section named by the markup (removed
    by the markup, the model, or the table, which leaves it template), page-specific text the
    model removed (related where its node is mostly links, other where not, template where
    under half of it is new), and pages where page-specific text is not told apart."""
    mod = compiled.module()
    rng = random.Random(7)
    methods = ("table", "pagelet", "pagelevel", "markup", "cold")
    seen: set[str] = set()
    for _ in range(300):
        n = rng.randint(0, 12)
        nodes = sorted(rng.sample(range(30), n))
        node_chars = [rng.randint(0, 40) for _ in range(30)]
        node_achars = [rng.randint(0, c) for c in node_chars]
        chars = [rng.randint(0, 40) for _ in range(n)]
        novel = [rng.randint(0, c) for c in chars]
        template = [rng.random() < 0.7 for _ in range(n)]
        method = [rng.choice(methods) for _ in range(n)]
        aside = {i: rng.choice(("comments", "related")) for i in range(n) if rng.random() < 0.3}
        own = rng.random() < 0.8
        args = (template, method, aside, nodes if own else None, node_chars if own else None,
                node_achars if own else None, novel if own else None, chars)
        expected = decision.block_roles_python(*args)
        assert mod.block_roles(*args, *_ROLE_LABELS) == expected
        seen.update(expected)
    assert seen == {"main", "template", "comments", "related", "other"}  # every branch taken
    with pytest.raises(ValueError):
        mod.block_roles([True], [], {}, None, None, None, None, [1], *_ROLE_LABELS)


_ROLE_LABELS = (decision.ROLE_MAIN, decision.ROLE_TEMPLATE, decision.ROLE_RELATED, decision.ROLE_OTHER,
                "markup", "pagelevel")


def test_the_verdicts_split_the_hrefs_by_verdict() -> None:
    """The hrefs of the kept blocks and of the removed ones, each in block order, as written."""
    blocks = [
        Block("/a", [Segment(1, "x", 1)], 0, ("/1", "/2")), Block("/b", [Segment(2, "y", 1)], 1, ()),
        Block("/c", [Segment(3, "z", 1)], 2, ("/3", "/1")), Block("/d", [Segment(4, "w", 1)], 3, ("#t",)),
    ]
    lists = (blocks, ["x", "y", "z", "w"], [1] * 4, [0] * 4, [True, False, False, True], ["table"] * 4, ["main"] * 4)
    expected = block_verdicts_python(*lists)
    assert expected[2:] == (["/3", "/1"], ["/1", "/2", "#t"])
    kernel = compiled.kernel("block_verdicts")
    if kernel is not None:
        assert kernel(*lists, BlockVerdict, TEMPLATE, CONTENT) == expected


def test_the_tally_and_the_verdicts_are_compiled_when_the_walk_is() -> None:
    for name in ("tally", "block_verdicts", "block_roles", "Entries", "path_keys", "block_decisions", "segment_keys",
                 "text_level"):
        assert (compiled.kernel(name) is not None) == (compiled.module() is not None)
    # A table's entries are the extension's where it is in use (and agreed with the dicts).
    assert isinstance(HostTable(TableParams())._entries, dict) == (compiled.module() is None)


def test_the_pagelets_are_compiled_when_the_walk_is() -> None:
    assert (pagelets.pagelet_kernels() is not None) == (compiled.module() is not None)
    tree = walk(LexborHTMLParser(make_site("s.example", 1)[0].page.html), PARAMS)
    for pagelet_params in (*PAGELET_PARAMS, PageletParams(w=3)):  # w > 1: the Python code runs
        count, sketches = pagelets.page_sketches(tree, pagelet_params)
        assert sketches
        assert (count, sketches) == pagelets.page_sketches_python(tree, pagelet_params)


@needs_fast
def test_pagelet_kernels_that_differ_on_the_probe_page_are_not_used() -> None:
    mod = compiled.module()

    class Off:
        pagelet_rows = mod.pagelet_rows

        @staticmethod
        def sketch_keys1(*args):  # type: ignore[no-untyped-def]
            rows = mod.sketch_keys1(*args)
            return [(row[0] ^ 1 << 40, *row[1:]) for row in rows]  # one min-hash off

    assert pagelets.checked_kernels(mod) is mod
    assert pagelets.checked_kernels(Off) is None
    assert pagelets.checked_kernels(object()) is None
    assert pagelets.checked_kernels(None) is None
    assert pagelets.pagelet_kernels() is mod  # the check leaves the choice as it was


# -- the compiled walk's dependency: selectolax's private ABI -------------------------------------

# The compiled walk reads lexbor's tree through the functions selectolax's extension
# exports and one struct offset it finds on a probe page: tested with these versions.
# pyproject.toml pins the same range; a new selectolax is tried here first.
TESTED_SELECTOLAX = (">=1.0.2", "<1.1")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def test_selectolax_is_in_the_tested_range_and_pinned_to_it() -> None:
    import re
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    installed = _version(version("selectolax"))
    low, high = (_version(bound.lstrip("<>=")) for bound in TESTED_SELECTOLAX)
    assert low <= installed < high, f"selectolax {version('selectolax')} is outside the tested {TESTED_SELECTOLAX}"
    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if re.match(r"selectolax\b", d)]
    assert pins == ["selectolax" + ",".join(TESTED_SELECTOLAX)]


def test_the_compiled_walk_loads_where_a_c_compiler_is() -> None:
    import shutil

    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the package installs without the compiled walk")
    assert compiled.status() == "compiled"


@needs_fast
def test_keys_are_hashed_in_c_only_when_they_equal_xxhash() -> None:
    import importlib

    from xxhash import xxh3_64_intdigest

    mod = compiled.module()
    assert mod is not None
    library = importlib.import_module("xxhash._xxhash").__file__ or ""
    page = "<html><body><div><p>one <b>two</b></p><ul><li><a href=/a>A</a> <a href=/b>B</a></li></ul></div></body>"
    params = SegmentParams()
    try:
        # A function that disagrees is refused: the walk then hashes through it (here: wrongly, on purpose).
        assert mod.init_hash(library, lambda data: 7, [b"probe"]) is not None
        assert mod.init_hash("/nonexistent/library.so", xxh3_64_intdigest, [b"probe"]) is not None
    finally:
        assert mod.init_hash(library, xxh3_64_intdigest, [b"", b"probe"]) is None
    fast, slow = walk(LexborHTMLParser(page), params), walk_python(LexborHTMLParser(page), params)
    assert fast.blocks and fast.blocks == slow.blocks
    assert fast.layout == slow.layout and fast.container == slow.container


# Words and characters for the stopword count and the copyright marks outside ASCII: the
# stopwords with and without accents, in any case; the two characters past ASCII that
# lower-case to ASCII letters (U+0130, U+212A); words as long as the longest stopwords, and
# longer, with accents (the walk looks up no word past that length); characters of each width
# of str (one, two and four bytes); white space that only Unicode calls so; "©".
SCRIPT_PIECES = [
    "the", "The", "THE", "of", "und", "für", "FÜR", "Für", "más", "MÁS", "è", "È", "più", "İ", "i", "\u212a", "k",
    "©", "copyright", "COPYRIGHT", "CopyRİght", "copyr\u0130ght", "all rights reserved", "ALL RIGHTS RESERVED",
    "rights", "right", "g", " ", " ", "\xa0", "\u2003", "\u3000", "\x85", "\x1c", "é", "ß", "Σ", "ǅ", "a", "x",
    "which", "WHİCH", "wöuld", "thèir", "nicht", "Über", "\U0001f600", "\u4e2d\u6587",
    # runs of plain letters (lower-case ASCII but "g") past a packed word's 8 letters
    "themselves", "ourselves", "abcdefhijklmnop", "a.", "z,", "Xyz",
]


@needs_fast
@pytest.mark.parametrize(
    "body",
    [
        "<p>All RIGHTS<br>reserved</p>",  # a mark across two segments of one node
        "<p>All rights</p><p>reserved</p>",  # not one: two nodes
        "<div>copy<b>right</b> 2024<br>gig rig right</div><div>Right-hand g<br>G</div>",
        "<p>\u00a9<br>x</p><p>rïght</p><p>ri<br>ght</p>",
    ],
)
def test_the_walks_find_copyright_marks_alike_across_segments(body: str) -> None:
    assert_same(f"<body>{body}</body>")


def _decoded_chars(data: bytes) -> int:
    try:
        return len(data.decode())
    except UnicodeDecodeError:
        return -1


@needs_fast
@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=12),
        st.text(max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.lists(st.sampled_from([b"a", b"\xc2", b"\xdf", b"\xe0", b"\xed", b"\xef", b"\xf0", b"\xf4", b"\xf5",
                                  b"\x80", b"\x8f", b"\x90", b"\x9f", b"\xa0", b"\xbf", b"\xc0", b"\xff"]),
                 max_size=6).map(b"".join),
    )
)
def test_the_walk_counts_the_characters_of_the_utf8_python_decodes(data: bytes) -> None:
    assert compiled.module().utf8_chars(data) == _decoded_chars(data)


@needs_fast
def test_the_walks_white_space_is_what_split_parts_words_at() -> None:
    mod = compiled.module()
    assert [c for c in range(sys.maxunicode + 1) if mod.is_space(c)] == [
        c for c in range(sys.maxunicode + 1) if chr(c).isspace()
    ]


@needs_fast
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12) | st.text(alphabet="ab é€😀", max_size=12).map(str.encode))
@example(data=b"")
@example(data=b"a")
@example(data=b"plain ascii text")
@example(data=b"ascii then \xff")
def test_the_walks_decoding_is_pythons(data: bytes) -> None:
    assert compiled.module().utf8_str(data) == data.decode("utf-8", "replace")


@needs_fast
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a.bé€😀", max_size=4), st.text(alphabet="a.bé€😀", max_size=4))
@example(a="..", b="..")
@example(a="ab", b="a\xe9")  # the same length, two kinds
@example(a="\u20ac", b="\u20ad")
def test_the_walks_str_equality_is_pythons(a: str, b: str) -> None:
    mod = compiled.module()
    assert mod.same(a, b) == (a == b)
    assert mod.same(a, "".join(list(a)))  # equal, not the same object


@needs_fast
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(SCRIPT_PIECES), max_size=14).map("".join), min_size=1, max_size=5))
@example(texts=["CopyRİght \u212anow the für", "ALL RIGHTS RESERVED\xa0und", "x\u3000THE\x85of ©"])
@example(texts=["themselves ourselvesthe abcdefhijklmnop. Themselves,copyright", "thè themselvesé ab\u3000cd"])
def test_the_walks_count_stopwords_and_marks_alike_in_any_script(texts: list[str]) -> None:
    assert_same("<body>" + "".join(f"<p>{html.escape(t)}</p>" for t in texts) + "</body>")
