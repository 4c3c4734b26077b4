"""schemas/: every record `detemplate run` writes validates; raw input and the schema agree.

The records come from the real command (detemplate.cli.main, in process) over pages from
tests.factories plus bad lines, with --html and --events, so a field added to
detemplate.io.codec without its schema (or the reverse) fails here.
"""

from __future__ import annotations

import base64
import codecs
import json
from pathlib import Path
from typing import Any

import pytest
from detemplate.cli import main
from detemplate.engine.model import DeadPage, RawPage
from detemplate.io import codec
from detemplate.io.sources import decode_record
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from tests.factories import interleave, make_site, write_jsonl

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
NAMES = ("raw-page", "clean-page", "template-event", "dead-letter")


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.v1.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=FormatChecker())


def errors(name: str, record: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(record)]


def run_cli(tmp_path: Path, lines: list[str], *flags: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`detemplate run` over JSONL lines; (output records, event records)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    events = tmp_path / "events.jsonl"
    assert main(["run", str(src), "--output", str(out), "--events", str(events), *flags]) == 0
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    evs = [json.loads(x) for x in events.read_text(encoding="utf-8").splitlines()]
    return recs, evs


def page_line(page: RawPage) -> str:
    return json.dumps({"url": page.url, "host": page.host, "html": page.html})


def b64_line(url: str, body: bytes, content_type: str | None = None) -> str:
    rec: dict[str, Any] = {"url": url, "body_b64": base64.b64encode(body).decode("ascii")}
    if content_type is not None:
        rec["content_type"] = content_type
    return json.dumps(rec)


BAD_LINES = [
    "{not json",
    "[1, 2, 3]",
    json.dumps({"html": "<p>no url</p>"}),
    json.dumps({"url": "https://x.example/a", "html": 5}),
    json.dumps({"url": "https://x.example/b", "body_b64": "!!not base64!!"}),
    json.dumps({"url": "https://x.example/c", "body_b64": "aGVsbG8=", "content_type": "image/png"}),
    json.dumps({"url": "https://x.example/d", "html": ""}),
    json.dumps({"url": "https://x.example/e", "html": "just words, no markup"}),
    json.dumps({"url": "https://x.example/f", "html": "<div>" * 500 + "deep"}),
    json.dumps({"url": "no-host-here", "html": "<p>x</p>"}),
]
BAD_REASONS = [
    "bad_json", "bad_record", "bad_record", "bad_record", "bad_record",
    "not_html", "empty", "not_html", "too_deep", "bad_url",
]  # fmt: skip


def test_schemas_are_valid_draft_2020_12() -> None:
    for name in NAMES:
        schema = json.loads((SCHEMAS / f"{name}.v1.json").read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/{name}.v1.json")


@pytest.mark.parametrize("with_html", [False, True], ids=["plain", "html"])
def test_every_record_of_a_run_validates(tmp_path: Path, with_html: bool) -> None:
    site_a = make_site("a.example", 40, seed=1, layout="blog", redesign=30)
    site_b = make_site("b.example", 12, seed=2, layout="docs")
    lines = [page_line(sp.page) for sp in interleave(site_a, site_b)]
    lines[5:5] = BAD_LINES
    recs, evs = run_cli(tmp_path, lines, *(["--html"] if with_html else []))

    assert len(recs) == len(lines)
    dead = [r for r in recs if "error" in r]
    clean = [r for r in recs if "error" not in r]
    assert [r["error"] for r in dead] == BAD_REASONS
    assert len(clean) == 52
    for r in dead:
        assert errors("dead-letter", r) == [], r
        assert errors("clean-page", r) != []  # the two record kinds cannot be confused
    for r in clean:
        assert errors("clean-page", r) == [], r["url"]
        assert ("html" in r) is with_html
        assert errors("dead-letter", r) != []
    # Both verdicts occur, and blocks decided by the table, so their values are checked too.
    blocks = [b for r in clean for b in r["blocks"]]
    assert {b["verdict"] for b in blocks} == {"content", "template"}
    assert {"table"} < {b["method"] for b in blocks}  # and by a cold-start method on first pages
    assert {e["type"] for e in evs} == {"template.learned", "template.changed"}
    for e in evs:
        assert errors("template-event", e) == [], e


def test_stream_dead_letters_with_raw_bytes_validate() -> None:
    dead = DeadPage("", "x.example", "bad_key", "the message key 'y' is not the page's host 'x.example'", "p/0/1")
    rec = json.loads(codec.encode_dead(dead, b"\xff\x00 raw bytes"))
    assert errors("dead-letter", rec) == []
    assert base64.b64decode(rec["raw_b64"]) == b"\xff\x00 raw bytes"
    rec["raw_b64"] = 17
    assert errors("dead-letter", rec) != []


def test_schema_catches_what_it_should() -> None:
    good = {
        "v": 1, "type": "template.learned", "host": "h", "page_no": 2, "url": "u",
        "details": {"template_segments": 3, "added": 3, "removed": 0, "previous_template_segments": 0,
                    "table_segments": 9},
    }  # fmt: skip
    assert errors("template-event", good) == []
    assert errors("template-event", {**good, "type": "template.vanished"}) != []
    assert errors("template-event", {**good, "details": {**good["details"], "extra": 1}}) != []
    assert errors("template-event", {**good, "page_no": 0}) != []


# -- raw input: the schema and the decoder agree ---------------------------------------------------

# (record, schema-valid, what sources.py makes of it: "page" or a dead reason)
RAW_CASES: list[tuple[Any, bool, str]] = [
    ({"url": "https://a.example/1", "html": "<p>x</p>"}, True, "page"),
    ({"url": "https://a.example/1", "host": "A.Example ", "html": "<p>x</p>"}, True, "page"),
    ({"v": 1, "url": "https://a.example/1", "html": "<p>x</p>", "crawler": "extra fields are fine"}, True, "page"),
    ({"url": "https://a.example/1", "body_b64": "PHA+eDwvcD4="}, True, "page"),
    (
        {"url": "https://a.example/1", "body_b64": "PHA+eDwvcD4=", "content_type": "text/html; charset=utf-8"},
        True,
        "page",
    ),
    ({"url": "https://a.example/1", "html": "<p>x</p>", "body_b64": "PHA+eDwvcD4="}, True, "page"),
    ({"url": "https://a.example/1", "body_b64": "PHA+eDwvcD4=", "content_type": "application/pdf"}, True, "not_html"),
    ({"url": "https://a.example/1"}, False, "bad_record"),
    ({"url": "", "html": "<p>x</p>"}, False, "bad_record"),
    ({"url": 7, "html": "<p>x</p>"}, False, "bad_record"),
    ({"html": "<p>x</p>"}, False, "bad_record"),
    ({"url": "https://a.example/1", "host": " ", "html": "<p>x</p>"}, False, "bad_record"),
    ({"url": "https://a.example/1", "host": 3, "html": "<p>x</p>"}, False, "bad_record"),
    ({"url": "https://a.example/1", "html": ["<p>"]}, False, "bad_record"),
    ({"url": "https://a.example/1", "body_b64": "%%%"}, False, "bad_record"),
    ({"url": "https://a.example/1", "body_b64": "PHA+", "content_type": 1}, False, "bad_record"),
    ({"v": None, "url": "https://a.example/1", "html": "<p>x</p>"}, True, "page"),
    ({"v": 2, "url": "https://a.example/1", "html": "<p>x</p>"}, False, "unsupported_version"),
    ({"v": "1", "url": "https://a.example/1", "html": "<p>x</p>"}, False, "unsupported_version"),
    ({"v": True, "url": "https://a.example/1", "html": "<p>x</p>"}, False, "unsupported_version"),
    ({"v": 2, "page": {"address": "https://a.example/1"}}, False, "unsupported_version"),  # whatever v2 looks like
    (["url"], False, "bad_record"),
    # URLs and hosts: the schema says http(s) and a length; the decoder checks the rest (worker/io/urls.py).
    ({"url": "no-host-name", "html": "<p>x</p>"}, False, "bad_url"),
    ({"url": "//nohost/p", "html": "<p>x</p>"}, False, "bad_url"),
    ({"url": "https://a.example/" + "x" * 9000, "html": "<p>x</p>"}, False, "bad_url"),
    ({"url": "https://a b.example/", "html": "<p>x</p>"}, True, "bad_host"),
    ({"url": "https://a.example:99999/", "html": "<p>x</p>"}, True, "bad_url"),
    ({"url": "https://sur.example/\udfff", "html": "<p>x</p>"}, True, "bad_url"),
    ({"url": "https://a.example/1", "host": "a\u0000b.example", "html": "<p>x</p>"}, True, "bad_host"),
    ({"url": "https://a.example/1", "host": "a..example", "html": "<p>x</p>"}, True, "bad_host"),
]


@pytest.mark.parametrize(("record", "valid", "decoded"), RAW_CASES, ids=range(len(RAW_CASES)))
def test_raw_page_schema_agrees_with_the_decoder(record: Any, valid: bool, decoded: str) -> None:
    assert (errors("raw-page", record) == []) is valid
    got = decode_record(json.dumps(record).encode(), "t:1")
    assert (got.reason if isinstance(got, DeadPage) else "page") == decoded


# -- page bodies as bytes: charsets ------------------------------------------------------------------


def html_bytes(text: str, encoding: str, meta: str | None = None, bom: bytes = b"") -> bytes:
    head = f'<meta charset="{meta}">' if meta else ""
    page = f"<html><head>{head}<title>t</title></head><body><article><p>{text}</p></article></body></html>"
    return bom + page.encode(encoding)


# (body bytes, content_type, the text that must come out)
CHARSET_CASES = {
    "http-header": (html_bytes("Привет, мир", "cp1251"), "text/html; charset=windows-1251", "Привет, мир"),
    "meta": (html_bytes("日本語のページ", "shift_jis", meta="shift_jis"), "text/html", "日本語のページ"),
    "meta-no-content-type": (html_bytes("Zażółć gęślą jaźń", "iso-8859-2", meta="iso-8859-2"), None,
                             "Zażółć gęślą jaźń"),
    "header-beats-meta": (html_bytes("Съешь же ещё", "koi8_r", meta="windows-1251"), "text/html; charset=KOI8-R",
                          "Съешь же ещё"),
    "bom-utf16-beats-header": (html_bytes("naïve café", "utf-16-le", bom=codecs.BOM_UTF16_LE),
                               "text/html; charset=iso-8859-1", "naïve café"),
    "bom-utf8-beats-meta": (html_bytes("Grüße — ok", "utf-8", meta="windows-1252", bom=codecs.BOM_UTF8),
                            "text/html", "Grüße — ok"),
    "unknown-label-ignored": (html_bytes("ünïcödé", "utf-8"), "text/html; charset=x-no-such-charset", "ünïcödé"),
    "wrong-header-falls-back": (html_bytes("Ελληνικά", "utf-8"), "text/html; charset=EUC-KR", "Ελληνικά"),
    "latin1-is-windows-1252": (html_bytes("price 5 €", "cp1252"), "text/html; charset=ISO-8859-1", "price 5 €"),
    "undeclared-utf8": (html_bytes("Ελληνικά", "utf-8"), None, "Ελληνικά"),
    "undeclared-cp1252": (html_bytes("déjà vu", "cp1252"), None, "déjà vu"),
}  # fmt: skip


def test_base64_bodies_decode_with_the_right_charset(tmp_path: Path) -> None:
    names = list(CHARSET_CASES)
    lines = [
        b64_line(f"https://{name}.example/p.html", body, ctype) for name, (body, ctype, _) in CHARSET_CASES.items()
    ]
    recs, _ = run_cli(tmp_path, lines)
    assert len(recs) == len(names)
    for name, rec in zip(names, recs, strict=True):
        assert errors("clean-page", rec) == [], name
        assert rec["host"] == f"{name}.example"
        # Block texts, whatever their verdict: a one-block cold page may be judged either way.
        assert [b["text"] for b in rec["blocks"]] == [CHARSET_CASES[name][2]], name
    for line in lines:
        assert errors("raw-page", json.loads(line)) == []


def test_jsonl_written_by_the_factory_is_raw_page_input(tmp_path: Path) -> None:
    path = write_jsonl(make_site("f.example", 3, seed=4), tmp_path / "f.jsonl")
    for line in path.read_text(encoding="utf-8").splitlines():
        assert errors("raw-page", json.loads(line)) == []


ABSENT = object()
_FIELD_VALUES: dict[str, list[Any]] = {
    "v": [ABSENT, None, 1, 2, "1"],
    "url": [ABSENT, "https://a.example/p.html", "no-host-name", "", 7, None],
    "host": [ABSENT, None, "A.Example", " ", "", 3],
    "html": [ABSENT, None, "<p>x</p>", 5, ["<p>"]],
    "body_b64": [ABSENT, None, "PHA+eDwvcD4=", "%%%", 1],
    "content_type": [ABSENT, None, "text/html", "text/html; charset=utf-8", "image/png", 2],
}


@given(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in _FIELD_VALUES.items()}))
@settings(max_examples=400, deadline=None, derandomize=True)
def test_raw_page_schema_and_decoder_agree_on_any_record(fields_: dict[str, Any]) -> None:
    """Valid by the schema => decoded (or dead for its content, not its shape); another `v` =>
    unsupported_version; otherwise invalid => bad_record, except for what the decoder ignores:
    the body fields when `html` is text."""
    record = {k: v for k, v in fields_.items() if v is not ABSENT}
    got = decode_record(json.dumps(record).encode(), "t:1")
    reason = got.reason if isinstance(got, DeadPage) else "page"
    if errors("raw-page", record) == []:
        assert reason in ("page", "not_html", "undecodable"), reason
        return
    if record.get("v") not in (None, 1):
        assert reason == "unsupported_version", (record, reason)
        return
    ignored = dict(record)
    if isinstance(record.get("html"), str):
        ignored = {k: v for k, v in ignored.items() if k not in ("body_b64", "content_type")}
    if errors("raw-page", ignored) == []:
        return  # only what the decoder ignores is wrong
    if reason == "bad_url":  # a URL string the schema's pattern refuses: the decoder says why
        url = record.get("url")
        assert isinstance(url, str) and errors("raw-page", {"url": url, "html": "<p>x</p>"}) != []
        return
    assert reason == "bad_record", (record, reason)


def test_template_events_with_pagelets_validate(tmp_path: Path) -> None:
    site = make_site("p.example", 40, seed=1, layout="blog", redesign=30)
    lines = [page_line(sp.page) for sp in site]
    recs, evs = run_cli(tmp_path, lines, "--param", "pagelets.events=true", "--param", "pagelets.enabled=true")
    assert all(errors("clean-page", r) == [] for r in recs)
    assert "pagelet" in {b["method"] for r in recs for b in r["blocks"]}
    assert {e["type"] for e in evs} == {"template.learned", "template.changed"}
    for e in evs:
        assert errors("template-event", e) == [], e
        assert e["details"]["pagelets"] and e["details"]["template_pagelets"] >= len(e["details"]["pagelets"])
    details = evs[0]["details"]
    one = details["pagelets"][0]
    assert errors("template-event", {**evs[0], "details": {**details, "pagelets": [{**one, "shingle": "xyz"}]}})
    assert errors("template-event", {**evs[0], "details": {**details, "pagelets": [{**one, "extra": 1}]}})
    without_counts = {k: v for k, v in details.items() if k != "page_pagelets"}
    assert errors("template-event", {**evs[0], "details": without_counts})  # the pagelet fields come together
