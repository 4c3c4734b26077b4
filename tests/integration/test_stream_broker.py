"""The stream worker against the real Tansu broker: round trip, crash, two workers, bad input."""

from __future__ import annotations

import json
import platform
import re
import signal
import urllib.request
from collections import Counter

import pytest
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.state.changelog import StateLayout, record_kind, records_of
from detemplate.state.expiry import ExpiryPolicy
from detemplate.stream import heap
from detemplate.stream.kafka_io import fetch_highwaters
from detemplate.stream.outputs import as_published

from tests.factories import interleave, make_site
from tests.integration.conftest import (
    PARTITIONS,
    Cluster,
    assert_each_input_once,
    by_host,
    first_per_url,
    offline,
    page_message,
    run,
)

pytestmark = pytest.mark.broker


def crawl(n_per_host: int, hosts: int = 5, seed: int = 0) -> list[RawPage]:
    """Interleaved pages of several generated sites, one with a redesign half way."""
    sites = [
        make_site(f"site{i}.example", n_per_host, seed=seed + i, layout=("blog", "docs", "news")[i % 3],
                  redesign=n_per_host // 2 if i == 0 else None)
        for i in range(hosts)
    ]
    return [sp.page for sp in interleave(*sites)]


def assert_same_as_offline(
    c: Cluster, pages: list[RawPage], clean_values: dict[str, list[bytes]], policy: ExpiryPolicy | None = None
) -> None:
    ref = offline(pages, policy=policy)
    assert set(clean_values) == set(ref.clean)
    for host, expected in ref.clean.items():
        got = clean_values[host]
        # Duplicates (replayed pages) are allowed but must be identical to the first copy.
        by_url = {json.loads(v)["url"]: v for v in expected}
        for v in got:
            want = as_published(by_url[json.loads(v)["url"]], v)
            assert v == want, f"{host}: a clean page differs from the offline run:\n{v[:600]!r}\n{want[:600]!r}"
        assert first_per_url(got) == [as_published(w, g) for g, w in zip(first_per_url(got), expected, strict=False)], (
            f"{host}: clean pages differ from the offline run")
        assert len(first_per_url(got)) == len(expected)
    events = by_host(c.read(c.settings.topic_events))
    for host in ref.clean:
        assert first_unique(events.get(host, [])) == ref.events.get(host, []), f"{host}: events differ"


def first_unique(values: list[bytes]) -> list[bytes]:
    seen = set()
    out = []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def compacted(c: Cluster) -> dict[bytes, bytes]:
    """The state changelog as compaction would keep it: the newest record of each key, none
    where that is a tombstone."""
    latest: dict[bytes, bytes] = {}
    for r in sorted(c.read(c.settings.topic_state), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        if r.value is None:
            latest.pop(r.key, None)
        else:
            latest[r.key] = r.value
    return latest


def tables_from_changelog(c: Cluster, hosts: set[str]) -> dict[str, object]:
    """Rebuild each host's table from the state changelog as compaction would keep it."""
    latest = compacted(c)
    layout = StateLayout(EngineParams(), c.settings.snapshot_every, max_table_entries=c.settings.max_table_entries)
    return {host: layout.load(records_of(host, latest)) for host in hosts}


def assert_tables_equal(c: Cluster, pages: list[RawPage], policy: ExpiryPolicy | None = None) -> None:
    ref = offline(pages, policy=policy)
    tables = tables_from_changelog(c, set(ref.clean))
    for host in ref.clean:
        expected = ref.store.get(host)
        got = tables[host]
        assert expected is not None and got is not None
        assert got.pages == expected.pages
        assert got.state() == expected.state(), f"{host}: table entries differ"
        got.source_offset = expected.source_offset  # only the stream shell sets it
        assert got.to_bytes() == expected.to_bytes(), f"{host}: table differs"


def test_round_trip_equals_offline_run(cluster: Cluster) -> None:
    pages = crawl(60)  # 300 pages, 5 hosts
    # Fewer live tables than hosts: most pages find their table rebuilt from the store.
    cluster.settings = cluster.settings.with_overrides(cache_hosts=3)
    cluster.produce_pages(pages)
    cluster.start_worker("w1")
    records = cluster.wait_for(cluster.settings.topic_clean, lambda rs: len(rs) >= len(pages))
    assert len(records) == len(pages)  # no crash, so no duplicates
    assert_same_as_offline(cluster, pages, by_host(records))
    assert_tables_equal(cluster, pages)
    # About one changelog record per page: one delta each, plus a snapshot every K pages.
    state = cluster.read(cluster.settings.topic_state)
    kinds = Counter(record_kind(r.key) for r in state if r.key)
    snapshots = sum(60 // cluster.settings.snapshot_every for _ in range(5))
    assert kinds["delta"] == len(pages)
    assert kinds["snapshot"] == snapshots
    # A host's index entry (for whole-host expiry) on its first page and its snapshot pages.
    assert kinds["index"] == 5 + snapshots
    assert set(kinds) == {"delta", "snapshot", "index"}
    assert cluster.read(cluster.settings.topic_dead) == []
    # The worker's Prometheus endpoint counted them.
    port = re.search(r"metrics and health on http://127\.0\.0\.1:(\d+)", cluster.log("w1"))
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics", timeout=10) as resp:
        scraped = resp.read().decode()
    assert f"detemplate_pages_out_total {float(len(pages))}" in scraped
    assert f"detemplate_changelog_records_total {float(len(state))}" in scraped
    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/readyz", timeout=10) as resp:
        assert resp.status == 200
    # Its malloc heap reuses large blocks and gives free pages back on a timer (stream/heap.py).
    if platform.libc_ver()[0] == "glibc" and not heap.operator_set():
        assert "glibc thresholds fixed" in cluster.log("w1")


@pytest.mark.parametrize("hold_idle_s", [1.0, 8.0], ids=["under-the-stall-check", "over-it"])
def test_first_pages_wait_for_their_second_and_a_lone_one_goes_out_when_its_partition_is_idle(
    cluster: Cluster, hold_idle_s: float
) -> None:
    """A host's first page goes out with its second, decided with it, as `run` decides it; a host
    with one page has it go out alone once its partition had no message for hold_idle_s. Also
    when hold_idle_s is over the stall check's STALL_S (5 s): the check used to count an idle
    partition's look as its last message, so the lone page never went out (and, at the
    defaults, both 5 s, it did not whenever the check ran first)."""
    pages = [*crawl(4, hosts=3), make_site("lone.example", 1, seed=9)[0].page]
    cluster.settings = cluster.settings.with_overrides(hold_idle_s=hold_idle_s)
    cluster.produce_pages(pages)
    cluster.start_worker("w1")
    urls = {p.url for p in pages}
    records = cluster.wait_for(
        cluster.settings.topic_clean, lambda rs: {json.loads(r.value)["url"] for r in rs} >= urls
    )
    assert len(records) == len(pages)
    assert_same_as_offline(cluster, pages, by_host(records))
    port = re.search(r"metrics and health on http://127\.0\.0\.1:(\d+)", cluster.log("w1"))
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics", timeout=10) as resp:
        scraped = resp.read().decode()
    assert 'detemplate_first_pages_released_total{how="second"} 3.0' in scraped
    assert 'detemplate_first_pages_released_total{how="alone"} 1.0' in scraped
    assert "detemplate_first_pages_held 0.0" in scraped


def test_sigkill_mid_stream_loses_nothing_and_tables_match(cluster: Cluster) -> None:
    pages = crawl(120)  # 600 pages
    sent = cluster.produce_tracked([page_message(p) for p in pages])
    first = cluster.start_worker("w1")
    cluster.wait_metric("w1", "detemplate_pages_out_total", 150)  # polled often: the kill comes mid-stream
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = len(cluster.read(cluster.settings.topic_clean))
    assert done_before < len(pages), "the worker finished before it was killed: the test proves nothing"
    cluster.start_worker("w2")  # same group; a fresh data dir: state comes back from the changelog
    urls = {p.url for p in pages}
    records = cluster.wait_for(
        cluster.settings.topic_clean, lambda rs: {json.loads(r.value)["url"] for r in rs} >= urls, timeout_s=180
    )
    assert_each_input_once(cluster, sent)
    assert_same_as_offline(cluster, pages, by_host(records))
    assert_tables_equal(cluster, pages)


def test_restart_over_own_rocksdb_state_recovers(cluster: Cluster) -> None:
    """SIGKILL, then restart on the same data dir: Faust checks its persisted offsets against
    the changelog's end (the Tansu fix makes that end right) and goes on."""
    pages = crawl(80)
    cluster.produce_pages(pages[:200])
    first = cluster.start_worker("w1")
    cluster.wait_for(cluster.settings.topic_clean, lambda rs: len(rs) >= 200)
    first.send_signal(signal.SIGKILL)
    first.wait()
    cluster.produce_pages(pages[200:])
    cluster.start_worker("w1")  # same name: same RocksDB directory
    urls = {p.url for p in pages}
    records = cluster.wait_for(
        cluster.settings.topic_clean, lambda rs: {json.loads(r.value)["url"] for r in rs} >= urls, timeout_s=180
    )
    assert "ConsistencyError" not in cluster.log("w1")
    assert_same_as_offline(cluster, pages, by_host(records))
    assert_tables_equal(cluster, pages)


ASSIGNED = re.compile(r"assigned partitions=\[([0-9, ]*)\]")


def assignment(log: str) -> set[int] | None:
    found = ASSIGNED.findall(log)
    if not found:
        return None
    return {int(x) for x in found[-1].split(",") if x.strip()}


def test_two_workers_split_partitions_with_same_outputs(cluster: Cluster) -> None:
    import time

    cluster.start_worker("w1")
    cluster.start_worker("w2")
    deadline = time.monotonic() + 90
    while True:
        a, b = assignment(cluster.log("w1")), assignment(cluster.log("w2"))
        if a and b and not (a & b) and (a | b) == set(range(PARTITIONS)):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the workers did not split the partitions: {a} {b}\n{cluster.logs_tail()}")
        time.sleep(0.5)
    pages = crawl(60, hosts=8)
    cluster.produce_pages(pages)
    records = cluster.wait_for(cluster.settings.topic_clean, lambda rs: len(rs) >= len(pages))
    assert_same_as_offline(cluster, pages, by_host(records))
    assert_tables_equal(cluster, pages)
    # Both workers did some of the work.
    assert "pages=0," not in last_stats(cluster.log("w1")) and "pages=0," not in last_stats(cluster.log("w2"))


def last_stats(log: str) -> str:
    lines = [line for line in log.splitlines() if "WorkerStats(" in line]
    return lines[-1] if lines else ""


def test_bad_messages_go_to_pages_dead_and_the_worker_goes_on(cluster: Cluster) -> None:
    good = crawl(6, hosts=2)
    bad: list[tuple[bytes | None, bytes | None]] = [
        (b"x.example", b"not json at all"),
        (b"x.example", b"[1, 2, 3]"),
        (b"x.example", json.dumps({"html": "<p>no url</p>"}).encode()),
        (b"x.example", json.dumps({"url": "https://x.example/a", "html": 42}).encode()),
        (b"x.example", b"\xff\xfe\x00 undecodable"),
        (b"x.example", None),  # a tombstone
        (b"y.example", json.dumps({"url": "https://x.example/b", "html": "<p>hi</p>"}).encode()),  # wrong key
    ]
    cluster.produce_messages([(p.host.encode(), json.dumps({"url": p.url, "html": p.html}).encode())
                              for p in good[:6]])
    cluster.produce_messages(bad)
    cluster.produce_messages([(p.host.encode(), json.dumps({"url": p.url, "html": p.html}).encode())
                              for p in good[6:]])
    cluster.start_worker("w1")
    clean = cluster.wait_for(cluster.settings.topic_clean, lambda rs: len(rs) >= len(good))
    dead = cluster.wait_for(cluster.settings.topic_dead, lambda rs: len(rs) >= len(bad))
    assert len(clean) == len(good) and len(dead) == len(bad)
    letters = [json.loads(r.value) for r in dead if r.value]
    reasons = Counter(d["error"] for d in letters)
    assert reasons == Counter(
        {"bad_json": 2, "bad_record": 3, "empty_message": 1, "bad_key": 1}
    ), reasons
    # The original bytes travel with each dead letter.
    import base64

    raws = {base64.b64decode(d["raw_b64"]) for d in letters}
    assert {v or b"" for _, v in bad} == raws
    assert all(d["source"].startswith(f"{cluster.settings.topic_raw}/") for d in letters)
    assert_same_as_offline(cluster, good, by_host(clean))


def test_fetch_highwaters_sees_the_end_of_multi_record_batches(cluster: Cluster) -> None:
    from aiokafka import TopicPartition

    topic = cluster.settings.topic_raw
    cluster.produce_messages([(b"k", b"v%d" % i) for i in range(10)])  # one key: one partition, one batch
    records = cluster.read(topic)
    assert len(records) == 10
    part = records[0].partition
    hw = run(fetch_highwaters(cluster.bootstrap, [TopicPartition(topic, p) for p in range(PARTITIONS)]))
    assert hw[TopicPartition(topic, part)] == 10
    assert sum(hw.values()) == 10
