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


def _workers_of(parent: int) -> list[int]:
    """The stream workers process `parent` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"worker" in cmdline.split(b"\0"):
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker process in /proc (Linux)")
def test_bench_stream_stopped_by_sigterm_stops_its_worker(tmp_path: Path) -> None:
    """SIGTERM (a CI job's timeout) ends the benchmark as Ctrl-C does, through its clean-up: the
    worker it started goes too; it was left running, alone, after its broker had gone."""
    import signal
    import subprocess
    import sys
    import time

    from detemplate.tools.samples import write_jsonl

    corpus = write_jsonl(interleave(make_site("a.example", 40, seed=1), make_site("b.example", 40, seed=2)),
                         tmp_path / "pages.jsonl")
    proc = subprocess.Popen([sys.executable, "-m", "detemplate", "bench-stream", "--corpus", str(corpus),
                             "--hosts", "2", "--no-recovery"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 300.0  # a deadline for a condition, on a loaded machine
        while not workers and proc.poll() is None and time.monotonic() < deadline:
            workers = _workers_of(proc.pid)
            time.sleep(0.05)
        assert workers, "the benchmark started its worker"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err.decode()
    assert "terminated" in err.decode()
    assert not any(_running(pid) for pid in workers), "the worker outlived the benchmark"
