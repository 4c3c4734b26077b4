"""Quality gate: eval on the development corpora must not fall below pinned F1 floors.

Floors live in tests/eval_floors.json, one per corpus, each the F1 measured by
`detemplate eval` when it was set, rounded down to 0.01; and every corpus must score at
least its fulltext baseline (all body text kept): removing real content is worse than
keeping some template; and its blocks, all kept, must recall the gold as the page's text
does (within the tolerance): no text lost by the walk before any decision. They only ever move up: when a
change raises a corpus's F1 by a clear step, raise its floor in the same commit. A run
passes when F1 >= floor - tolerance (0.005), which absorbs the rounding of floating-point
sums, not real regressions. The detector is deterministic, so there is no sampling noise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from detemplate.engine.params import EngineParams
from detemplate.tools.evaluate import evaluate_corpus, load_corpus

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"
FLOORS_FILE = Path(__file__).resolve().parents[1] / "eval_floors.json"


def _floors() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FLOORS_FILE.read_text(encoding="utf-8"))
    return doc


FLOORS = _floors()


def test_floors_file_is_well_formed() -> None:
    floors = FLOORS["floors"]
    assert FLOORS["tolerance"] == 0.005
    # the development corpora the gate must always cover
    assert {"site-lenskit-docs", "site-antsr-pkgdown", "site-rust-cookbook-mdbook", "news-big5-09"} <= floors.keys()
    for name, floor in floors.items():
        assert 0.0 < floor <= 1.0, name
        assert round(floor, 2) == floor, f"{name}: floors are set rounded down to 0.01"


@pytest.mark.corpora
@pytest.mark.parametrize("corpus", sorted(FLOORS["floors"]))
def test_f1_stays_above_floor(corpus: str) -> None:
    if not CORPORA.is_dir():
        pytest.skip(f"development corpora not found at {CORPORA}")
    folder = CORPORA / corpus
    if not (folder / "pages.jsonl.gz").is_file():
        pytest.skip(f"corpus {corpus} not found in {CORPORA}")
    result = evaluate_corpus(load_corpus(folder), EngineParams())
    floor = FLOORS["floors"][corpus]
    f1 = result.scores.f1
    assert f1 is not None
    assert f1 >= floor - FLOORS["tolerance"], (
        f"{corpus}: F1 {f1:.4f} fell below its floor {floor:.2f} "
        f"(P {result.scores.precision:.4f}, R {result.scores.recall:.4f})"
    )
    # Do no harm: the kept text scores at least as well as keeping all body text.
    full = result.fulltext.f1
    assert full is not None and f1 >= full, f"{corpus}: F1 {f1:.4f} is below keeping all body text ({full:.4f})"
    # Nothing lost before the decision: all blocks kept recall the gold as the page's text does.
    loss = result.walk_loss()
    assert loss is not None and loss <= FLOORS["tolerance"], (
        f"{corpus}: the walk's blocks recall {loss:.4f} less of the gold than the page's text"
    )


@pytest.mark.corpora
@pytest.mark.parametrize("corpus", sorted(k for k in FLOORS["cluster_purity"] if k != "about"))
def test_template_clusters_stay_as_pure_as_measured(corpus: str) -> None:
    """The engine's template clusters against URL page types: purity (each cluster's
    majority type) and inverse purity (each type's largest cluster) above their floors."""
    from detemplate.engine.pipeline import process_page
    from detemplate.state.memory import MemoryStore

    from tests.page_types import URL_TYPES, purity

    if not CORPORA.is_dir():
        pytest.skip(f"development corpora not found at {CORPORA}")
    folder = CORPORA / corpus
    if not (folder / "pages.jsonl.gz").is_file():
        pytest.skip(f"corpus {corpus} not found in {CORPORA}")
    store = MemoryStore()
    labels: list[int] = []
    types: list[str] = []
    for page in load_corpus(folder).pages:
        out = process_page(page, store, EngineParams())
        if out.cluster is not None:
            labels.append(out.cluster)
            types.append(URL_TYPES[corpus](page.url))
    pur, inv = purity(labels, types)
    floor_pur, floor_inv = FLOORS["cluster_purity"][corpus]
    tol = FLOORS["tolerance"]
    assert pur >= floor_pur - tol and inv >= floor_inv - tol, (
        f"{corpus}: purity {pur:.3f} / inverse {inv:.3f} below the floors {floor_pur} / {floor_inv} "
        f"({len(set(labels))} clusters)"
    )


@pytest.mark.corpora
def test_the_shipped_defaults_are_the_held_out_choice_and_the_held_out_figures_hold() -> None:
    """`detemplate eval --loco` over every corpus: the parameters it chooses on all of them
    are the shipped ones (a change that moves the choice moves the default with it), and the
    held-out figures hold issue 14's floors: macro F1 and P of the multi-page corpora at
    least 0.95, every corpus at least keeping all body text and its own floor, and no more
    than 0.01 under trafilatura's F1 where the corpora's README gives it."""
    from detemplate.tools.evaluate import find_anchors, loco_corpora, run_eval
    from detemplate.tools.loco import run_loco

    if not CORPORA.is_dir():
        pytest.skip(f"development corpora not found at {CORPORA}")
    folders = sorted(f for f in CORPORA.iterdir() if (f / "pages.jsonl.gz").is_file())
    params = EngineParams()
    results = run_eval(folders, params)
    replays = run_loco(loco_corpora(folders), params)
    names = [r.name for r in results]
    evidence, cold, warm = replays.choose(names)
    for name, value in (*evidence, *cold, *warm):
        section, field = name.split(".")
        shipped = getattr(getattr(params, section), field)
        assert shipped == value, f"{name}: shipped {shipped}, chosen on all {len(names)} corpora {value}"
    held = replays.held_out(names)
    anchors = find_anchors(folders)
    assert anchors.get("chaos", {}).get("trafilatura"), "the corpora's README gives no trafilatura figures"
    for r in results:
        assert r.fulltext.f1 is not None and held[r.name].f1 >= r.fulltext.f1, (
            f"{r.name}: held out F1 {held[r.name].f1:.4f} below keeping all body text ({r.fulltext.f1:.4f})"
        )
        # Held out, each corpus holds the floor its shipped figure holds.
        floor = FLOORS["floors"].get(r.name)
        assert floor is None or held[r.name].f1 >= floor - FLOORS["tolerance"], (
            f"{r.name}: held out F1 {held[r.name].f1:.4f} below its floor {floor:.2f}"
        )
        traf = anchors.get(r.name, {}).get("trafilatura", (None, None, None))[2]
        assert traf is None or held[r.name].f1 >= traf - 0.01, (
            f"{r.name}: held out F1 {held[r.name].f1:.4f} more than 0.01 under trafilatura's {traf:.3f}"
        )
    multi = [held[r.name] for r in results if r.multi_page]
    assert len(multi) >= 2
    macro_f1 = sum(c.f1 for c in multi) / len(multi)
    macro_p = sum(c.precision for c in multi) / len(multi)
    assert macro_f1 >= 0.95 and macro_p >= 0.95, f"held out: macro F1 {macro_f1:.4f}, P {macro_p:.4f}"
