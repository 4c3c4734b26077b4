"""No poison messages, and state records that fit, on the real Tansu broker (issue 15, items 0-3).

Outputs over the producer's limit used to stop the worker with exit 70, and every restart read
the same message and stopped again: a 1 MB bad value (its dead letter carries it), the clean
record of a 949 KB page of 30,000 blocks (4.4 MB), a 1 MB key; a lone surrogate in a URL
crashed the encoder; a host's snapshot over 1 MB never reached the changelog. Here each of
them comes out (a lean clean page, a dead letter that fits), the worker goes on, and a
second worker that reads the same input again does too.
"""

from __future__ import annotations

import base64
import json
import random

import pytest
from detemplate.engine.model import RawPage
from detemplate.state.changelog import record_kind
from detemplate.state.expiry import ExpiryPolicy
from detemplate.stream.kafka_io import encode_raw

from tests.integration.conftest import Cluster, Message, assert_each_input_once, by_host, page_message
from tests.integration.test_faults import all_urls_out, crawl
from tests.integration.test_stream_broker import assert_same_as_offline, assert_tables_equal, compacted

pytestmark = pytest.mark.broker


def table_page(host: str, i: int, cells: int) -> RawPage:
    """A page of one table whose every cell is new (a block each), plus the site's small template."""
    rng = random.Random(f"{host}:{i}")
    rows = "".join(f"<tr><td>{rng.getrandbits(40):x} row {j}</td></tr>" for j in range(cells))
    html = (f"<html><body><nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav><h1>Table {i}</h1>"
            f"<table>{rows}</table><footer><p>The footer of {host}</p></footer></body></html>")
    return RawPage(f"https://{host}/table/{i}.html", html, host)


def test_poison_outputs_come_out_as_lean_pages_or_dead_letters_and_the_worker_goes_on(cluster: Cluster) -> None:
    c = cluster
    good = crawl(6, per_partition=1)  # 24 pages of 4 hosts around the hostile ones
    rows = "".join(f"<tr><td>cell {j:05d} ab</td></tr>" for j in range(30_000))
    html = f"<html><body><h1>A long table</h1><table>{rows}</table></body></html>"
    big = RawPage("https://big.example/table.html", html, "big.example")
    assert 900_000 < len(encode_raw(big)) < 1_000_000
    surrogate = b'{"url": "https://sur.example/\\udfff", "html": "<p>a page</p>"}'  # 57 bytes: a bad_url dead letter
    bad_value = b"\xff" + b"not json " * 116_509  # 1 MB
    big_key = b"k" * 1_048_000
    small = json.dumps({"url": "https://k.example/p", "html": "<p>Some text of a page.</p>"}).encode()
    hostile: list[tuple[Message, str]] = [
        (page_message(big), "clean"),
        ((b"sur.example", surrogate), "bad_url"),
        ((b"x.example", bad_value), "bad_json"),
        ((big_key, small), "bad_key"),
    ]
    messages = [page_message(p) for p in good[:12]] + [m for m, _ in hostile] + [page_message(p) for p in good[12:]]
    sent = c.produce_tracked(messages)
    c.start_worker("w1")
    c.wait_for(c.settings.topic_dead, lambda rs: len(rs) >= 3)
    c.wait_for(c.settings.topic_clean, all_urls_out([*good, big]))
    outputs = assert_each_input_once(c, sent)
    expected = {m: kind for m, kind in hostile}
    for pos, message in sent.items():
        if message not in expected:
            continue
        out = outputs[pos]
        assert len(out) < c.settings.max_message_bytes
        record = json.loads(out)
        if expected[message] == "clean":  # 4.4 MB as a full record: published lean, its text whole
            assert record["omitted"] == ["blocks"] and record["counts"]["blocks"] > 30_000
            cells = [line for line in record["text"].split("\n") if line.startswith("cell ")]
            assert len(cells) == 30_000 and cells[-1] == "cell 29999 ab"  # every cell, one a line: the text whole
            continue
        assert record["error"] == expected[message], record
        assert record["source"] == f"{c.settings.topic_raw}/{pos[0]}/{pos[1]}"
        raw = base64.b64decode(record["raw_b64"])
        value = message[1] or b""
        if len(value) > 500_000:  # the bad value: its start, its size, and where the whole of it is
            assert record["raw_truncated"] is True and record["raw_bytes"] == len(value)
            assert value.startswith(raw) and len(raw) > 700_000
        else:
            assert raw == value
    bad_key = json.loads(outputs[next(p for p, m in sent.items() if m[0] == big_key)])
    assert len(bad_key["detail"]) <= 1024
    assert c.metric("w1", 'detemplate_outputs_reduced_total{omitted="blocks"}') == 1
    assert_same_as_offline(c, good, {h: v for h, v in by_host(c.read(c.settings.topic_clean)).items()
                                     if h != "big.example"})

    # The same input read again, by a new consumer group over the same state: every message is
    # a replay now, and the worker still goes on (it used to exit 70 on each restart).
    again = c.settings.with_overrides(app_id="detemplate-test-again")
    c.settings = again
    c.start_worker("w2")
    c.wait_metric("w2", "detemplate_pages_in_total", len(sent))
    c.wait_for(c.settings.topic_dead, lambda rs: len(rs) >= 6)
    outputs_again = assert_each_input_once(c, sent)  # copies only identical
    assert outputs_again == outputs
    assert c.metric("w2", 'detemplate_pages_order_total{kind="replayed"}') >= len(good)


def test_snapshots_over_a_message_go_in_parts_and_a_pathological_table_is_bounded(cluster: Cluster) -> None:
    """Pages of 3,500 unique cells: the table grows past the bound (60,000 entries here) and each
    snapshot past a message (500 KB here). Snapshots go as parts, the table is bounded with a
    `template.table_capped` event, and the tables and outputs equal `run`'s with the same bound."""
    c = cluster
    c.settings = c.settings.with_overrides(max_message_bytes=500_000, max_table_entries=60_000)
    pages = [table_page(f"cells{i}.example", n, 3_500) for n in range(40) for i in range(2)]
    pages += [p for p in crawl(6, per_partition=1)]
    sent = c.produce_tracked([page_message(p) for p in pages])
    c.start_worker("w1")
    c.wait_for(c.settings.topic_clean, all_urls_out(pages), timeout_s=300)
    assert_each_input_once(c, sent)
    policy = ExpiryPolicy(max_table_entries=60_000)
    assert_same_as_offline(c, pages, by_host(c.read(c.settings.topic_clean)), policy)
    assert_tables_equal(c, pages, policy)  # rebuilt from the changelog: parts joined, the bound replayed
    state = c.read(c.settings.topic_state)
    assert max(len(r.value or b"") for r in state) <= 500_000
    parts = [r for r in state if r.key and record_kind(r.key) == "part"]
    assert parts, "no snapshot went in parts"
    events = [json.loads(r.value) for r in c.read(c.settings.topic_events) if r.value]
    capped = [e for e in events if e["type"] == "template.table_capped"]
    assert capped and {e["host"] for e in capped} == {"cells0.example", "cells1.example"}
    assert c.metric("w1", "detemplate_tables_capped_total") == len(capped)
    assert len(compacted(c)) < len(state)
