"""detemplate.engine.table.HostTable: DF counting, logistic expiry against a brute-force model, O(expired) work,
serialisation, template events."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from detemplate.engine.errors import StateError
from detemplate.engine.model import Block, Segment
from detemplate.engine.params import EngineParams, EventParams, TableParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import make_page, make_site

# -- reference model ----------------------------------------------------------------------


class BruteForceTable:
    """The paper's table written the obvious way: scan every key after every page."""

    def __init__(self, params: TableParams) -> None:
        self.params = params
        self.page = 0
        self.entries: dict[int, tuple[int, int]] = {}  # key -> (df, last_seen)

    def observe(self, keys: list[int]) -> list[int]:
        self.page += 1
        dfs = []
        for key in keys:
            df = self.entries.get(key, (0, 0))[0] + 1
            self.entries[key] = (df, self.page)
            dfs.append(df)
        for key, (df, last) in list(self.entries.items()):
            if self.page - last > self.params.lifetime(df):
                del self.entries[key]
        return dfs


class CountingWheel(dict[int, list[int]]):
    """A dict table's timing wheel, counting the keys it hands back (the expiry work)."""

    popped = 0

    def pop(self, key: int, default: Any = None) -> Any:
        bucket = super().pop(key, default)
        if bucket:
            self.popped += len(bucket)
        return bucket


class Examined:
    """The compiled entries' count of the due keys they looked at, from now on."""

    def __init__(self, table: HostTable) -> None:
        self.entries = table._entries
        self.start = self.entries.examined

    @property
    def popped(self) -> int:
        return int(self.entries.examined - self.start)


def counting(table: HostTable) -> CountingWheel | Examined:
    if table._wheel is None:
        return Examined(table)
    wheel = CountingWheel(table._wheel)
    table._wheel = wheel
    return wheel


def wheel_size(table: HostTable) -> int:
    if table._wheel is None:
        return int(table._entries.scheduled())
    return sum(len(bucket) for bucket in table._wheel.values())


# Each expiry test runs on the table's entries as the engine keeps them (in C where the
# extension is in use) and on the dicts of the Python reference.
IMPLEMENTATIONS = pytest.mark.parametrize("python", [False, True], ids=["in-use", "python"])


page_streams = st.lists(
    st.lists(st.integers(min_value=0, max_value=40), max_size=12).map(lambda ks: sorted(set(ks))),
    max_size=120,
)
small_params = st.builds(
    TableParams,
    template_df=st.integers(min_value=1, max_value=6),
    tb=st.integers(min_value=1, max_value=8),
    n=st.floats(min_value=1.0, max_value=6.0),
)

# -- lifetime -----------------------------------------------------------------------------


def test_lifetime_formula_values() -> None:
    p = TableParams(tb=20, n=25.0)
    assert p.lifetime(1) == 20  # seen once: Tb pages
    assert p.lifetime(200) == 500  # frequent: Tb * N
    for df in range(1, 30):
        assert p.lifetime(df) == round(20 * 25 / (1 + 24 * math.exp(-(df - 1))))
    lives = [p.lifetime(df) for df in range(1, 100)]
    assert lives == sorted(lives)  # seeing a key again never shortens its life
    assert TableParams(tb=7, n=1.0).lifetime(50) == 7  # N = 1: a flat lifetime


def test_table_lifetime_is_flat_beyond_its_lookup() -> None:
    p = TableParams(tb=3, n=4.0)
    table = HostTable(p)
    assert [table.lifetime(df) for df in (1, 2, 63, 64, 10_000)] == [
        p.lifetime(1),
        p.lifetime(2),
        p.lifetime(63),
        p.lifetime(64),
        p.lifetime(10_000),
    ]


# -- DF and template counting -------------------------------------------------------------


def test_df_counts_pages_and_template_at_threshold() -> None:
    table = HostTable(TableParams(template_df=3, tb=50))
    assert table.observe([1, 2]) == [1, 1]
    assert table.observe([1]) == [2]
    assert table.template_count == 0
    assert table.observe([1, 2, 3]) == [3, 2, 1]
    assert table.template_count == 1  # key 1 reached df 3
    assert table.observe([1, 2]) == [4, 3]
    assert table.template_count == 2  # counted once per key, not once per sighting
    assert table.pages == 4
    assert table.state() == {1: (4, 4), 2: (3, 4), 3: (1, 3)}
    assert table.df(1) == 4 and table.df(99) == 0


def test_duplicate_segments_on_one_page_count_once() -> None:
    # Ten identical list items (same path, same text) are one segment of the page.
    html = "<html><body><ul>" + "<li>Same item</li>" * 10 + "</ul><p>other</p></body></html>"
    params = EngineParams()
    table = HostTable(params.table)
    out = decide(make_page(html=html), table, params)
    assert out.clean is not None
    assert len(out.applied) == len(set(out.applied)) == 2
    assert list(out.applied) == sorted(out.applied)
    assert sorted(df for df, _ in table.state().values()) == [1, 1]


# -- expiry against brute force -----------------------------------------------------------


@IMPLEMENTATIONS
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=small_params, stream=page_streams)
def test_expiry_matches_brute_force_after_every_page(
    python: bool, params: TableParams, stream: list[list[int]]
) -> None:
    table = HostTable(params, python)
    model = BruteForceTable(params)
    for keys in stream:
        assert table.observe(keys) == model.observe(keys)
        assert table.state() == model.entries
        assert table.template_count == sum(1 for df, _ in model.entries.values() if df >= params.template_df)
        # Every live key is in the wheel exactly once: nothing is scanned twice.
        assert wheel_size(table) == len(table)


@IMPLEMENTATIONS
@settings(max_examples=200, deadline=None)
@given(params=small_params, stream=page_streams)
def test_expiry_work_is_bounded_by_expired_plus_sightings(
    python: bool, params: TableParams, stream: list[list[int]]
) -> None:
    table = HostTable(params, python)
    wheel = counting(table)
    expired = 0
    sightings = 0
    for keys in stream:
        before = len(table)
        new = sum(1 for k in keys if table.df(k) == 0)
        table.observe(keys)
        expired += before + new - len(table)
        sightings += len(keys)
    # A popped key is either deleted or was seen again since it was scheduled.
    assert wheel.popped <= expired + sightings


@IMPLEMENTATIONS
def test_expiry_does_no_work_on_pages_where_nothing_is_due(python: bool) -> None:
    params = TableParams(tb=50, n=10.0)
    table = HostTable(params, python)
    table.observe(list(range(5000)))  # a big table, all seen once
    wheel = counting(table)
    for _ in range(params.lifetime(1) - 1):
        table.observe([])
        assert wheel.popped == 0  # a scan would touch 5000 keys on every page
    assert len(table) == 5000
    table.observe([])  # page 1 + tb: the last page they are alive
    assert len(table) == 5000
    table.observe([])  # page 2 + tb: all expire at once
    assert len(table) == 0
    assert wheel.popped == 5000


@IMPLEMENTATIONS
def test_frequent_keys_live_longer_and_are_rescheduled_not_rescanned(python: bool) -> None:
    params = TableParams(tb=4, n=10.0)
    table = HostTable(params, python)
    wheel = counting(table)
    frequent = list(range(100))
    for _ in range(30):
        table.observe(frequent)
    # Each key is popped about once per tb pages while it is seen on every page.
    assert wheel.popped <= 100 * (30 // params.lifetime(1) + 1)
    for _ in range(params.lifetime(30)):
        table.observe([])
    assert len(table) == 100  # lifetime(30) unseen pages: still alive
    table.observe([])
    assert len(table) == 0


# -- serialisation ------------------------------------------------------------------------


@IMPLEMENTATIONS
@settings(max_examples=150, deadline=None)
@given(params=small_params, before=page_streams, after=page_streams)
def test_restored_table_behaves_identically(
    python: bool, params: TableParams, before: list[list[int]], after: list[list[int]]
) -> None:
    live = HostTable(params, python)
    for keys in before:
        live.observe(keys)
    live.source_offset = 1234
    data = live.to_bytes()
    restored = HostTable.from_bytes(data, params, python)
    assert restored.to_bytes() == data
    assert restored.state() == live.state()
    assert (restored.pages, restored.source_offset, restored.template_count) == (
        live.pages,
        live.source_offset,
        live.template_count,
    )
    assert restored.nbytes() == len(data)
    events = EventParams(min_template_segments=1, change_share=0.3, settle_pages=2)
    for keys in after:
        assert restored.observe(keys) == live.observe(keys)
        assert restored.state() == live.state()
        assert restored.take_event(events) == live.take_event(events)
    assert restored.to_bytes() == live.to_bytes()


def test_empty_table_round_trip() -> None:
    params = TableParams()
    data = HostTable(params).to_bytes()
    restored = HostTable.from_bytes(data, params)
    assert len(restored) == 0 and restored.pages == 0 and restored.to_bytes() == data


def _table_bytes() -> bytes:
    table = HostTable(TableParams())
    for i in range(10):
        table.observe(sorted({i, i + 1, 100, 200}))
    return table.to_bytes()


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: b[:10], id="short-header"),
        pytest.param(lambda b: b"XXXX" + b[4:], id="bad-magic"),
        pytest.param(lambda b: b[:-1], id="truncated-entries"),
        pytest.param(lambda b: b + b"\x00" * 16, id="trailing-bytes"),
        pytest.param(lambda b: bytes(random.Random(1).randrange(256) for _ in range(len(b))), id="random"),
    ],
)
@IMPLEMENTATIONS
def test_corrupt_bytes_raise_state_error(python: bool, corrupt: Any) -> None:
    with pytest.raises(StateError):
        HostTable.from_bytes(corrupt(_table_bytes()), TableParams(), python)


@IMPLEMENTATIONS
def test_an_entry_with_no_pages_is_a_corrupt_table(python: bool) -> None:
    data = bytearray(_table_bytes())
    n = len(HostTable.from_bytes(bytes(data), TableParams()))
    data[-8 * n + 4 : -8 * n + 8] = b"\0\0\0\0"  # the second entry's DF (the DFs, then the last pages, end the bytes)
    with pytest.raises(StateError, match="DF of 0"):
        HostTable.from_bytes(bytes(data), TableParams(), python)


@settings(max_examples=150, deadline=None)
@given(
    params=small_params,
    steps=st.lists(
        st.one_of(
            st.lists(st.integers(min_value=0, max_value=60), max_size=15).map(lambda ks: sorted(set(ks))),
            st.tuples(st.just("bound"), st.integers(min_value=0, max_value=40)),
            st.just("reload"),
        ),
        max_size=150,
    ),
)
def test_the_tables_in_use_keep_the_python_ones_bytes(params: TableParams, steps: list[Any]) -> None:
    """Pages, bounds and reloads in any order: the table as the engine keeps it gives the
    reference's DFs, counters, bytes and bound (dropped keys seen again go to the end)."""
    fast, slow = HostTable(params), HostTable(params, python=True)
    for step in steps:
        if step == "reload":
            fast = HostTable.from_bytes(fast.to_bytes(), params)
            slow = HostTable.from_bytes(slow.to_bytes(), params, python=True)
        elif isinstance(step, tuple):
            assert fast.evict_oldest(step[1]) == slow.evict_oldest(step[1])
        else:
            # The keys as a page's blocks (a key twice in a block, and in two blocks).
            blocks = [Block("/p", [Segment(k, "", k + 1) for k in part], 0) for part in (step[::2], step[:3] * 2)]
            assert fast.new_chars(blocks) == slow.new_chars(blocks) == [
                sum(k + 1 for k in part if k not in slow) for part in (step[::2], step[:3] * 2)
            ]
            assert fast.observe(step) == slow.observe_python(step)
        assert fast.to_bytes() == slow.to_bytes()
        assert (fast.template_count, fast.removed_since_event, len(fast)) == (
            slow.template_count, slow.removed_since_event, len(slow)
        )


# -- events -------------------------------------------------------------------------------


def _run_site(redesign: int | None, n_pages: int = 60) -> list[tuple[int, str, dict[str, Any]]]:
    params = EngineParams()
    table = HostTable(params.table)
    events = []
    for i, sp in enumerate(make_site("events.example", n_pages, seed=5, redesign=redesign)):
        out = decide(sp.page, table, params)
        events.extend((i, e.type, e.details) for e in out.events)
        assert all(e.host == "events.example" and e.page_no == i + 1 and e.url == sp.page.url for e in out.events)
    return events


def test_template_learned_once_and_no_change_without_redesign() -> None:
    events = _run_site(redesign=None)
    assert [t for _, t, _ in events] == ["template.learned"]
    index, _, details = events[0]
    assert index < 10
    assert details["template_segments"] >= EventParams().min_template_segments


def test_redesign_fires_template_changed_after_it() -> None:
    events = _run_site(redesign=30)
    kinds = [t for _, t, _ in events]
    assert kinds[0] == "template.learned" and kinds.count("template.learned") == 1
    changed = [(i, d) for i, t, d in events if t == "template.changed"]
    assert changed, events
    first, details = changed[0]
    assert 30 <= first < 45
    assert details["added"] > 0
    assert all(i < 30 for i, t, _ in events if t == "template.learned")


# -- pagelet keys share the table's key space ---------------------------------------------


def _pagelet_key(n: int) -> int:
    from detemplate.engine.keys import TAG, TAG_BITS

    return (n << TAG_BITS) | TAG


def test_pagelet_keys_get_df_and_expiry_but_no_template_counts() -> None:
    from detemplate.engine.keys import is_tagged_key

    params = TableParams(template_df=3, tb=2, n=2.0)
    table = HostTable(params)
    segs = [11, 12, 13]
    pls = [_pagelet_key(1), _pagelet_key(2)]
    assert all(is_tagged_key(k) for k in pls) and not any(is_tagged_key(k) for k in segs)
    brute = BruteForceTable(params)
    for _ in range(3):
        assert table.observe(segs + pls) == brute.observe(segs + pls)
    # Same DF as segments, but only the segments count as template ones.
    assert table.df(pls[0]) == table.df(segs[0]) == 3
    assert table.template_count == 3 and table.added_since_event == 3
    event = table.take_event(EventParams(min_template_segments=3))
    assert event is not None and event[0] == "template.learned"
    assert event[1]["template_segments"] == 3 and event[1]["table_segments"] == 3
    assert table.tagged_keys() == 2 and len(table) == 5
    # Both kinds expire alike; an expiring template pagelet key removes no template segment.
    for _ in range(60):
        table.observe(segs)
        brute.observe(segs)
    assert table.state() == {k: v for k, v in brute.entries.items()}
    assert table.tagged_keys() == 0 and table.template_count == 3 and table.removed_since_event == 0
    restored = HostTable.from_bytes(table.to_bytes(), params)
    assert restored.state() == table.state() and restored.template_count == 3


def test_the_compiled_observe_keeps_the_table_as_the_python_one() -> None:
    import random

    from detemplate.engine.keys import TAG
    from detemplate.engine.page import compiled

    if compiled.module() is None:
        pytest.skip("the compiled extension is not in use")
    rng = random.Random(7)
    params = TableParams(tb=3, n=5)
    fast, slow = HostTable(params), HostTable(params, python=True)
    assert isinstance(fast._entries, compiled.module().Entries) and isinstance(slow._entries, dict)
    pagelet_keys = [(rng.getrandbits(44) << 20) | TAG for _ in range(30)]
    vocabulary = [rng.getrandbits(64) for _ in range(400)] + pagelet_keys
    for page in range(600):
        # A drifting template: common keys, rare ones, and keys that come and go.
        keys = sorted({rng.choice(vocabulary[: 100 + page // 3]) for _ in range(rng.randint(0, 80))})
        assert fast.observe(keys) == slow.observe_python(keys)
        assert (fast.template_count, fast.added_since_event, fast.removed_since_event) == (
            slow.template_count, slow.added_since_event, slow.removed_since_event
        )
        fast.take_event(EventParams())
        slow.take_event(EventParams())
    assert fast.to_bytes() == slow.to_bytes()
    assert len(fast) > 0
