"""detemplate.stream.metrics: counters fed from the real pipeline, scraped over loopback HTTP."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import process_page
from detemplate.state import MemoryStore
from detemplate.stream.metrics import Metrics, MetricsServer
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import interleave, make_page, make_site

PARAMS = EngineParams()


@pytest.fixture
def served() -> Iterator[tuple[Metrics, MetricsServer]]:
    metrics = Metrics(share_window=10)
    server = metrics.start_server("127.0.0.1", 0)
    try:
        yield metrics, server
    finally:
        server.stop()


def get(server: MetricsServer, path: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def samples(server: MetricsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body, ctype = get(server, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_scrape_matches_what_the_pipeline_did(served: tuple[Metrics, MetricsServer]) -> None:
    metrics, server = served
    site_a = make_site("a.example", 20, seed=1, layout="blog")
    site_b = make_site("b.example", 40, seed=2, layout="news", redesign=30)
    pages = [sp.page for sp in interleave(site_a, site_b)]
    pages += [make_page(html=""), make_page(html="plain text no tags"), make_page(html="<div>" * 500 + "x")]
    store = MemoryStore()
    want_clean = 0
    want_dead: dict[str, int] = {}
    want_events: dict[str, int] = {}
    last_shares: list[tuple[int, int]] = []
    for page in pages:
        metrics.page_in()
        start, cpu = time.perf_counter(), time.thread_time()
        outcome = process_page(page, store, PARAMS)
        metrics.observe_outcome(outcome, time.perf_counter() - start, time.thread_time() - cpu)
        metrics.changelog_records(len(outcome.applied) and 1)
        if outcome.dead is not None:
            want_dead[outcome.dead.reason] = want_dead.get(outcome.dead.reason, 0) + 1
        else:
            assert outcome.clean is not None
            want_clean += 1
            last_shares.append((outcome.clean.chars, outcome.clean.template_chars))
        for ev in outcome.events:
            want_events[ev.type] = want_events.get(ev.type, 0) + 1
    metrics.observe_tables({h: t for h in store.hosts() if (t := store.get(h)) is not None})
    metrics.batch_in(len(pages) - 3)  # the pages as two batches
    metrics.batch_in(3)
    metrics.set_consumer_lag(0, 7)
    metrics.set_consumer_lag(3, -2)  # a stale high watermark never shows as negative lag

    s = samples(server)
    assert s[("detemplate_pages_in_total", ())] == len(pages)
    assert s[("detemplate_pages_out_total", ())] == want_clean == 60
    assert want_dead == {"empty": 1, "not_html": 1, "too_deep": 1}
    for reason, n in want_dead.items():
        assert s[("detemplate_pages_dead_total", (("reason", reason),))] == n
    # Both sites learn their template; the redesigned one reports the change.
    assert want_events == {"template.learned": 2, "template.changed": 1}
    for kind, n in want_events.items():
        assert s[("detemplate_events_total", (("type", kind),))] == n
    assert s[("detemplate_changelog_records_total", ())] == want_clean
    assert s[("detemplate_page_latency_seconds_count", ())] == len(pages)
    assert s[("detemplate_page_latency_seconds_bucket", (("le", "+Inf"),))] == len(pages)
    assert s[("detemplate_page_latency_seconds_sum", ())] > 0
    assert s[("detemplate_batch_records_count", ())] == 2 and s[("detemplate_batch_records_sum", ())] == len(pages)
    assert s[("detemplate_batch_records_bucket", (("le", "5.0"),))] == 1
    # CPU in decide: some, and (one thread) never more than the wall time it took, give or take the clocks' ticks.
    assert 0 < s[("detemplate_decide_cpu_seconds_total", ())] <= s[("detemplate_page_latency_seconds_sum", ())] + 0.05
    window = last_shares[-10:]
    share = sum(t for _, t in window) / sum(c for c, _ in window)
    assert s[("detemplate_template_share_ratio", ())] == pytest.approx(share)
    assert 0.1 < share < 0.95  # learned sites: a good part of each page's text is template
    tables = [t for h in store.hosts() if (t := store.get(h)) is not None]
    assert s[("detemplate_hosts_in_state", ())] == 2  # dead pages leave no table behind
    assert s[("detemplate_segments_in_state", ())] == sum(len(t) for t in tables) > 0
    assert s[("detemplate_consumer_lag", (("partition", "0"),))] == 7
    assert s[("detemplate_consumer_lag", (("partition", "3"),))] == 0
    metrics.forget_partitions()
    assert not any(name == "detemplate_consumer_lag" for name, _ in samples(server))


def test_readiness_follows_set_ready(served: tuple[Metrics, MetricsServer]) -> None:
    metrics, server = served
    assert get(server, "/readyz")[0] == 503
    assert samples(server)[("detemplate_ready", ())] == 0
    metrics.set_ready(True)
    assert get(server, "/readyz")[:2] == (200, b"ready\n")
    assert samples(server)[("detemplate_ready", ())] == 1
    metrics.set_ready(False)  # a rebalance
    assert get(server, "/readyz")[0] == 503


def test_liveness_fails_when_the_loop_stops_beating(served: tuple[Metrics, MetricsServer]) -> None:
    metrics, server = served
    assert get(server, "/healthz")[0] == 200  # before the first beat: starting up
    metrics.beat()
    assert get(server, "/healthz")[0] == 200
    metrics.liveness_timeout_s = 0.0
    metrics._last_beat = time.monotonic() - 1.0  # the last beat, a second ago
    status, body, _ = get(server, "/healthz")
    assert (status, body) == (503, b"event loop stalled\n")
    assert get(server, "/nope")[0] == 404


def test_template_share_is_a_rolling_window() -> None:
    metrics = Metrics(share_window=3)
    site = make_site("c.example", 12, seed=3)
    table_store = MemoryStore()
    shares = []
    for sp in site:
        out = process_page(sp.page, table_store, PARAMS)
        assert out.clean is not None
        metrics.observe_outcome(out, 0.001)
        shares.append((out.clean.chars, out.clean.template_chars))
    last = shares[-3:]
    assert metrics.share() == pytest.approx(sum(t for _, t in last) / sum(c for c, _ in last))
    # The first pages were cold (no template yet): a whole-run share would be lower.
    assert metrics.share() > sum(t for _, t in shares) / sum(c for c, _ in shares)


def test_two_instances_do_not_collide() -> None:
    a, b = Metrics(), Metrics()
    a.page_in(3)
    assert b"detemplate_pages_in_total 3.0" in a.scrape()
    assert b"detemplate_pages_in_total 0.0" in b.scrape()


def test_build_info_process_metrics_and_ratio_names(served: tuple[Metrics, MetricsServer]) -> None:
    metrics, server = served
    metrics.set_build("1.2.3", "3.11.7", "compiled")
    got = samples(server)
    assert got[("detemplate_build_info", (("page_walk", "compiled"), ("python", "3.11.7"), ("version", "1.2.3")))] == 1
    names = {name for name, _ in got}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"} <= names
    # A ratio is named `_ratio` (Prometheus' base-unit naming); no gauge here is a share under another name.
    assert "detemplate_template_share_ratio" in names
    assert not [n for n in names if n.startswith("detemplate_") and ("share" in n or "fraction" in n)
                and not n.endswith("_ratio")]


def test_a_taken_port_is_one_clear_line_and_exit_2(tmp_path: object) -> None:
    """The worker whose metrics port is taken says so in one line (no OSError traceback) and exits 2."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DETEMPLATE_")}
        out = subprocess.run(
            [sys.executable, "-m", "detemplate.cli", "worker", "--broker", "kafka://127.0.0.1:1",
             "--metrics-host", "127.0.0.1", "--metrics-port", str(port), "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=120, env=env,
        )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert f"the metrics endpoint cannot listen on 127.0.0.1:{port}" in lines[0] and "--metrics-port" in lines[0]


def test_the_default_port_is_outside_the_exporter_range() -> None:
    from detemplate.settings import StreamSettings

    # 9100-9999 is the Prometheus exporters' range (9100: node_exporter), wholly allocated: docs/deploy.md.
    assert not 9100 <= StreamSettings().metrics_port <= 9999


def test_standby_remaining_counts_records_to_each_start_time_end(served: tuple[Metrics, MetricsServer]) -> None:
    metrics, server = served
    remaining, waiting = ("detemplate_standby_remaining_records", ()), ("detemplate_standby_partitions_waiting", ())
    metrics.set_standby_remaining((), {}, {})  # no standby partitions
    assert samples(server)[remaining] == 0 and samples(server)[waiting] == 0
    # Partition a: high watermark 99 at its start (Faust's last offset), read to 39: 60 left;
    # b: nothing read yet (-1, or None before Faust looked its offset up): 11 left, not 0; c: read
    # past its start-time end: nothing left, and not a negative that would hide a's; d: an empty
    # changelog (-1).
    metrics.set_standby_remaining("abcd", {"a": 99, "b": 10, "c": 5, "d": -1}, {"a": 39, "b": -1, "c": 8, "d": -1})
    assert samples(server)[remaining] == 71
    metrics.set_standby_remaining("ab", {"a": 99, "b": 10}, {"a": 39, "b": None})
    assert samples(server)[remaining] == 71
    metrics.set_standby_remaining("ab", {"a": 99, "b": 10}, {"a": 99, "b": 10})
    assert samples(server)[remaining] == 0 and samples(server)[waiting] == 0


def test_a_standby_not_started_is_waiting_not_caught_up(served: tuple[Metrics, MetricsServer]) -> None:
    """Faust starts a worker's standbys once its own partitions are restored; until then they have
    no high watermark, and 0 records left would read as caught up."""
    metrics, server = served
    metrics.set_standby_remaining("ab", {}, {"a": -1, "b": -1})
    assert samples(server)[("detemplate_standby_partitions_waiting", ())] == 2
    assert samples(server)[("detemplate_standby_remaining_records", ())] == 0
    # A partition no longer this worker's standby (revoked, or made active) counts no more,
    # whatever Faust still holds of it.
    metrics.set_standby_remaining("a", {"a": 50, "b": 99}, {"a": 20, "b": -1})
    assert samples(server)[("detemplate_standby_remaining_records", ())] == 30
    assert samples(server)[("detemplate_standby_partitions_waiting", ())] == 0
