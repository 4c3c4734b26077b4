"""detemplate.tools.loco: the leave-one-corpus-out replay of the decision."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from detemplate.engine.params import EngineParams
from detemplate.tools import loco
from detemplate.tools.evaluate import evaluate_corpus, load_corpus
from detemplate.tools.samples import make_shop

from tests.factories import interleave, make_site


def write_gz_jsonl(path: Path, records: list[dict[str, str]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def corpus(folder: Path, seed: int, layout: str) -> Path:
    sites = interleave(
        make_site(f"a{seed}.example", 9, seed=seed, layout=layout),
        make_site(f"b{seed}.example", 9, seed=seed + 1, layout="blog"),
    )
    folder.mkdir(parents=True)
    write_gz_jsonl(
        folder / "pages.jsonl.gz", [{"url": s.page.url, "host": s.page.host, "html": s.page.html} for s in sites]
    )
    write_gz_jsonl(folder / "gold.jsonl.gz", [{"url": s.page.url, "content": s.gold} for s in sites])
    return folder


def recorded(folder: Path, params: EngineParams) -> tuple[str, tuple, dict[str, str]]:
    c = load_corpus(folder)
    return c.name, c.pages, {g.url: g.content for g in c.gold}


def test_replaying_the_default_setting_reproduces_eval(tmp_path: Path) -> None:
    params = EngineParams()
    folder = corpus(tmp_path / "docs", 5, "docs")
    name, pages, gold = recorded(folder, params)
    records = loco.record_corpus(name, pages, gold, params)
    here = tuple(sorted((n, v) for n, v in (("pagelevel.threshold", params.pagelevel.threshold),)))
    cold = loco.replay(records.cold, params, [here])[here]
    warm = loco.replay(records.warm, params, [()])[()]
    f1 = (cold[2] + warm[2]) / records.pages
    assert f1 == pytest.approx(evaluate_corpus(load_corpus(folder), params).scores.f1, abs=1e-9)
    # Each host's first page is held for its second (a warm record, at the first page's
    # threshold: counted among the first pages), and no page is decided alone.
    assert not records.cold and records.warm
    assert records.first_pages == sum(r.ballot.held for r in records.warm) >= 1


def test_replaying_a_shop_reproduces_eval(tmp_path: Path) -> None:
    # The decision reads the blocks' segment keys beside the content region (a product's
    # fields): the kept ballots hold them, so the replay gives what eval gave.
    params = EngineParams()
    shop = make_shop("shop.example", 30, seed=2)
    folder = tmp_path / "shop"
    folder.mkdir()
    write_gz_jsonl(folder / "pages.jsonl.gz", [{"url": s.page.url, "host": s.page.host, "html": s.page.html}
                                               for s in shop])
    write_gz_jsonl(folder / "gold.jsonl.gz", [{"url": s.page.url, "content": " ".join(s.values)} for s in shop])
    name, pages, gold = recorded(folder, params)
    records = loco.record_corpus(name, pages, gold, params)
    here = tuple(sorted((n, v) for n, v in (("pagelevel.threshold", params.pagelevel.threshold),)))
    cold = loco.replay(records.cold, params, [here])[here]
    warm = loco.replay(records.warm, params, [()])[()]
    assert (cold[2] + warm[2]) / records.pages == pytest.approx(
        evaluate_corpus(load_corpus(folder), params).scores.f1, abs=1e-9)


def test_each_corpus_is_scored_with_the_choice_of_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loco, "EVIDENCE", {"region.share": (0.8,)})
    monkeypatch.setattr(loco, "COLD_GRID", {"pagelevel.threshold": (0.15, 0.9)})
    monkeypatch.setattr(loco, "WARM_GRID", {"pagelevel.inner_threshold": (0.0, 1.0)})
    params = EngineParams()
    corpora = [
        recorded(corpus(tmp_path / f"c{i}", 10 * i + 1, layout), params)
        for i, layout in enumerate(["docs", "news", "blog"])
    ]
    replays = loco.run_loco(corpora, params)
    names = [c[0] for c in corpora]
    held = replays.held_out(names)
    for name in names:
        others = [n for n in names if n != name]
        evidence, cold, warm = replays.choose(others)
        assert (held[name].evidence, held[name].cold, held[name].warm) == (evidence, cold, warm)
        assert held[name].f1 == pytest.approx(float(replays.score(name, evidence, cold, warm)[2]))
        # The choice is the best for the others: no warm setting does better there, and no
        # cold setting does better on their pages each decided as a host's first page,
        # weighed by their shares of first pages.
        best = sum(float(replays.score(n, evidence, cold, warm)[2]) for n in others)
        for w in loco.settings(loco.WARM_GRID):
            assert sum(float(replays.score(n, evidence, cold, w)[2]) for n in others) <= best + 1e-12

        def first(c: loco.Setting, corpora: list[str]) -> float:
            return sum(
                replays.cold_pages[n] / replays.pages[n] * float(replays.first[n][c][2]) / replays.pages[n]
                for n in corpora
            )

        for c in loco.settings(loco.COLD_GRID):
            assert first(c, others) <= first(cold, others) + 1e-12
        assert all(0 < replays.cold_pages[n] < replays.pages[n] for n in names)


def test_every_gold_page_is_also_recorded_as_its_hosts_first_page(tmp_path: Path) -> None:
    # A host's first page is decided from the page alone: the cold parameters are chosen on
    # every gold page decided so. Replayed at the defaults, those records score what eval
    # scores when every page is the only page of a host of its own.
    params = EngineParams()
    folder = corpus(tmp_path / "docs", 7, "docs")
    name, pages, gold = recorded(folder, params)
    records = loco.record_corpus(name, pages, gold, params, first=True)
    assert len(records.first) == records.pages == len(gold)
    assert len(records.cold) < records.pages  # in the stream, most pages are not their host's first
    here = tuple(sorted((n, v) for n, v in (("pagelevel.threshold", params.pagelevel.threshold),)))
    f1 = loco.replay(records.first, params, [here])[here][2] / len(records.first)
    alone = load_corpus(folder)
    alone = dataclasses.replace(alone, pages=tuple(dataclasses.replace(p, host=p.url) for p in alone.pages))
    assert f1 == pytest.approx(evaluate_corpus(alone, params).scores.f1, abs=1e-9)
    assert not loco.record_corpus(name, pages, gold, params).first  # only when asked for


def test_settings_are_the_grids_product() -> None:
    grid = {"b.y": (1.0, 2.0), "a.x": (0.5,)}
    assert loco.settings(grid) == [(("a.x", 0.5), ("b.y", 1.0)), (("a.x", 0.5), ("b.y", 2.0))]
    params = loco.apply(EngineParams(), (("pagelevel.threshold", 0.3),))
    assert params == dataclasses.replace(
        EngineParams(), pagelevel=dataclasses.replace(EngineParams().pagelevel, threshold=0.3)
    )


def test_the_first_pages_are_replayed_at_the_warm_grids_index_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    # A first page's index guard reads pagelevel.max_removed_share, a parameter of the warm
    # grid: the first pages are replayed at the grid's value, and a grid of two values, which
    # the separate choice of the two parts could not honour, is refused.
    params = EngineParams()
    monkeypatch.setattr(loco, "WARM_GRID", {"pagelevel.max_removed_share": (0.7,)})
    assert loco.cold_params(params).pagelevel.max_removed_share == 0.7
    monkeypatch.setattr(loco, "WARM_GRID", {"pagelevel.inner_threshold": (0.1,)})
    assert loco.cold_params(params) == params
    monkeypatch.setattr(loco, "WARM_GRID", {"pagelevel.max_removed_share": (0.5, 0.8)})
    with pytest.raises(ValueError, match="max_removed_share"):
        loco.run_loco([], params)


def test_eval_json_with_loco_is_one_json_document_with_the_held_out_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `eval --json --loco` printed the JSON, then the held-out table after it: no JSON reader
    # could take the output. The held-out figures are now in the document, under "loco".
    from detemplate.cli import main

    monkeypatch.setattr(loco, "EVIDENCE", {"region.share": (0.8,)})
    monkeypatch.setattr(loco, "COLD_GRID", {"pagelevel.threshold": (0.15, 0.9)})
    monkeypatch.setattr(loco, "WARM_GRID", {"pagelevel.inner_threshold": (0.0, 1.0)})
    folders = [corpus(tmp_path / f"c{i}", 10 * i + 1, layout) for i, layout in enumerate(["docs", "news"])]
    assert main(["eval", *map(str, folders), "--loco", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # one document, nothing after it
    params = EngineParams()
    replays = loco.run_loco([recorded(f, params) for f in folders], params)
    held = replays.held_out(["c0", "c1"])
    assert set(doc["loco"]["held_out"]) == {"c0", "c1"}
    for name, c in held.items():
        figures = doc["loco"]["held_out"][name]
        assert (figures["P"], figures["R"], figures["F1"]) == pytest.approx((c.precision, c.recall, c.f1))
        assert figures["parameters"] == {n: v for part in (c.evidence, c.cold, c.warm) for n, v in part}
    macro = doc["loco"]["summary"][0]
    assert macro["corpora"] == 2 and macro["F1"] == pytest.approx((held["c0"].f1 + held["c1"].f1) / 2)
    evidence, cold, warm = replays.choose(["c0", "c1"])
    assert doc["loco"]["chosen"] == {n: v for part in (evidence, cold, warm) for n, v in part}
