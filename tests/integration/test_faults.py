"""Faults under a running worker, on the real Tansu broker: a broker restart, a corrupt RocksDB
directory, a rebalance mid-stream, hostile messages.

Each test checks the same two things at the end:

- every input offset of pages.raw has exactly one output downstream, a clean page or a
  dead letter (copies after a replay are allowed only byte-identical);
- the clean pages, events and per-host tables equal those of an offline run of the same
  pages in the same order.

Figures (time to reconnect, to recover) are printed (`pytest -s`) and written down in
docs/stream.md, "Faults"; nothing here asserts a duration.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.state.changelog import StateLayout, records_of
from detemplate.stream.kafka_io import Record

from tests.factories import interleave, make_site
from tests.integration.conftest import (
    PARTITIONS,
    Cluster,
    Message,
    assert_each_input_once,
    by_host,
    offline,
    outputs_by_input,
    page_message,
    report_counts,
)
from tests.integration.test_stream_broker import assert_same_as_offline, assert_tables_equal, assignment

pytestmark = pytest.mark.broker


# -- the input --------------------------------------------------------------------------------


def crawl(n_per_host: int, per_partition: int) -> list[RawPage]:
    """Interleaved pages of generated sites, `per_partition` hosts on each pages.raw partition
    (the producer's partitioner puts most "siteN.example" keys on partitions 0 and 3), the
    first site with a redesign half way."""
    from aiokafka.partitioner import DefaultPartitioner  # type: ignore[import-untyped]  # no stubs

    partitioner, parts = DefaultPartitioner(), list(range(PARTITIONS))
    chosen: dict[int, list[int]] = defaultdict(list)
    i = 0
    while any(len(chosen[p]) < per_partition for p in parts):
        p = partitioner(f"site{i}.example".encode(), parts, parts)
        if len(chosen[p]) < per_partition:
            chosen[p].append(i)
        i += 1
    ids = sorted(i for ids in chosen.values() for i in ids)
    sites = [
        make_site(f"site{i}.example", n_per_host, seed=i, layout=("blog", "docs", "news")[i % 3],
                  redesign=n_per_host // 2 if i == ids[0] else None)
        for i in ids
    ]
    return [sp.page for sp in interleave(*sites)]


# -- what every test checks ------------------------------------------------------------------


class all_urls_out:  # lower case: used like the predicate functions beside it
    """Predicate for `Cluster.wait_for`: every page's URL is on the clean topic. On a
    timeout, `explain` says which are missing and where their raw messages are."""

    def __init__(self, pages: list[RawPage]) -> None:
        self.urls = {p.url for p in pages}

    def __call__(self, records: list[Record]) -> bool:
        return {json.loads(r.value)["url"] for r in records} >= self.urls

    def explain(self, records: list[Record], cluster: Cluster) -> str:
        missing = self.urls - {json.loads(r.value)["url"] for r in records}
        where = {}
        for r in cluster.read(cluster.settings.topic_raw):
            try:
                url = json.loads(r.value)["url"]
            except (TypeError, ValueError, KeyError):
                continue
            if url in missing:
                where.setdefault(url, []).append(f"{r.partition}/{r.offset}")
        lines = [f"{len(missing)} page(s) not out; their raw messages (partition/offset):"]
        lines += [f"  {u}: {', '.join(where.get(u, ['not on the raw topic']))}" for u in sorted(missing)[:10]]
        return "\n".join(lines)


def first_clean_after(c: Cluster, before: int, start: float, timeout_s: float = 120.0) -> float:
    """Seconds from `start` until pages.clean holds more than `before` records."""
    c.wait_for(c.settings.topic_clean, lambda rs: len(rs) > before, timeout_s=timeout_s)
    return time.monotonic() - start


# -- 1. the broker stops and starts again under a running worker -----------------------------


def stored_records(c: Cluster, topic: str) -> int:
    """Records of `topic` in the stopped broker's S3 bucket (the sum of its partitions' watermarks).

    Read from s3rver's directory, where Tansu keeps clusters/<id>/topics/<topic>/partitions/
    <n>/watermark.json; only for telling how far the worker had got when the broker stopped.
    """
    assert c.broker.proc is None, "only while the broker is stopped"
    files = list((c.tmp / "s3").glob(f"*/clusters/*/topics/{topic}/partitions/*/watermark.json._S3rver_object"))
    assert files, f"no watermark objects of {topic} in the S3 bucket: has Tansu's layout changed?"
    return sum(json.loads(f.read_text())["high"] or 0 for f in files)


def test_broker_restart_under_a_running_worker_loses_nothing(s3_cluster: Cluster) -> None:
    """Tansu on s3rver keeps topics, offsets and groups across a restart. The broker is killed
    (SIGKILL) while the worker is in the middle of a batch of pages, stays down for 3 s and
    comes back on the same port. The same worker process reconnects on its own, and every
    page comes out once, as offline."""
    c = s3_cluster
    pages = crawl(60, per_partition=1)  # 240 pages, 4 hosts
    first, second, third = pages[:80], pages[80:200], pages[200:]
    sent = c.produce_tracked([page_message(p) for p in first])
    w1 = c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(first))
    sent.update(c.produce_tracked([page_message(p) for p in second]))
    # Crash the broker while the worker is deciding `second`: some of its pages decided and
    # handed to the producer, some of those delivered, fewer committed (commits come every second).
    c.wait_metric("w1", "detemplate_pages_out_total", len(first) + 20)
    c.broker.stop(kill=True)
    # What the broker had stored when it stopped: the worker was in the middle of `second`.
    delivered = stored_records(c, c.settings.topic_clean)
    assert delivered < len(first) + len(second), "the worker finished before the broker stopped"
    time.sleep(3.0)  # the outage: the worker's fetches, heartbeats, sends and commits fail meanwhile
    assert w1.poll() is None, f"the worker exited while the broker was down:\n{c.logs_tail()}"
    decided = c.metric("w1", "detemplate_pages_out_total")  # decided and handed to its producer
    t_up = time.monotonic()
    c.broker.start()
    reconnect_s = first_clean_after(c, delivered, t_up)
    sent.update(c.produce_tracked([page_message(p) for p in third]))
    c.wait_for(c.settings.topic_clean, all_urls_out(pages), timeout_s=180)
    done_s = time.monotonic() - t_up
    print(f"\nbroker restart: {delivered} of {len(first) + len(second)} clean pages stored when the broker "
          f"stopped, {decided:.0f} decided by then; after the restart, a new clean page within {reconnect_s:.1f} s, "
          f"all {len(pages)} within {done_s:.1f} s")
    assert_each_input_once(c, sent)
    assert_same_as_offline(c, pages, by_host(c.read(c.settings.topic_clean)))
    assert_tables_equal(c, pages)
    assert w1.poll() is None  # the same process did it all


def sigterm_once_fetches_fail(c: Cluster, name: str, proc: subprocess.Popen[bytes], deadline_s: float) -> int:
    """SIGTERM to the worker once its log says a fetch failed (the broker gone: its next fetch
    request then waits out its retry backoff); its exit code, within `deadline_s` (else
    TimeoutExpired). Prints how long it took."""
    deadline = time.monotonic() + 60.0
    while "Failed fetch messages" not in c.log(name):
        assert time.monotonic() < deadline, f"{name} never noticed the broker was gone:\n{c.logs_tail()}"
        assert proc.poll() is None, f"{name} exited while the broker was down:\n{c.logs_tail()}"
        time.sleep(0.1)
    start = time.monotonic()
    code = c.terminate(proc, timeout_s=deadline_s)
    print(f"\n{name}, SIGTERM with the broker gone: exited {code} after {time.monotonic() - start:.1f} s")
    return code


def test_sigterm_with_the_broker_gone_stops_the_worker_promptly(cluster: Cluster) -> None:
    """A worker told to stop (SIGTERM) while its broker cannot be reached exits in seconds. Its
    consumer's fetch request is then waiting out its retry backoff, and aiokafka's consumer,
    closing, awaited that cancelled request: the CancelledError ended the consumer thread's stop
    before the thread said it had stopped, and the worker waited out mode's 60 s timeout for it.
    The worker has no page in hand (none was sent), so nothing else of its stop waits on the
    broker: a worker with outputs in its producer is the next test's."""
    c = cluster
    w1 = c.start_worker("w1")
    deadline = time.monotonic() + 90.0
    while assignment(c.log("w1")) != set(range(PARTITIONS)):
        assert time.monotonic() < deadline, f"w1 was never assigned every partition:\n{c.logs_tail()}"
        time.sleep(0.1)
    c.broker.stop(kill=True)
    code = sigterm_once_fetches_fail(c, "w1", w1, deadline_s=45.0)
    assert code == 0, c.logs_tail()
    assert "Error while stopping child" not in c.log("w1"), c.logs_tail()
    # The client's failed connects from the kill to the exit, a second or two: each logged once
    # every 10 s (stream/logs.py); several a second without that (7 in a run of this test).
    retries = c.log("w1").count("Unable connect to node")
    print(f"w1: {retries} lines of failed connects")
    assert retries <= 2, c.logs_tail()


def test_sigterm_with_the_broker_gone_and_outputs_undelivered_ends_the_worker_in_its_stop_timeout(
    cluster: Cluster,
) -> None:
    """The broker dies while the worker is deciding: outputs wait in its producer, which would
    wait for them for Faust's request timeout (20 minutes). Told to stop, the worker ends within
    its stop timeout (DETEMPLATE_STOP_TIMEOUT_S, 8 s here), with code 75 and the reason; the
    next worker reads what it did not commit again, as after a crash."""
    c = cluster
    c.settings = c.settings.with_overrides(stop_timeout_s=8.0)
    pages = crawl(60, per_partition=1)  # 240 pages, 4 hosts
    c.produce_pages(pages)
    w1 = c.start_worker("w1")
    c.wait_metric("w1", "detemplate_pages_out_total", 40)
    c.broker.stop(kill=True)  # in the middle of the pages
    assert c.metric("w1", "detemplate_pages_out_total") < len(pages), "the worker finished before the broker stopped"
    code = sigterm_once_fetches_fail(c, "w1", w1, deadline_s=40.0)
    assert code == 75, c.logs_tail()
    assert "the stop did not end within 8 s" in c.log("w1"), c.logs_tail()


# -- 2. a corrupt RocksDB directory ----------------------------------------------------------


def partition_dbs(data_dir: Path) -> dict[int, Path]:
    """The worker's RocksDB directory of each state partition (Faust: .../tables/hosts-<N>.db)."""
    found = {}
    for path in data_dir.rglob("hosts-*.db"):
        if path.is_dir():
            found[int(path.name.removeprefix("hosts-").removesuffix(".db"))] = path
    return found


def flush_to_sst(path: Path) -> list[Path]:
    """Open a stopped worker's partition database, flush its memtable to an SST file (as RocksDB
    does when the memtable fills), close it; the SST files."""
    import rocksdict

    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    db.flush()
    db.close()
    return sorted(path.glob("*.sst"))


def garble(path: Path, start: int = 0, end: int | None = None) -> None:
    """Flip bits in every 7th byte of a file, from `start` up to `end`."""
    data = bytearray(path.read_bytes())
    for i in range(start, len(data) if end is None else end, 7):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def tables_from_rocksdb(data_dir: Path, hosts: set[str], snapshot_every: int) -> dict[str, object]:
    """Each host's table as the worker's own RocksDB directory holds it (the worker stopped)."""
    import rocksdict

    records: dict[bytes, bytes] = {}
    for path in partition_dbs(data_dir).values():
        db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True),
                             access_type=rocksdict.AccessType.read_only())
        records.update((bytes(k), bytes(v)) for k, v in db.items())
        db.close()
    layout = StateLayout(EngineParams(), snapshot_every)
    return {host: layout.load(records_of(host, records)) for host in hosts}


def test_corrupt_rocksdb_partitions_are_moved_aside_and_rebuilt_from_the_changelog(cluster: Cluster) -> None:
    """The worker stops; each of its four partition databases is damaged a different way; it
    starts again on the same directory, names each corruption in its log, moves the database
    aside, recovers it from the changelog and goes on with the host tables it had."""
    c = cluster
    pages = crawl(40, per_partition=2)  # 320 pages, 8 hosts, 2 on each partition
    first, second = pages[:160], pages[160:]
    sent = c.produce_tracked([page_message(p) for p in first])
    w1 = c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(first))
    assert c.terminate(w1) == 0
    data_dir = c.tmp / "w1-data"
    dbs = partition_dbs(data_dir)
    assert set(dbs) == set(range(PARTITIONS)), dbs
    # Damage: CURRENT garbled, MANIFEST garbled, an SST file cut in half, an SST block garbled
    # (this last one still opens: only reading the block fails its checksum).
    ssts = {p: flush_to_sst(dbs[p]) for p in (2, 3)}
    assert ssts[2] and ssts[3], f"no SST files to damage: {ssts}"
    garble(dbs[0] / "CURRENT")
    garble(next(dbs[1].glob("MANIFEST-*")), start=8)
    sst = ssts[2][0]
    with open(sst, "r+b") as fh:
        fh.truncate(os.path.getsize(sst) // 2)
    garble(ssts[3][0], start=64, end=os.path.getsize(ssts[3][0]) // 3)  # data blocks; index and footer intact
    t_start = time.monotonic()
    c.start_worker("w1")  # same name: same data directory
    sent.update(c.produce_tracked([page_message(p) for p in second]))
    recover_s = first_clean_after(c, len(first), t_start)
    c.wait_for(c.settings.topic_clean, all_urls_out(pages), timeout_s=180)
    log = c.log("w1")
    for p in range(PARTITIONS):
        assert f"state store CORRUPT: partition={p} " in log, f"partition {p}: no corruption logged\n{log[-4000:]}"
    assert "does not open: Corruption: CURRENT" in log
    assert "a block fails its checksum" in log
    aside = sorted(p.name for p in data_dir.rglob("hosts-*.db.corrupt-*"))
    assert len(aside) == PARTITIONS, aside
    print(f"\ncorrupt RocksDB: restart to first new clean page {recover_s:.1f} s; moved aside: {aside}")
    assert_each_input_once(c, sent)
    assert_same_as_offline(c, pages, by_host(c.read(c.settings.topic_clean)))
    assert_tables_equal(c, pages)
    # The rebuilt local databases hold the tables themselves, not just the changelog.
    c.stop()
    ref = offline(pages)
    local = tables_from_rocksdb(data_dir, set(ref.clean), c.settings.snapshot_every)
    for host in ref.clean:
        want, got = ref.store.get(host), local[host]
        assert want is not None and got is not None, host
        assert got.state() == want.state(), f"{host}: the rebuilt local table differs"


# -- 3. a rebalance while hosts' pages are in flight ------------------------------------------


def wait_assigned(c: Cluster, name: str, timeout_s: float = 90.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        got = assignment(c.log(name))
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{name} got no partitions within {timeout_s} s\n{c.logs_tail()}")
        time.sleep(0.2)


def test_rebalance_mid_stream_a_worker_joins_then_one_leaves(cluster: Cluster) -> None:
    """Pages flow in steadily (25 a second). w1 is mid-stream when w2 joins the group (part of
    the partitions move to w2, which recovers their state from the changelog), then w1 leaves
    by SIGTERM (w2 takes everything over), while pages keep coming."""
    c = cluster
    # Up to 4,000 pages, 8 hosts (160 s at 25 a second): the test stops sending well before, even
    # on a loaded machine where the join and the takeover are slow (1,200 ran out once, 1 run in 6).
    pages = crawl(500, per_partition=2)
    trickle = c.trickle([page_message(p) for p in pages], per_s=25)
    w1 = c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, lambda rs: len(rs) >= 40)
    t_join = time.monotonic()
    c.start_worker("w2")
    w2_first = wait_assigned(c, "w2")
    join_s = time.monotonic() - t_join
    out_at_join = len(c.read(c.settings.topic_clean))
    c.wait_for(c.settings.topic_clean, lambda rs: len(rs) >= out_at_join + 40)
    t_leave = time.monotonic()
    assert c.terminate(w1) == 0
    out_at_leave = len(c.read(c.settings.topic_clean))
    c.wait_for(c.settings.topic_clean, lambda rs: len(rs) >= out_at_leave + 40)
    takeover_s = time.monotonic() - t_leave
    sent = trickle.stop()
    assert trickle.count < len(pages), "the background producer ran out of pages: no flow at the end"
    done = pages[: trickle.count]
    c.wait_for(c.settings.topic_clean, all_urls_out(done), timeout_s=180)
    print(f"\nrebalance: w2 joined with partitions {sorted(w2_first)} {join_s:.1f} s after it started "
          f"({out_at_join} clean pages then); after w1 left, 40 more out within {takeover_s:.1f} s; "
          f"{len(done)} pages in all")
    assert w2_first != set(range(PARTITIONS)), f"w2 should have taken part of the partitions: {w2_first}"
    assert assignment(c.log("w2")) == set(range(PARTITIONS)), "w2 did not take over every partition"
    assert_each_input_once(c, sent)
    assert_same_as_offline(c, done, by_host(c.read(c.settings.topic_clean)))
    assert_tables_equal(c, done)


# -- 4. hostile messages on pages.raw ---------------------------------------------------------

_HTML = "<html><body><div><p>Some words of a page.</p></div></body></html>"


def _rec(**fields: object) -> bytes:
    return json.dumps(fields).encode()


# (key, value, the dead letter's reason)
HOSTILE: list[tuple[bytes | None, bytes | None, str]] = [
    (b"x.example", b"not json at all", "bad_json"),
    (b"x.example", b"\xff\xfe\x00 not utf-8", "bad_json"),
    (b"x.example", b'{"url": "https://x.example/cut", "html": "<p>', "bad_json"),  # cut off
    (b"x.example", b"", "empty_message"),
    (b"x.example", None, "empty_message"),  # a tombstone
    (b"x.example", b"[1, 2, 3]", "bad_record"),  # not an object
    (b"x.example", b'"just a string"', "bad_record"),
    (b"x.example", _rec(html=_HTML), "bad_record"),  # no url
    (b"x.example", _rec(url="https://x.example/no-body"), "bad_record"),  # neither html nor body_b64
    (b"x.example", _rec(url="https://x.example/int-html", html=42), "bad_record"),  # wrong type
    (b"x.example", _rec(url=7, html=_HTML), "bad_record"),
    (b"x.example", _rec(url="https://x.example/list-host", host=["x.example"], html=_HTML), "bad_record"),
    (b"x.example", _rec(url="https://x.example/b64", body_b64="%%% not base64"), "bad_record"),
    (b"x.example", _rec(v=2, url="https://x.example/v2", html=_HTML), "unsupported_version"),
    (b"x.example", _rec(v="1", url="https://x.example/v-string", html=_HTML), "unsupported_version"),
    (b"y.example", _rec(url="https://x.example/other-key", html=_HTML), "bad_key"),  # key is not the host
    (None, _rec(url="https://x.example/no-key", html=_HTML), "bad_key"),
    (b"X.example", _rec(url="https://x.example/case-key", html=_HTML), "bad_key"),  # hosts are lower-cased
]


def test_hostile_messages_each_dead_with_its_reason_and_bytes(cluster: Cluster) -> None:
    """Each hostile message gives one dead letter with its reason and its exact original bytes,
    between good pages of the same hosts; the worker goes on and the good pages come out as offline."""
    c = cluster
    good = crawl(6, per_partition=1)  # 24 pages, 4 hosts
    half = len(good) // 2
    messages: list[Message] = [page_message(p) for p in good[:half]]
    messages += [(key, value) for key, value, _ in HOSTILE]
    messages += [page_message(p) for p in good[half:]]
    sent = c.produce_tracked(messages)
    c.start_worker("w1")
    c.wait_for(c.settings.topic_dead, lambda rs: len(rs) >= len(HOSTILE))
    c.wait_for(c.settings.topic_clean, all_urls_out(good))
    outputs = assert_each_input_once(c, sent)
    expected = {m: reason for m, (_, _, reason) in zip(messages[half:half + len(HOSTILE)], HOSTILE, strict=True)}
    checked = 0
    for pos, (key, value) in sent.items():
        letter = json.loads(outputs[pos])
        if (key, value) not in expected:
            assert "error" not in letter, letter  # a good page: clean
            continue
        reason = expected[(key, value)]
        assert letter["error"] == reason, (value, letter)
        assert base64.b64decode(letter["raw_b64"]) == (value or b""), letter
        assert letter["source"] == f"{c.settings.topic_raw}/{pos[0]}/{pos[1]}"
        assert letter["detail"]
        checked += 1
    assert checked == len(HOSTILE)
    assert_same_as_offline(c, good, by_host(c.read(c.settings.topic_clean)))
    assert_tables_equal(c, good)  # the dead letters left no trace in the state


# -- 5. a crash while a replaced snapshot's pages are not committed --------------------------


def test_a_crash_after_a_snapshot_replaced_uncommitted_pages_loses_none(cluster: Cluster) -> None:
    """The worker commits before a snapshot replaces a host's older one; when that commit cannot
    happen (here: turned off, and no periodic commit either), a crash leaves pages to read again
    that no retained snapshot and deltas rebuild. Each is decided against the host's current
    table, so it comes out again (a duplicate that may differ, counted), never lost."""
    c = cluster
    c.settings = c.settings.with_overrides(snapshot_every=4, commit_interval_s=3600.0, commit_before_snapshot=False)
    pages = crawl(30, per_partition=1)  # 120 pages of 4 hosts: 30 a host, 2K = 8 deltas retained
    sent = c.produce_tracked([page_message(p) for p in pages])
    w1 = c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(pages))
    assert "not committed before its snapshot was replaced" in c.log("w1")
    w1.kill()  # SIGKILL: nothing was committed
    w1.wait()
    first = by_host(c.read(c.settings.topic_clean))
    c.start_worker("w2")  # an empty directory: the state comes from the changelog
    c.wait_metric("w2", "detemplate_pages_in_total", len(pages))
    c.wait_metric("w2", "detemplate_pages_out_total", len(pages))
    out = outputs_by_input(c, sent)
    report_counts(c, sent, out)
    assert set(out) == set(sent), f"lost: {sorted(set(sent) - set(out))[:5]}"
    differing = sum(1 for vals in out.values() if len(vals) > 1)
    redecided = c.metric("w2", 'detemplate_pages_order_total{kind="redecided"}')
    replayed = c.metric("w2", 'detemplate_pages_order_total{kind="replayed"}')
    print(f"\nsnapshot window: {len(pages)} pages read twice; {replayed:.0f} replayed identically, {redecided:.0f} "
          f"decided against the current table ({differing} of them differ from their first output), 0 lost")
    assert replayed + redecided == len(pages) and redecided >= 4 * (30 - 2 * 4)
    assert differing <= redecided
    assert_same_as_offline(c, pages, first)  # the first outputs, as offline
    assert_tables_equal(c, pages)  # and the state: a page decided again is not applied again
