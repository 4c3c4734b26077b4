"""The codec writes the same bytes whether orjson or json writes them."""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any

import pytest
from detemplate.engine.model import CleanPage
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import process_page
from detemplate.io import codec
from detemplate.state.memory import MemoryStore
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import interleave, make_page, make_site


def both(record: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[bytes | str, bytes | str]:
    """encode(record, plain_floats=True) through orjson and through json: bytes, or the error."""

    def run() -> bytes | str:
        try:
            return codec.encode(record, plain_floats=True)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    assert codec._orjson is not None  # a dependency: the fast path is the one measured
    fast = run()
    with monkeypatch.context() as m:
        m.setattr(codec, "_orjson", None)
        plain = run()
    return fast, plain


def test_clean_records_of_real_pages_are_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = [p.page for p in interleave(make_site("a.example", 20, seed=3), make_site("b.example", 12, seed=4))]
    pages += [make_page(html="<p>caf\u00e9 \u2028 \x7f \U0001f600 \"quoted\" back\\slash\ttab</p>")]
    store = MemoryStore()
    cleans: list[CleanPage] = []
    for page in pages:
        outcome = process_page(page, store, EngineParams())
        assert outcome.clean is not None
        cleans.append(outcome.clean)
    # Ratios that are real fractions, down to the smallest a record keeps (round(x, 4)):
    ratios = [k / 7 for k in range(8)] + [0.00005, 0.000049, 0.00015, 1e-9, 0.99995]
    blocks = [b._replace(ratio=ratios[i % len(ratios)]) for i, b in enumerate(b for c in cleans for b in c.blocks)]
    cleans.append(dataclasses.replace(cleans[-1], blocks=blocks))
    for clean in cleans:
        fast = codec.encode_clean(clean)
        with monkeypatch.context() as m:
            m.setattr(codec, "_orjson", None)
            assert codec.encode_clean(clean) == fast
            assert codec.encode_clean(clean, blocks=False) == codec.encode(codec.clean_dict(clean, False))


@pytest.mark.parametrize(
    "value",
    [
        "".join(chr(c) for c in range(0x20)) + "\x7f\u2028\u2029\ufeff\U0010ffff",
        "a lone \ud800 surrogate",  # UnencodableError either way, naming the field
        2**64,  # past orjson's integers
        -(2**63) - 1,
        {1: "an int key"},  # json writes "1"; orjson refuses
        (1, 2),
        None,
        True,
        0.0001,
        -0.0,
        1e16,
        123456.789,
        datetime.date(2026, 1, 1),  # json refuses; orjson would write it
        dataclasses.make_dataclass("D", [("x", int)])(1),  # json refuses; orjson would write it
        type("S", (str,), {})("a str subclass"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_orjson_might_write_otherwise_are_left_to_json(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain = both({"url": "u", "text": value}, monkeypatch)
    assert fast == plain


def test_a_nan_ratio_is_not_plain_and_json_refuses_it_as_before() -> None:
    import orjson

    assert orjson.dumps(1e-05) == b"0.00001" and codec.encode({"x": 1e-05}) == b'{"x":1e-05}'  # why plain_floats
    clean = _some_clean()
    assert codec.plain_ratios(clean)
    bad = dataclasses.replace(clean, blocks=[b._replace(ratio=math.nan) for b in clean.blocks])
    assert not codec.plain_ratios(bad)
    with pytest.raises(ValueError):  # json's refusal (orjson would have written null)
        codec.encode_clean(bad)


def _some_clean() -> CleanPage:
    store = MemoryStore()
    outcome = process_page(make_page(), store, EngineParams())
    assert outcome.clean is not None
    return outcome.clean


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f == 0 or abs(f) >= 1e-4),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_any_record_of_plain_floats_is_byte_identical(record: dict[str, Any]) -> None:
    assert codec._orjson is not None
    try:
        fast: bytes | str = codec.encode(record, plain_floats=True)
    except codec.UnencodableError as exc:
        fast = str(exc)
    saved, codec._orjson = codec._orjson, None  # hypothesis does not mix with function-scoped fixtures
    try:
        try:
            plain: bytes | str = codec.encode(record, plain_floats=True)
        except codec.UnencodableError as exc:
            plain = str(exc)
    finally:
        codec._orjson = saved
    assert fast == plain
