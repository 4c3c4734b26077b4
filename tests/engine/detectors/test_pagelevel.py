"""detemplate.engine.detectors.pagelevel: the walk, the features, the model file, the pipeline's use of it, training."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from detemplate.cli import main
from detemplate.engine.detectors.isotonic import is_monotone
from detemplate.engine.detectors.pagelevel import (
    FEATURE_NAMES,
    N_FEATURES,
    PageLevelModel,
    block_scores,
    features,
    load_model,
)
from detemplate.engine.errors import BadInputError, ConfigError
from detemplate.engine.model import METHOD_MARKUP, METHOD_PAGELEVEL, TEMPLATE
from detemplate.engine.page import parse, segment_tree, walk
from detemplate.engine.page.cues import F_IN_A, F_IN_FOOTER, F_IN_NAV, F_THINT
from detemplate.engine.params import EngineParams, PageLevelParams, RegionParams, SegmentParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.tools.train import LabelParams, collect, fit_logistic

from tests.factories import interleave, make_page, make_site, write_jsonl

PARAMS = EngineParams()
SP = PARAMS.segment

PAGE = """<html><body>
<nav class="site-nav"><ul><li><a href="/">Home</a></li><li><a href="/a">About us</a></li></ul></nav>
<div id="main-content"><div><h1>A title</h1></div>
<div>First paragraph of the article, with <a href="/x">a link</a> inside it. It goes on.</div>
<section><div>Nested paragraph, long enough to be prose, with commas, clauses, and an end.</div>
<div>Another paragraph of the article, as long, with commas, clauses, and its own end.</div></section>
<div class="empty"><span> </span></div>
</div>
<footer><div>Copyright 2024 Example</div></footer>
</body></html>"""


@pytest.mark.parametrize("mode", ["tag", "tag_class", "tag_id_class"])
@pytest.mark.parametrize("layout", ["blog", "docs", "news"])
def test_walk_cuts_the_blocks_of_segment_tree(mode: str, layout: str) -> None:
    params = SegmentParams(path_mode=mode)
    for sp in make_site("w.example", 3, seed=4, layout=layout):
        tree = parse(sp.page.html, params)
        assert walk(tree, params).blocks == segment_tree(tree, params)
    tree = parse(PAGE, params)
    assert walk(tree, params).blocks == segment_tree(tree, params)


def test_walk_collects_the_block_tree_and_cues() -> None:
    page = walk(parse(PAGE, SP), SP)
    n = len(page.parent)
    assert page.parent[0] == -1
    assert all(0 <= page.parent[i] < i for i in range(1, n))  # parents first: document order
    assert len(page.node_of_block) == len(page.blocks)
    texts = dict(zip(page.text, range(n), strict=True))
    first = texts["First paragraph of the article, with a link inside it. It goes on."]
    assert page.achars[first] == len("a link")
    assert page.links[first] == 1
    home = texts["Home"]
    assert page.achars[home] == page.chars[home] == 4
    assert page.flags[home] & F_IN_NAV and page.flags[home] & (F_THINT << 2)
    assert not page.flags[home] & F_IN_A  # the anchor flag is the walk's own
    assert page.flags[texts["Copyright 2024 Example"]] & F_IN_FOOTER
    # Subtrees are contiguous in document order: a node's children lie in [i, end[i]).
    assert page.end[0] == n
    assert all(i < page.end[i] <= page.end[page.parent[i]] for i in range(1, n))
    assert all(page.parent[i] < i < page.end[page.parent[i]] for i in range(1, n))
    assert page.start == sorted(page.start)


def test_walk_keeps_segment_tree_limits() -> None:
    deep = "<html><body>" + "<div>" * 50 + "x" + "</div>" * 50 + "</body></html>"
    with pytest.raises(BadInputError):
        walk(parse(deep, SegmentParams(max_depth=20)), SegmentParams(max_depth=20))


def test_features_shape_and_main_content() -> None:
    page = walk(parse(PAGE, SP), SP)
    X = features(page)
    assert X.shape == (len(page.parent), N_FEATURES)
    assert np.isfinite(X).all()
    in_main = X[:, FEATURE_NAMES.index("in_main")]
    assert in_main.sum() < len(in_main)
    nested = page.text.index("Nested paragraph, long enough to be prose, with commas, clauses, and an end.")
    assert in_main[nested] == 1.0
    assert in_main[page.text.index("Home")] == 0.0
    assert (X[:, FEATURE_NAMES.index("bias")] == 1.0).all()


def test_shipped_model_separates_navigation_from_prose() -> None:
    page = walk(parse(PAGE, SP), SP)
    scores = block_scores(page, load_model(), 0.0)
    by_text = {" ".join(s.text for s in b.segments): float(x) for b, x in zip(page.blocks, scores, strict=True)}
    prose = by_text["Nested paragraph, long enough to be prose, with commas, clauses, and an end."]
    assert by_text["Home"] > 0.5 > prose
    assert by_text["Copyright 2024 Example"] > prose


def test_smoothed_scores_are_monotone_on_the_tree() -> None:
    page = walk(parse(make_site("m.example", 1, seed=2, layout="news")[0].page.html, SP), SP)
    model = load_model()
    from detemplate.engine.detectors.isotonic import isotonic_tree
    from detemplate.engine.detectors.pagelevel import node_weights

    x = model.scores(features(page))
    y, _ = isotonic_tree(x, page.parent, 0.2, node_weights(page, "log"))
    assert is_monotone(y, page.parent)
    smoothed = block_scores(page, model, 0.2, "log")
    differ = np.flatnonzero(~np.isclose(smoothed, y[page.node_of_block]))
    assert len(differ) <= 1 and (smoothed[differ] == 0.0).all()  # the page's main text is protected


def test_model_json_round_trip_and_mismatch(tmp_path: Path) -> None:
    model = load_model()
    again = PageLevelModel.from_json(json.loads(json.dumps(model.to_json())))
    X = features(walk(parse(PAGE, SP), SP))
    assert np.allclose(model.scores(X), again.scores(X), atol=1e-6)
    data = model.to_json()
    data["features"] = [*FEATURE_NAMES[:-1], "something_else"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError):
        load_model(str(bad))
    with pytest.raises(ConfigError):
        load_model(str(tmp_path / "missing.json"))


def test_cold_host_page_is_cleaned_by_the_model() -> None:
    site = make_site("fresh.example", 1, seed=9, layout="news")
    outcome = decide(site[0].page, HostTable(PARAMS.table), PARAMS)
    clean = outcome.clean
    assert clean is not None and clean.page_no == 1
    assert {b.method for b in clean.blocks} == {METHOD_PAGELEVEL}
    assert any(b.verdict == TEMPLATE for b in clean.blocks)
    # The content survives, and the template goes, from the host's first page on.
    gold = site[0].gold_blocks
    assert sum(len(g) for g in gold if g in clean.text) > 0.9 * sum(len(g) for g in gold)
    removed = [t for t in site[0].template_texts if t not in clean.text]
    assert len(removed) > 0.8 * len(site[0].template_texts)


def test_disabled_model_leaves_the_table_alone() -> None:
    params = dataclasses.replace(PARAMS, pagelevel=PageLevelParams(enabled=False))
    outcome = decide(make_page(html=PAGE), HostTable(params.table), params)
    assert outcome.clean is not None
    assert METHOD_PAGELEVEL not in {b.method for b in outcome.clean.blocks}
    # Only the markup's nav and footer, beside the article, leave the text (engine/decision.py)
    removed = [b for b in outcome.clean.blocks if b.verdict == TEMPLATE]
    assert {b.method for b in removed} == {METHOD_MARKUP}
    assert [b.text for b in removed] == ["Home", "About us", "Copyright 2024 Example"]


def test_html_output_drops_model_template_text() -> None:
    # A first page with more of an article than PAGE's three lines (the model would keep less
    # than `cold_min_kept` of PAGE, which then stays whole).
    more = "<div>One more paragraph of the article, as long as the others, with commas, and an end.</div>" * 2
    outcome = decide(make_page(html=PAGE.replace("</section>", more + "</section>")), HostTable(PARAMS.table),
                     PARAMS, with_html=True)
    clean = outcome.clean
    assert clean is not None and clean.html is not None
    dropped = [b.text for b in clean.blocks if b.verdict == TEMPLATE]
    assert dropped
    assert "Nested paragraph" in clean.html


def test_params_are_checked() -> None:
    with pytest.raises(ConfigError):
        PageLevelParams(inner_threshold=-0.1)
    with pytest.raises(ConfigError):
        PageLevelParams(weighting="cubic")
    with pytest.raises(ConfigError):
        PageLevelParams(threshold=1.5)


def test_training_learns_from_site_level_labels() -> None:
    sites = interleave(
        *(make_site(f"s{i}.example", 6, seed=i, layout=lay) for i, lay in enumerate(["blog", "news", "docs"]))
    )
    X, y, w, stats = collect((sp.page for sp in sites), SP, LabelParams(), RegionParams())
    assert stats["hosts"] == 3 and stats["labelled_hosts"] == 3
    assert 0 < y.sum() < len(y)
    assert X.shape == (len(y), N_FEATURES) and (w > 0).all()
    model = fit_logistic(X, y, w, l2=1.0)
    accuracy = float(((model.scores(X) > 0.5) == (y > 0.5)).mean())
    assert accuracy > 0.9



def test_a_column_constant_over_the_training_set_leaves_the_intercept_to_the_bias() -> None:
    # Every labelled block has text, so `has_text` is 1 throughout, as the bias is: fitted
    # beside it, the two split one weight as rounding fell (the BLAS kernel decided).
    sites = interleave(*(make_site(f"c{i}.example", 6, seed=i, layout=lay) for i, lay in enumerate(["blog", "docs"])))
    X, y, w, _ = collect((sp.page for sp in sites), SP, LabelParams(), RegionParams())
    has_text, bias = FEATURE_NAMES.index("has_text"), FEATURE_NAMES.index("bias")
    assert (X[:, has_text] == 1.0).all()
    model = fit_logistic(X, y, w, l2=1.0)
    assert model.coef[has_text] == 0.0 and model.coef[bias] != 0.0
    # The fit does not depend on that column's value: the same weights with it at 3.
    X3 = X.copy()
    X3[:, has_text] = 3.0
    other = fit_logistic(X3, y, w, l2=1.0)
    assert other.coef.tobytes() == model.coef.tobytes()

def test_train_command_writes_a_usable_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sites = interleave(
        make_site("t1.example", 6, seed=1, layout="blog"), make_site("t2.example", 6, seed=2, layout="news")
    )
    src = write_jsonl(sites, tmp_path / "crawl.jsonl")
    out = tmp_path / "model.json"
    assert main(["train-pagelevel", str(src), "--output", str(out)]) == 0
    model = load_model(str(out))
    assert model.names == FEATURE_NAMES
    params = dataclasses.replace(PARAMS, pagelevel=PageLevelParams(model=str(out)))
    outcome = decide(make_page(html=PAGE), HostTable(params.table), params)
    assert outcome.clean is not None


def test_train_command_needs_multi_page_hosts(tmp_path: Path) -> None:
    src = write_jsonl(
        [make_page(url=f"https://h{i}.example/", host=f"h{i}.example") for i in range(3)], tmp_path / "one.jsonl"
    )
    assert main(["train-pagelevel", str(src), "--output", str(tmp_path / "m.json")]) == 1


def test_model_stops_after_max_host_pages() -> None:
    params = dataclasses.replace(PARAMS, pagelevel=PageLevelParams(max_host_pages=2))
    table = HostTable(params.table)
    methods = []
    for sp in make_site("long.example", 4, seed=3, layout="news"):
        outcome = decide(sp.page, table, params)
        assert outcome.clean is not None
        methods.append({b.method for b in outcome.clean.blocks})
    assert METHOD_PAGELEVEL in methods[0] and METHOD_PAGELEVEL in methods[1]
    assert METHOD_PAGELEVEL not in methods[2] | methods[3]


def test_walk_and_decide_agree_with_table_keys() -> None:
    """Pages decided through the model's walk update the table exactly as segment_tree's keys would."""
    site = make_site("keys.example", 6, seed=5, layout="blog")
    on = HostTable(PARAMS.table)
    off_params = dataclasses.replace(PARAMS, pagelevel=PageLevelParams(enabled=False))
    off = HostTable(off_params.table)
    for sp in site:
        a = decide(sp.page, on, PARAMS)
        b = decide(sp.page, off, off_params)
        assert a.applied == b.applied
    assert on.to_bytes() == off.to_bytes()


def test_the_class_hint_cache_keeps_no_long_attributes() -> None:
    from detemplate.engine.page.cues import HINTS as _HINTS
    from detemplate.engine.page.cues import HINTS_MAX_CHARS as _HINTS_MAX_CHARS
    from detemplate.engine.page.cues import hints as _hints

    long_pair = ("nav " + "x" * 10_000, "")
    assert _hints(long_pair) & 1  # still judged: a template word
    assert long_pair not in _HINTS
    short_pair = ("site-footer", "f")
    _hints(short_pair)
    assert short_pair in _HINTS and len("site-footer f") <= _HINTS_MAX_CHARS
