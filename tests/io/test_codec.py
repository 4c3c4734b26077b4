"""The codec writes the same bytes whether orjson or json writes them."""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any

import pytest
from detemplate.engine.model import CONTENT, TEMPLATE, BlockVerdict, CleanPage
from detemplate.engine.page import compiled
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


# -- the blocks' JSON written by the compiled kernel ------------------------------------

FAST_BLOCKS = codec._blocks_json()
needs_fast_blocks = pytest.mark.skipif(compiled.module() is None, reason=f"the compiled walk is not in use: "
                                       f"{compiled.status()}")


@needs_fast_blocks
def test_the_compiled_blocks_json_passes_its_probe() -> None:
    # Where the compiled walk runs, its blocks_json wrote orjson's bytes for the probe blocks
    # (every escape, every UTF-8 length, a cut text, ratios at and between the ends).
    assert FAST_BLOCKS is not None


def reference(page: CleanPage) -> bytes | str:
    """What encode_clean wrote before the kernel: a dict a block, then encode (bytes, or the error)."""
    try:
        return codec.encode(codec.clean_dict(page), plain_floats=codec.plain_ratios(page))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def encoded(page: CleanPage) -> bytes | str:
    try:
        return codec.encode_clean(page)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@needs_fast_blocks
def test_the_compiled_blocks_write_the_reference_bytes_on_real_pages() -> None:
    pages = [p.page for p in interleave(make_site("a.example", 16, seed=5), make_site("b.example", 10, seed=6))]
    store = MemoryStore()
    for page in pages:
        outcome = process_page(page, store, EngineParams())
        assert outcome.clean is not None
        assert FAST_BLOCKS(outcome.clean.blocks, codec.BLOCK_TEXT_CHARS, TEMPLATE) is not None  # the fast way ran
        assert encoded(outcome.clean) == reference(outcome.clean)


_texts = st.text(st.characters(codec="utf-8") | st.characters(), max_size=120)  # lone surrogates too
_ratios = (
    st.integers(0, 10_000).map(lambda k: k / 10_000)
    | st.floats(0, 1)
    | st.sampled_from([0.0, -0.0, 1.0, 0.00005, 0.000049999, 0.99995, 0.12345, 1.0000001, -1e-9])
    | st.floats(allow_nan=True, allow_infinity=True)
)
_blocks = st.builds(
    BlockVerdict,
    _texts,
    _texts,
    st.integers(0, 2**40)
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([2**40 - 1, 2**40, -(2**40), 2**63 - 1, 2**63, -(2**63)]),
    st.integers(0, 2**20),
    _ratios,
    st.sampled_from([TEMPLATE, CONTENT]) | _texts,
    st.sampled_from(["table", "pagelevel"]) | _texts,
    st.sampled_from(["main", "template", "comments"]) | _texts,
)


@needs_fast_blocks
@settings(max_examples=400, deadline=None)
@given(st.lists(_blocks, min_size=1, max_size=6), _texts)
def test_the_compiled_blocks_write_the_reference_bytes_on_any_blocks(blocks: list[BlockVerdict], text: str) -> None:
    # Any string (escapes, every UTF-8 length, a lone surrogate: the record is refused the
    # same way), any ratio (outside [0, 1] or not finite: the dicts' way), any integer.
    page = CleanPage("https://h.example/p", "h.example", 3, text, tuple(blocks), title=text[:5])
    assert encoded(page) == reference(page)


@needs_fast_blocks
def test_a_block_field_of_another_type_takes_the_dicts_way() -> None:
    block = BlockVerdict("p", "text", 4, 0, 0.0, CONTENT, "table", "main")
    for odd in (block._replace(chars=True), block._replace(ratio=1), block._replace(path=type("S", (str,), {})("p"))):
        assert FAST_BLOCKS((odd,), codec.BLOCK_TEXT_CHARS, TEMPLATE) is None
        page = CleanPage("u", "h", 1, "text", (odd,))
        assert encoded(page) == reference(page)
