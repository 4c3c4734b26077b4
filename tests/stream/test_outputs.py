"""detemplate.stream.outputs: every output fits the producer's limit and encodes, or becomes a dead letter that does.

The pages are the hostile ones of issue 15: a 949 KB page of 30,000 blocks (a 4.4 MB clean
record), a 1 MB bad value, a 1 MB key, a lone surrogate in a URL.
"""

from __future__ import annotations

import base64
import json

import pytest
from detemplate.engine.model import DeadPage, TemplateEvent
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.io import codec
from detemplate.stream.outputs import (
    RECORD_OVERHEAD_BYTES,
    OutputLimits,
    fit_clean,
    fit_dead,
    fit_event,
    output_key,
)

from tests.factories import make_page

LIMITS = OutputLimits(1_000_000)
PARAMS = EngineParams()


def blocks_page(n_blocks: int, url: str = "https://big.example/table.html") -> str:
    """A page of one long table: each cell a block with a few words (949 KB at 30,000 cells)."""
    cells = "".join(f"<tr><td>row {i} cell</td></tr>" for i in range(n_blocks))
    return f"<html><body><h1>A long table</h1><table>{cells}</table></body></html>"


def clean_of(html: str, url: str = "https://big.example/table.html") -> object:
    out = decide(make_page(url=url, host="big.example", html=html), HostTable(PARAMS.table), PARAMS)
    assert out.clean is not None
    return out.clean


def test_an_ordinary_page_goes_out_whole() -> None:
    clean = clean_of(make_page().html, "https://example.com/p/1.html")
    fitted = fit_clean(clean, b"big.example", LIMITS, "pages.raw/0/1")  # type: ignore[arg-type]
    assert fitted.omitted == () and fitted.dead is None
    assert fitted.value == codec.encode_clean(clean)  # type: ignore[arg-type]  # byte-identical to `run`


def test_a_page_of_30000_blocks_goes_out_lean() -> None:
    html = blocks_page(30_000)
    assert 900_000 < len(html) < 1_000_000
    clean = clean_of(html)
    full = codec.encode_clean(clean)  # type: ignore[arg-type]
    assert len(full) > 4_000_000  # the record that stopped the worker
    fitted = fit_clean(clean, b"big.example", LIMITS, "pages.raw/0/1")  # type: ignore[arg-type]
    assert fitted.value is not None and LIMITS.fits(b"big.example", fitted.value)
    record = json.loads(fitted.value)
    assert record["omitted"] == list(fitted.omitted) and "blocks" in record["omitted"]
    assert "blocks" not in record and record["counts"]["blocks"] == json.loads(full)["counts"]["blocks"]
    assert record["text"] == json.loads(full)["text"]  # the content itself is whole
    assert "text_chars" not in record


def test_a_text_over_the_limit_is_cut_and_says_so() -> None:
    clean = clean_of(blocks_page(8_000))
    small = OutputLimits(65_536)
    fitted = fit_clean(clean, b"big.example", small, "pages.raw/0/1")  # type: ignore[arg-type]
    assert fitted.value is not None
    assert len(fitted.value) <= small.max_message_bytes - RECORD_OVERHEAD_BYTES - len(b"big.example")
    record = json.loads(fitted.value)
    assert record["omitted"][-1] == "text"
    full_text = json.loads(codec.encode_clean(clean))["text"]  # type: ignore[arg-type]
    assert record["text_chars"] == len(full_text) and full_text.startswith(record["text"])
    assert len(record["text"]) > 30_000  # cut to what fits, not to nothing


def test_a_page_whose_url_alone_is_over_the_limit_is_a_dead_letter() -> None:
    url = "https://big.example/" + "a" * 70_000
    clean = clean_of(make_page().html, url)
    fitted = fit_clean(clean, b"big.example", OutputLimits(65_536), "pages.raw/2/7")  # type: ignore[arg-type]
    assert fitted.value is None and fitted.dead is not None
    assert fitted.dead.reason == "output_too_large" and "pages.raw/2/7" in fitted.dead.detail
    key, value = fit_dead(fitted.dead, b"{}", OutputLimits(65_536))
    assert OutputLimits(65_536).fits(key, value)


def test_a_lone_surrogate_is_a_dead_letter_not_a_crash() -> None:
    url = "https://sur.example/\udfff"
    clean = clean_of(make_page().html, url)
    fitted = fit_clean(clean, b"sur.example", LIMITS, "pages.raw/0/3")  # type: ignore[arg-type]
    assert fitted.value is None and fitted.dead is not None
    assert fitted.dead.reason == "output_unencodable" and "lone surrogate" in fitted.dead.detail
    raw = json.dumps({"url": "https://sur.example/\\udfff", "html": "<p>x</p>"}).encode()
    _, value = fit_dead(fitted.dead, raw, LIMITS)
    letter = json.loads(value)
    assert letter["url"] == "https://sur.example/\ufffd"  # replaced, so the dead letter itself encodes
    assert base64.b64decode(letter["raw_b64"]) == raw


def test_a_dead_letter_of_a_1mb_value_carries_its_start_and_size() -> None:
    raw = b"\xff" + b"x" * 1_048_576  # not UTF-8: bad_json, its bytes in the dead letter
    dead = DeadPage("", "x.example", "bad_json", "not JSON", "pages.raw/1/9")
    key, value = fit_dead(dead, raw, LIMITS)
    assert LIMITS.fits(key, value)
    letter = json.loads(value)
    assert letter["raw_truncated"] is True and letter["raw_bytes"] == len(raw)
    start = base64.b64decode(letter["raw_b64"])
    assert len(start) > 700_000 and raw.startswith(start)
    assert letter["source"] == "pages.raw/1/9"  # the whole original: by partition and offset


def test_a_dead_letter_keyed_by_a_1mb_key_fits() -> None:
    big_key = "k" * 1_048_576
    dead = DeadPage("", big_key, "bad_json", f"the message key {big_key!r} is odd", "pages.raw/0/0")
    key, value = fit_dead(dead, b"junk", LIMITS)
    assert LIMITS.fits(key, value) and len(key) <= 1024
    letter = json.loads(value)
    assert letter["host"].endswith("characters]") and len(letter["detail"]) <= 1024
    assert base64.b64decode(letter["raw_b64"]) == b"junk"
    assert output_key("\udcff.example") == "\ufffd.example".encode()


def test_a_small_dead_letter_is_whole_and_as_before() -> None:
    dead = DeadPage("https://x.example/", "x.example", "bad_key", "wrong key", "pages.raw/0/1")
    key, value = fit_dead(dead, b"abc", LIMITS)
    assert (key, value) == (b"x.example", codec.encode_dead(dead, b"abc"))
    assert fit_dead(dead, None, LIMITS)[1] == codec.encode_dead(dead)  # no message behind it: no raw_b64


def test_an_event_too_large_loses_its_pagelet_list_first() -> None:
    from detemplate.engine.model import PageletReport, TemplatePagelet

    listed = tuple(TemplatePagelet(i, 9, 4, i, i, i + 1, "/html/body/div", "x" * 80) for i in range(32))
    event = TemplateEvent("template.learned", "big.example", 7, "https://big.example/" + "p" * 1000,
                          {"template_segments": 40}, PageletReport(60, 32, listed))
    full = codec.encode_event(event)
    limits = OutputLimits(len(full) + RECORD_OVERHEAD_BYTES + len(b"big.example"))
    assert fit_event(event, b"big.example", limits, "s").value == full
    smaller = OutputLimits(len(full) + RECORD_OVERHEAD_BYTES)  # a few bytes short with the key
    fitted = fit_event(event, b"big.example", smaller, "s")
    assert fitted.omitted == ("pagelets",) and fitted.value is not None
    assert "pagelets" not in json.loads(fitted.value)["details"]


@pytest.mark.parametrize("limit", [65_536, 200_000, 1_000_000])
def test_outputs_never_exceed_the_limit(limit: int) -> None:
    limits = OutputLimits(limit)
    clean = clean_of(blocks_page(5_000))
    fitted = fit_clean(clean, b"big.example", limits, "pages.raw/0/1")  # type: ignore[arg-type]
    assert fitted.value is not None and limits.fits(b"big.example", fitted.value)


def test_every_fitted_output_validates_against_its_schema() -> None:
    """The lean clean page, the cut text, the cut dead letter, the event without pagelets, and
    the expiry events validate against schemas/ (docs/fields.md)."""
    from pathlib import Path

    import jsonschema
    from detemplate.engine.model import PageletReport, TemplatePagelet
    from detemplate.state.expiry import Expired, IndexEntry, capped_event, expired_event

    root = Path(__file__).resolve().parents[2] / "schemas"

    def check(name: str, value: bytes) -> None:
        schema = json.loads((root / name).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(json.loads(value))

    clean = clean_of(blocks_page(8_000))
    for limit in (1_000_000, 300_000, 65_536):  # whole, without blocks (and links), with its text cut
        fitted = fit_clean(clean, b"big.example", OutputLimits(limit), "pages.raw/0/1")  # type: ignore[arg-type]
        assert fitted.value is not None
        check("clean-page.v1.json", fitted.value)
    check("dead-letter.v1.json", fit_dead(DeadPage("", "x", "bad_json", "not JSON", "pages.raw/1/9"),
                                          b"\xff" * 2_000_000, LIMITS)[1])
    listed = tuple(TemplatePagelet(i, 9, 4, i, i, i + 1, "/html/body/div", "x" * 80) for i in range(32))
    event = TemplateEvent("template.learned", "big.example", 7, "https://big.example/p",
                          {"template_segments": 40, "added": 40, "removed": 0, "previous_template_segments": 0,
                           "table_segments": 60}, PageletReport(60, 32, listed))
    full = codec.encode_event(event)
    lean = fit_event(event, b"big.example", OutputLimits(len(full) + RECORD_OVERHEAD_BYTES), "s")
    assert lean.omitted == ("pagelets",) and lean.value is not None
    check("template-event.v1.json", lean.value)
    gone = Expired(IndexEntry("old.example", 10, 1_000, 4_321, 12), "unseen_pages", 500, 3.5)
    check("template-event.v1.json", codec.encode_event(expired_event(gone)))
    check("template-event.v1.json", codec.encode_event(capped_event("a.example", 9, "https://a.example/", 5, 150, 150)))


def test_as_published_reduces_the_offline_record_the_way_the_worker_did() -> None:
    from detemplate.stream.outputs import as_published

    clean = clean_of(blocks_page(8_000))
    full = codec.encode_clean(clean)  # type: ignore[arg-type]
    for limit in (10_000_000, 300_000, 65_536):
        fitted = fit_clean(clean, b"big.example", OutputLimits(limit), "pages.raw/0/1")  # type: ignore[arg-type]
        assert fitted.value is not None
        assert as_published(full, fitted.value) == fitted.value
    other = clean_of(blocks_page(7_999))  # another page: its reduced record differs
    lean = fit_clean(clean, b"big.example", OutputLimits(300_000), "s").value
    assert lean is not None and as_published(codec.encode_clean(other), lean) != lean  # type: ignore[arg-type]
