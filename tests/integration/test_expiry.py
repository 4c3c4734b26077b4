"""Whole hosts leave the worker's state, with tombstones on the changelog (issues 15 and 17).

Hosts unseen for a span of their partition's messages are dropped (a `template.host_expired`
event each); so are the least recently seen hosts over the byte budget. Each leaves with a
tombstone on every one of its changelog keys, so a worker that restores its partitions from
the changelog afterwards (here: an empty data directory) holds exactly the live hosts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from detemplate.state.changelog import host_of

from tests.integration.conftest import Cluster
from tests.integration.test_faults import all_urls_out, crawl, partition_dbs
from tests.integration.test_stream_broker import compacted

pytestmark = pytest.mark.broker


def hosts_in_rocksdb(data_dir: Path) -> set[str]:
    """The hosts with any record in a stopped worker's partition databases."""
    import rocksdict

    hosts: set[str] = set()
    for path in partition_dbs(data_dir).values():
        db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True),
                             access_type=rocksdict.AccessType.read_only())
        keys = db.keys()
        hosts.update(h for k in keys if (h := host_of(bytes(k))) is not None)  # type: ignore[arg-type]
        db.close()
    return hosts


def expired_events(c: Cluster) -> list[dict[str, object]]:
    events = [json.loads(r.value) for r in c.read(c.settings.topic_events) if r.value]
    return [e for e in events if e["type"] == "template.host_expired"]


def keep_sending_until(c: Cluster, pages: list, done: object, timeout_s: float = 120.0) -> None:
    """Send pages a few at a time until `done()` holds: a sweep runs between two messages."""
    deadline = time.monotonic() + timeout_s
    sent = 0
    while not done():  # type: ignore[operator]
        assert sent < len(pages) and time.monotonic() < deadline, f"not done after {sent} pages\n{c.logs_tail()}"
        c.produce_pages(pages[sent:sent + 8])
        sent += 8
        time.sleep(0.5)


def test_hosts_unseen_for_a_span_expire_and_a_restore_holds_exactly_the_live_hosts(cluster: Cluster) -> None:
    c = cluster
    c.settings = c.settings.with_overrides(host_ttl_pages=30, expiry_sweep_s=0.3)
    old = crawl(5, per_partition=1)  # 4 hosts, one a partition: they stop after 5 pages each
    fresh = [p for p in crawl(120, per_partition=3) if p.host not in {q.host for q in old}]
    c.produce_pages(old)
    c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(old))
    time.sleep(2.5)  # their offsets committed: a host whose last page is not is never dropped
    old_hosts = {p.host for p in old}
    keep_sending_until(c, fresh, lambda: {e["host"] for e in expired_events(c)} >= old_hosts)
    events = expired_events(c)
    assert {e["host"] for e in events} == old_hosts, events  # no fresh host went
    assert all(e["details"]["reason"] == "unseen_pages" and e["details"]["unseen_pages"] > 30 for e in events)
    assert all(e["details"]["state_bytes"] > 0 and e["page_no"] == 5 for e in events)
    assert c.metric("w1", 'detemplate_hosts_expired_total{reason="unseen_pages"}') == len(old_hosts)
    # The compacted changelog keeps no record of an expired host.
    live = {host_of(k) for k in compacted(c)} - {None}
    assert live and not live & old_hosts
    assert c.terminate(c.procs[0]) == 0
    assert not hosts_in_rocksdb(c.tmp / "w1-data") & old_hosts

    # A worker that restores every partition from the changelog (an empty directory) holds the live hosts.
    c.start_worker("w2")
    last = [p for p in crawl(121, per_partition=3) if p.host not in old_hosts][-4:]
    c.produce_pages(last)
    c.wait_for(c.settings.topic_clean, all_urls_out(last))
    assert c.terminate(c.procs[1]) == 0
    restored = hosts_in_rocksdb(c.tmp / "w2-data")
    assert restored == live | {p.host for p in last}


def test_the_byte_budget_drops_the_least_recently_seen_hosts(cluster: Cluster) -> None:
    c = cluster
    pages = crawl(20, per_partition=3)  # 12 hosts
    c.settings = c.settings.with_overrides(state_budget_bytes=120_000, expiry_sweep_s=0.3)
    c.produce_pages(pages)
    c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(pages))
    time.sleep(2.5)  # committed
    more = [p for p in crawl(26, per_partition=3)][len(pages):]
    keep_sending_until(c, more, lambda: c.metric("w1", 'detemplate_hosts_expired_total{reason="budget"}', 0.0) > 0)
    assert 0 < c.metric("w1", "detemplate_state_bytes") <= 120_000
    events = expired_events(c)
    assert events and {e["details"]["reason"] for e in events} == {"budget"}
