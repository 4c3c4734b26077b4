"""decide() takes a page through its stages, each once, in order; a dead page stops after the walk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from detemplate.engine import pipeline
from detemplate.engine.model import METHOD_COLD, METHOD_PAGELEVEL, METHOD_TABLE, RawPage
from detemplate.engine.params import EngineParams
from detemplate.engine.table import HostTable

from tests.factories import make_site

PARAMS = EngineParams()


def record(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Wrap every stage function of the pipeline so that each call is logged, in order."""
    calls: list[str] = []
    for name in pipeline.STAGES:
        stage: Callable[..., Any] = getattr(pipeline, name)

        def logged(*args: Any, _stage: Callable[..., Any] = stage, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _stage(*args, **kwargs)

        monkeypatch.setattr(pipeline, name, logged)
    return calls


def test_the_stages_are_the_pipeline_functions_in_order() -> None:
    assert pipeline.STAGES == ("walk_page", "page_keys", "update_table", "cast_votes", "combine_votes", "page_outcome")
    assert all(callable(getattr(pipeline, name)) for name in pipeline.STAGES)


def test_a_cold_host_page_passes_each_stage_once_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    page = make_site("cold.example", 1, seed=3)[0].page
    calls = record(monkeypatch)
    outcome = pipeline.decide(page, HostTable(PARAMS.table), PARAMS)
    assert calls == list(pipeline.STAGES)
    assert outcome.clean is not None and outcome.clean.page_no == 1
    methods = {b.method for b in outcome.clean.blocks}
    assert methods <= {METHOD_COLD, METHOD_PAGELEVEL}  # the table has nothing to say yet


def test_a_warm_host_page_passes_each_stage_once_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site("warm.example", 8, seed=3)
    table = HostTable(PARAMS.table)
    for sp in site[:-1]:
        pipeline.decide(sp.page, table, PARAMS)
    calls = record(monkeypatch)
    outcome = pipeline.decide(site[-1].page, table, PARAMS, with_html=True)
    assert calls == list(pipeline.STAGES)
    assert outcome.clean is not None and outcome.clean.page_no == 8
    assert METHOD_TABLE in {b.method for b in outcome.clean.blocks}
    assert outcome.clean.html is not None


def test_a_dead_page_stops_after_the_walk_and_leaves_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    table = HostTable(PARAMS.table)
    pipeline.decide(make_site("dead.example", 1, seed=3)[0].page, table, PARAMS)
    before = table.to_bytes()
    calls = record(monkeypatch)
    outcome = pipeline.decide(RawPage("https://dead.example/x", "   ", "dead.example"), table, PARAMS)
    assert calls == ["walk_page"]
    assert outcome.clean is None and outcome.dead is not None and outcome.dead.reason == "empty"
    assert table.to_bytes() == before
