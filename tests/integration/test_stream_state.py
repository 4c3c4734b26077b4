"""The stream shell's pure parts, without a broker: state records, rebuilds, message decoding, settings."""

from __future__ import annotations

import json

import pytest
from detemplate.engine.errors import ConfigError, StateError
from detemplate.engine.model import DeadPage, RawPage
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.io import codec
from detemplate.settings import StreamSettings, env_for, load
from detemplate.state.changelog import HostState, StateLayout, decode_delta, encode_delta, host_prefix
from detemplate.stream.app import decode_message

from tests.factories import make_site

K = 8


def run_host(pages: list[RawPage], layout: StateLayout) -> tuple[HostTable, dict[bytes, bytes], list[bytes]]:
    """Decide pages as the worker does, keeping the records a compacted changelog would keep
    (one host's, by suffix)."""
    params = layout.params
    table = HostTable(params.table)
    state = HostState(table)
    store: dict[bytes, bytes] = {}
    outputs = []
    prefix = host_prefix(pages[0].host)
    for offset, page in enumerate(pages):
        outcome = decide(page, table, params)
        assert outcome.clean is not None
        table.source_offset = offset * 3  # offsets of one host need not be contiguous
        for suffix, value in layout.records(table, outcome):
            for key, record in layout.physical(page.host, suffix, value, state):
                if record is None:
                    store.pop(key[len(prefix):], None)
                else:
                    store[key[len(prefix):]] = record
        outputs.append(codec.encode_clean(outcome.clean) + b"".join(codec.encode_event(e) for e in outcome.events))
    return table, store, outputs


def test_delta_round_trip_and_corruption() -> None:
    data = encode_delta(7, 1234, [1, 5, 2**64 - 1])
    d = decode_delta(data)
    assert (d.page_no, d.source_offset, d.keys) == (7, 1234, (1, 5, 2**64 - 1))
    with pytest.raises(StateError):
        decode_delta(data[:-1])
    with pytest.raises(StateError):
        decode_delta(b"XXXX" + data[4:])


@pytest.mark.parametrize("n_pages", [1, K - 1, K, K + 1, 2 * K, 5 * K + 3])
def test_rebuilt_table_equals_the_live_one(n_pages: int) -> None:
    layout = StateLayout(EngineParams(), K)
    pages = [sp.page for sp in make_site("a.example", n_pages, seed=3, redesign=n_pages // 2)]
    table, store, _ = run_host(pages, layout)
    rebuilt = layout.load(store)
    assert rebuilt is not None
    assert rebuilt.to_bytes() == table.to_bytes()
    # The changelog per host stays bounded: 2K deltas and 2 snapshots at most.
    assert len(store) <= 2 * K + 2
    assert layout.load({}) is None


def test_rebuild_without_the_newest_snapshot() -> None:
    """A crash between a page's delta and its snapshot: the older snapshot plus deltas serve."""
    layout = StateLayout(EngineParams(), K)
    pages = [sp.page for sp in make_site("a.example", 3 * K, seed=4)]
    table, store, _ = run_host(pages, layout)
    del store[layout.snapshot_suffix(3 * K)]
    rebuilt = layout.load(store)
    assert rebuilt is not None and rebuilt.to_bytes() == table.to_bytes()


def test_replayed_pages_are_decided_again_identically() -> None:
    layout = StateLayout(EngineParams(), K)
    n = 4 * K + 5
    pages = [sp.page for sp in make_site("a.example", n, seed=5)]
    table, store, outputs = run_host(pages, layout)
    before = table.to_bytes()
    # Every one of the host's last K pages can be replayed ...
    for i in range(n - K, n):
        loaded = layout.load_before(store, i * 3)
        assert loaded is not None, i
        t, delta = loaded
        assert delta.page_no == i + 1 and t.pages == i
        outcome = decide(pages[i], t, layout.params)
        assert outcome.applied == delta.keys
        assert codec.encode_clean(outcome.clean) + b"".join(codec.encode_event(e) for e in outcome.events) == outputs[i]
    # ... pages older than the retained deltas are not, and nothing changed the store.
    assert layout.load_before(store, 0) is None
    assert layout.load(store).to_bytes() == before  # type: ignore[union-attr]


def page_json(**fields: object) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"h.example", b"", "empty_message"),
        (b"h.example", None, "empty_message"),
        (b"h.example", b"{not json", "bad_json"),
        (b"h.example", b"\xff\xfe\xfd", "bad_json"),
        (b"h.example", b"[1]", "bad_record"),
        (b"h.example", page_json(html="<p>x</p>"), "bad_record"),
        (b"h.example", page_json(url="https://h.example/", html=["x"]), "bad_record"),
        (None, page_json(url="https://h.example/", html="<p>x</p>"), "bad_key"),
        (b"g.example", page_json(url="https://h.example/", html="<p>x</p>"), "bad_key"),
    ],
)
def test_bad_messages_become_dead_pages(key: bytes | None, value: bytes | None, reason: str) -> None:
    dead = decode_message(key, value, "pages.raw/0/1")
    assert isinstance(dead, DeadPage)
    assert dead.reason == reason
    assert dead.source == "pages.raw/0/1"


def test_good_message_decodes_like_a_jsonl_line() -> None:
    page = decode_message(b"h.example", page_json(url="https://H.example/a", html="<p>x</p>"), "pages.raw/2/9")
    assert page == RawPage("https://H.example/a", "<p>x</p>", "h.example", "pages.raw/2/9")


def test_settings_from_environment_and_flags() -> None:
    s = load({"DETEMPLATE_BROKER": "kafka://b:1", "DETEMPLATE_PARTITIONS": "3", "DETEMPLATE_TANSU": "yes"},
             partitions=5)
    assert (s.broker, s.partitions, s.tansu, s.bootstrap) == ("kafka://b:1", 5, True, "b:1")
    assert load(env_for(s)) == s
    with pytest.raises(ConfigError):
        load({"DETEMPLATE_PARTITIONS": "many"})
    with pytest.raises(ConfigError):
        load({"DETEMPLATE_TANSU": "maybe"})
    with pytest.raises(ConfigError):
        StreamSettings(topic_clean="pages.raw")
    assert StreamSettings().topic_partitions()["detemplate.state"] == StreamSettings().partitions
    assert StreamSettings(broker="a:1,kafka://b:2").faust_broker == "kafka://a:1,kafka://b:2"
    assert StreamSettings(broker="a:1,kafka://b:2").bootstrap == "a:1,b:2"
    assert load({"DETEMPLATE_PARAMS": "table.tb=50; segment.path_mode=tag"}).engine_params().table.tb == 50
    with pytest.raises(ConfigError):
        load({"DETEMPLATE_PARAMS": "nonsense"})


@pytest.mark.parametrize("tansu", [True, False])
def test_tansu_workaround_only_when_asked(tansu: bool, tmp_path: object) -> None:
    from detemplate.stream.app import build_app
    from detemplate.stream.tansu import TansuTransport

    app, _ = build_app(StreamSettings(tansu=tansu, data_dir=str(tmp_path), metrics_port=-1))
    assert isinstance(app.transport, TansuTransport) is tansu


@pytest.mark.parametrize(
    ("host", "why"),
    [("sur\udfff.example", "surrogate"), ("a\x00b.example", "NUL"), ("h" * 1025, "1,025 bytes"), ("", "empty")],
)
def test_a_host_that_cannot_key_the_state_is_a_dead_letter(host: str, why: str) -> None:
    from detemplate.stream.app import check_host

    problem = check_host(host)
    assert problem is not None and why in problem
    assert check_host("ü.example") is None
    value = json.dumps({"url": "https://x.example/", "host": host or " ", "html": "<p>x</p>"}).encode()
    dead = decode_message(host.encode("utf-8", "surrogatepass"), value, "pages.raw/0/1")
    assert isinstance(dead, DeadPage) and dead.reason in ("bad_host", "bad_record")
