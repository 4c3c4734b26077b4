"""`detemplate bench-scale`'s synthetic crawl: host sizes follow a power law, each host is crawled
within a window of the crawl (hosts come and go), a host's pages come in page order."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from detemplate.cli import main
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import process_page
from detemplate.state.memory import MemoryStore
from detemplate.tools.scale import Shape, host_name, page, pages


def test_sizes_follow_a_power_law_and_hosts_come_and_go() -> None:
    shape = Shape(5_000, zipf=1.2, max_pages=400, window=0.2)
    sizes = shape.sizes()
    assert sizes == Shape(5_000, zipf=1.2, max_pages=400, window=0.2).sizes()  # deterministic
    ones = sum(1 for n in sizes if n == 1) / len(sizes)
    big = sum(1 for n in sizes if n >= 20) / len(sizes)
    # P(n >= k) = k^-1.2: about 56 % of hosts have one page, about 2.7 % twenty or more.
    assert 0.5 < ones < 0.62 and 0.015 < big < 0.04 and max(sizes) == 400
    order = shape.order()
    assert len(order) == sum(sizes)
    at: dict[int, list[int]] = defaultdict(list)
    for position, (h, i) in enumerate(order):
        at[h].append(position)
        assert i == len(at[h]) - 1  # a host's pages in page order
    # Each host lives in a window of a fifth of the crawl time (about a quarter of its pages, as
    # the crawl is denser in its middle): big hosts come and go.
    spans = [(at[h][-1] - at[h][0]) / len(order) for h, n in enumerate(sizes) if n >= 50]
    assert spans and max(spans) < 0.35
    firsts = sorted(at[h][0] / len(order) for h, n in enumerate(sizes) if n >= 50)
    assert firsts[0] < 0.2 and firsts[-1] > 0.6


def test_pages_are_decided_with_a_template_learned() -> None:
    shape = Shape(40, max_pages=30, seed=3)
    store = MemoryStore()
    params = EngineParams()
    last = {}
    for p in pages(shape):
        outcome = process_page(p, store, params)
        assert outcome.clean is not None
        last[p.host] = outcome.clean
    biggest = max(range(40), key=lambda h: shape.sizes()[h])
    clean = last[host_name(biggest)]
    assert shape.sizes()[biggest] >= 10 and clean.template_chars > 0  # the host's template was learned
    assert "Copyright" not in clean.text and "Article" in clean.text
    assert page(1, 2).url == "https://h1.scale.example/a/2.html"


def test_capacity_plan_follows_the_measured_costs() -> None:
    from detemplate.tools.scale import Measured, capacity_plan

    m = Measured()
    small, large = capacity_plan(3e9, 1e7, m), capacity_plan(3e9, 5e7, m)
    assert small["mean_pages_per_host"] == 300.0 and large["mean_pages_per_host"] == 60.0
    assert small["pages_per_s_mean"] == 1157 and small["workers"] == large["workers"] >= 1
    assert large["state_gb"] > small["state_gb"] and large["partitions"] > small["partitions"]
    for plan in (small, large):  # partitions chosen so one restores within the target
        assert plan["restore_s_per_partition"] <= 300 and plan["partitions"] % 16 == 0
        assert plan["partitions"] >= 4 * plan["workers"]
    slower = capacity_plan(3e9, 1e7, Measured(worker_cpu_ms_per_page=8.0))
    assert slower["workers"] > small["workers"]
    # Written in the month: a delta a page, and the snapshots of hosts past K pages on top.
    deltas_tb = 3e9 * m.delta_bytes / 1e12
    assert deltas_tb < small["changelog_written_tb_month"] < deltas_tb + 3e9 * m.snapshot_bytes / 64 / 1e12
    no_snapshots = capacity_plan(3e9, 1e7, Measured(snapshot_bytes=0.0, index_bytes=0.0))
    assert no_snapshots["changelog_written_tb_month"] == round(deltas_tb, 2)


def test_keep_leaves_the_working_folder_for_tracing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --keep, each run's working folder (the offline run's log and state here) stays and
    its path is printed; without, it is removed."""
    out = tmp_path / "figures"
    args = ["bench-scale", "--hosts", "20", "--max-pages", "5", "--skip", "stream", "--out", str(out)]
    assert main([*args, "--keep"]) == 0
    kept = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("working folder kept: ")]
    assert len(kept) == 1
    folder = Path(kept[0])
    try:
        assert (folder / "offline" / "run.log").is_file() and (folder / "offline" / "state").is_dir()
        assert json.loads((out / "figures.json").read_text())[0]["offline"]["pages"] > 20
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert main(args) == 0
    assert "working folder kept" not in capsys.readouterr().out
