"""Standby replicas on the real Tansu broker (DETEMPLATE_STANDBY_REPLICAS=1): a second worker
keeps warm copies of the first one's state partitions, says when they have started and caught
up (`detemplate_standby_partitions_waiting` and `detemplate_standby_remaining_records` 0), and
when the first one dies takes its partitions over from where its standbys had read to, with the
same outputs as an offline run. bench-scale's failover figures rely on this. Faust applies a
standby's records to RocksDB in batches (at 1,000 records, or at the rebalance that makes it
active), so the test reads Faust's recovery log, not the standby's database."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from tests.integration.conftest import PARTITIONS, Cluster
from tests.integration.test_faults import all_urls_out, crawl, wait_assigned
from tests.integration.test_stream_broker import assert_same_as_offline, assert_tables_equal, assignment, by_host

pytestmark = pytest.mark.broker

STANDBY = "detemplate_standby_remaining_records"
WAITING = "detemplate_standby_partitions_waiting"


def start_offsets(log: str, title: str) -> dict[int, int]:
    """The state topic's partitions and offsets in the last table of Faust's recovery log
    titled `title` ("Highwater - Standby": where each standby partition had to read to;
    "Reading Starts At - Active": where an active restore started, -1 for the beginning)."""
    at = log.rfind(title)
    assert at >= 0, f"no {title!r} table in the log"
    rows: dict[int, int] = {}
    for line in log[at:].splitlines()[1:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit():
            rows[int(cells[1])] = int(cells[2])
        elif rows or not line.startswith(("|", "+")):
            break  # the end of the table
    return rows


def test_a_standby_catches_up_then_takes_over_when_the_active_dies(cluster: Cluster) -> None:
    c = cluster
    c.settings = c.settings.with_overrides(standby_replicas=1)
    # 8 hosts, 2 on each partition, 32 pages each: the first 24 of each before the failover.
    seen: Counter[str] = Counter()
    pages, more = [], []
    for p in crawl(32, per_partition=2):
        seen[p.host] += 1
        (pages if seen[p.host] <= 24 else more).append(p)
    c.produce_pages(pages)
    w1 = c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(pages))
    c.start_worker("w2")
    mine = wait_assigned(c, "w2")
    deadline = time.monotonic() + 120
    while True:  # both in the group, the partitions split and recovered, every standby caught up
        a, b = assignment(c.log("w1")), assignment(c.log("w2"))
        split = bool(a and b and not (a & b) and (a | b) == set(range(PARTITIONS)))
        ready = split and all(c.metric(w, "detemplate_ready") == 1 for w in ("w1", "w2"))
        if ready and all(c.metric(w, STANDBY, -1) == 0 and c.metric(w, WAITING, -1) == 0 for w in ("w1", "w2")):
            mine = b or mine
            break
        if time.monotonic() > deadline:
            pytest.fail(f"no split with standbys caught up: {a} {b}\n{c.logs_tail()}")
        time.sleep(0.2)
    standbys = set(range(PARTITIONS)) - mine
    caught_up = start_offsets(c.log("w2"), "Highwater - Standby")
    assert set(caught_up) == standbys and all(n > 0 for n in caught_up.values()), caught_up
    # w1 dies; w2 takes every partition over, and the pages that come next are decided with the
    # hosts' tables as they were (the same bytes as offline, tables equal).
    w1.send_signal(signal.SIGKILL)
    c.stopped.add(w1.pid)
    w1.wait(timeout=30)
    c.produce_pages(more)
    c.wait_for(c.settings.topic_clean, all_urls_out(more), timeout_s=180)
    assert assignment(c.log("w2")) == set(range(PARTITIONS))
    # The takeover restored w1's partitions from where the standby had read to, not from the
    # start of the changelog (-1): the standby's records were applied, not read again.
    restored_from = start_offsets(c.log("w2"), "Reading Starts At - Active")
    assert all(restored_from[p] >= caught_up[p] - 1 for p in standbys), (restored_from, caught_up)
    everything = pages + more
    assert_same_as_offline(c, everything, by_host(c.read(c.settings.topic_clean)))
    assert_tables_equal(c, everything)
