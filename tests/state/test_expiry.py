"""Whole hosts leave `run`'s state (detemplate.state.expiry): unseen too long, or over the byte budget.

The worker's side (tombstones on the changelog, recovery) is in tests/integration/test_expiry.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from detemplate.cli import main
from detemplate.engine.errors import ConfigError
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import process_page
from detemplate.engine.table import HostTable
from detemplate.state.expiry import ExpiryPolicy, IndexEntry, Ledger, choose_expired
from detemplate.state.memory import MemoryStore
from detemplate.state.rocks import RocksStore

from tests.factories import interleave, make_site, write_jsonl

PARAMS = EngineParams()


def entry(host: str, page: int, ms: int, nbytes: int = 100) -> IndexEntry:
    return IndexEntry(host, page, ms, nbytes, 3)


def test_choose_expired_by_pages_by_time_and_by_budget() -> None:
    entries = [entry("a", 10, 1_000), entry("b", 50, 2_000), entry("c", 90, 3_000)]
    by_pages = choose_expired(entries, ExpiryPolicy(ttl_pages=50), now_ms=3_000, page_now=100)
    assert [(x.entry.host, x.reason, x.unseen_pages) for x in by_pages] == [("a", "unseen_pages", 90)]
    by_time = choose_expired(entries, ExpiryPolicy(ttl_s=1.5), now_ms=3_000, page_now=100)
    assert [(x.entry.host, x.reason) for x in by_time] == [("a", "unseen_time")]
    # 300 bytes over a budget of 250: the least recently seen go until 0.9 x 250 = 225 is reached.
    by_budget = choose_expired(entries, ExpiryPolicy(budget_bytes=250), now_ms=3_000, page_now=100)
    assert [(x.entry.host, x.reason) for x in by_budget] == [("a", "budget")]
    by_budget = choose_expired(entries, ExpiryPolicy(budget_bytes=150), now_ms=3_000, page_now=100)
    assert [x.entry.host for x in by_budget] == ["a", "b"]
    # Per-host clocks (the worker: each host's partition has its own offsets).
    per_host = choose_expired(entries, ExpiryPolicy(ttl_pages=5), now_ms=0, page_now={"a": 12, "b": 60, "c": 91})
    assert [x.entry.host for x in per_host] == ["b"]
    assert choose_expired(entries, ExpiryPolicy(), now_ms=10**12, page_now=10**9) == []
    with pytest.raises(ConfigError):
        ExpiryPolicy(ttl_pages=-1)


def test_index_entries_round_trip() -> None:
    e = entry("ü.example", 7, 1_700_000_000_000, 1234)
    assert IndexEntry.from_bytes("ü.example", e.to_bytes()) == e


def crawl_of(hosts: list[str], pages: int, seed: int = 0) -> list:
    return [sp.page for sp in interleave(*(make_site(h, pages, seed=seed + i) for i, h in enumerate(hosts)))]


@pytest.mark.parametrize("kind", ["memory", "rocks"])
def test_hosts_unseen_for_the_span_leave_the_store(kind: str, tmp_path: Path) -> None:
    policy = ExpiryPolicy(ttl_pages=40)
    store = MemoryStore(policy) if kind == "memory" else RocksStore(tmp_path / "db", PARAMS.table, policy=policy)
    old = crawl_of(["old1.example", "old2.example"], 10)  # 20 pages
    new = crawl_of(["new1.example", "new2.example"], 30, seed=5)  # 60 pages after them
    for page in old + new:
        process_page(page, store, PARAMS)
    store.expire(force=True)
    events = store.take_events()
    assert sorted(e.host for e in events) == ["old1.example", "old2.example"]
    assert {e.type for e in events} == {"template.host_expired"}
    assert all(e.details["reason"] == "unseen_pages" and e.details["unseen_pages"] > 40 for e in events)
    assert sorted(store.hosts()) == ["new1.example", "new2.example"]
    store.close()
    if kind == "rocks":  # the state on disk holds exactly the live hosts, and its clock
        again = RocksStore(tmp_path / "db", PARAMS.table, policy=policy)
        assert sorted(again.hosts()) == ["new1.example", "new2.example"]
        assert again.ledger.clock == 80
        assert sorted(e.host for e in again.index()) == ["new1.example", "new2.example"]
        again.close()


def test_the_budget_drops_the_least_recently_seen_hosts(tmp_path: Path) -> None:
    hosts = [f"h{i}.example" for i in range(6)]
    store = RocksStore(tmp_path / "db", PARAMS.table, policy=ExpiryPolicy(budget_bytes=1))
    for page in crawl_of(hosts, 6):
        process_page(page, store, PARAMS)
    store.flush()
    sizes = {e.host: e.state_bytes for e in store.index()}
    budget = int(sum(sizes.values()) * 0.6)
    store.ledger.policy = ExpiryPolicy(budget_bytes=budget)
    store.expire(force=True)
    kept = {e.host: e.state_bytes for e in store.index()}
    assert sum(kept.values()) <= budget
    # The interleaved crawl saw h0 first on each round: the least recently seen go first.
    dropped = sorted(set(hosts) - set(kept))
    assert dropped == hosts[: len(dropped)]
    assert {e.details["reason"] for e in store.take_events()} == {"budget"}
    store.close()


def test_a_pathological_table_is_bounded_with_an_event() -> None:
    store = MemoryStore(ExpiryPolicy(max_table_entries=150))
    for page in crawl_of(["a.example"], 12):
        process_page(page, store, PARAMS)
        for event in store.take_events():
            assert event.type == "template.table_capped"
            assert event.details["max_table_entries"] == 150 and event.details["table_segments"] <= 150
    table = store.get("a.example")
    assert table is not None and len(table) <= 150


def test_the_ledger_sweeps_every_so_many_pages_or_a_tenth_of_the_hosts() -> None:
    # A budget weighs the whole state: a tenth of its hosts (of every job's, `scale`).
    ledger = Ledger(ExpiryPolicy(ttl_s=5.0, budget_bytes=1))
    ledger.clock = Ledger.SWEEP_EVERY_PAGES - 1
    assert not ledger.due()
    ledger.clock += 1
    assert ledger.due()
    ledger.swept(hosts=1_000_000, expired=[])
    ledger.clock += Ledger.SWEEP_EVERY_PAGES
    assert not ledger.due()  # a million hosts: the next sweep after 100,000 pages
    ledger.clock += 90_000
    assert ledger.due()
    ledger.scale = 4  # a job of four holding a quarter of the hosts
    ledger.swept(hosts=250_000, expired=[])
    ledger.clock += 99_999
    assert not ledger.due()
    assert not Ledger(ExpiryPolicy()).due()


def test_the_ledger_sweeps_a_tenth_of_the_ttl_apart_however_many_hosts() -> None:
    """Hosts dropped by the pages they go unseen alone: sweeps at the same pages whatever the
    jobs hold (`run --jobs` writes the bytes of one job)."""
    ledger = Ledger(ExpiryPolicy(ttl_pages=500_000))
    ledger.swept(hosts=10_000_000, expired=[])
    ledger.clock += 49_999
    assert not ledger.due()
    ledger.clock += 1
    assert ledger.due()  # 50,000 pages: a tenth of the ttl, not a tenth of ten million hosts


def test_the_clock_counts_the_records_run_advances_it_by() -> None:
    ledger = Ledger(ExpiryPolicy(ttl_pages=5), clock=100)
    table = HostTable(PARAMS.table)
    ledger.seen("a.example", table, 0)
    assert ledger.clock == 101  # nobody advances it: a page taken counts one
    ledger.advance(7)  # the run's 7th record (the pages and the errors before it counted)
    ledger.seen("b.example", table, 0)
    ledger.seen("b.example", table, 0)
    assert ledger.clock == 107 and ledger.last_seen["b.example"][0] == 107


def test_run_with_expiry_writes_the_events_and_keeps_the_live_hosts(tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl"
    write_jsonl(crawl_of(["gone.example", "stays.example"], 8), first)
    write_jsonl(crawl_of(["stays.example", "new.example"], 30, seed=3), second)
    state = tmp_path / "state"
    args = ["--state", str(state), "--host-ttl-pages", "25"]
    assert main(["run", str(first), "-o", str(tmp_path / "a.jsonl"), *args]) == 0
    events = tmp_path / "events.jsonl"
    assert main(["run", str(second), "-o", str(tmp_path / "b.jsonl"), "--events", str(events), *args]) == 0
    expired = [e for e in map(json.loads, events.read_text().splitlines()) if e["type"] == "template.host_expired"]
    assert [e["host"] for e in expired] == ["gone.example"]  # unseen for the second run's 60 pages
    store = RocksStore(state, PARAMS.table)
    assert sorted(store.hosts()) == ["new.example", "stays.example"]
    store.close()
    assert main(["run", str(first), "-o", str(tmp_path / "c.jsonl"), "--host-ttl-pages", "-3"]) == 2
