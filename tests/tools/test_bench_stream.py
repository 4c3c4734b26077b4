"""detemplate bench-stream's offline pass and its worker-against-offline ratio at the engine's
speed inside the worker."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from detemplate.engine.firstpages import process_pages
from detemplate.engine.params import EngineParams
from detemplate.io import codec
from detemplate.state.memory import MemoryStore
from detemplate.tools.bench_stream import offline_pass, same_speed_ratio
from detemplate.tools.samples import interleave, make_site


def test_the_same_speed_ratio_does_not_move_with_the_machines_speed_between_the_passes() -> None:
    # The worker: 1.30 ms a page of engine and 0.55 of its own; offline: the engine and 0.05 ms of encoding.
    worker, worker_decide = 1.85, 1.30
    for offline_speed in (1.0, 0.8, 1.3):  # the offline pass on a machine 20% slower, 30% faster
        offline_decide = 1.30 * offline_speed
        offline = offline_decide + 0.05 * offline_speed
        plain = offline / worker
        same = same_speed_ratio(worker, worker_decide, offline, offline_decide)
        assert math.isclose(same, (1.30 + 0.05 * offline_speed) / 1.85)
        assert abs(same - 1.35 / 1.85) < 0.01  # 0.73x whatever the offline pass's speed
        if offline_speed != 1.0:
            assert abs(plain - 1.35 / 1.85) > 0.1  # the plain ratio moves with it
    # A worker whose own cost a page is offline's (the encoding) runs at offline's rate.
    assert math.isclose(same_speed_ratio(1.35, 1.30, 1.35, 1.30), 1.0)
    assert math.isnan(same_speed_ratio(0.0, 0.0, 1.0, 1.0))


def test_the_offline_pass_starts_from_the_records_bytes_as_the_worker_does() -> None:
    """Offline does what `run` does with a record: decode its JSON (the message the worker is
    sent), decide the page, encode the clean record; the decode is timed apart, inside the pass."""
    pages = [sp.page for sp in interleave(make_site("a.example", 12, seed=1), make_site("b.example", 12, seed=2))]
    rate, reference, figures = offline_pass(pages, EngineParams())
    assert rate > 0
    own_ms = figures["offline_cpu_ms_per_page"] - figures["offline_decide_cpu_ms_per_page"]
    assert 0 < figures["offline_decode_cpu_ms_per_page"] < own_ms
    expected = {}
    for decided in process_pages(pages, MemoryStore(), EngineParams()):
        clean = decided.outcome.clean
        assert clean is not None
        expected[decided.page.url + "\x00" + decided.page.host] = codec.encode_clean(clean)
    assert reference == expected  # the decoded records are the pages: the same outputs


def test_the_offline_pass_refuses_a_record_that_does_not_decode() -> None:
    page = make_site("a.example", 1, seed=1)[0].page
    with pytest.raises(ValueError, match="does not decode"):
        offline_pass([dataclasses.replace(page, url="not a url")], EngineParams())


def test_bench_stream_says_so_when_its_corpus_has_no_pages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with no HTML files (its pages in JSONL beside it, say) is an error that names the
    input, before any broker starts; it was a ValueError from max() of nothing."""
    from detemplate.cli import main

    (tmp_path / "pages.jsonl").write_text("")
    assert main(["bench-stream", "--corpus", str(tmp_path), "--no-recovery"]) == 2
    assert f"no pages in {tmp_path}" in capsys.readouterr().err
