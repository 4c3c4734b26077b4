"""Wire and file encodings of detemplate's output records.

Both shells serialise with these functions, so `detemplate run` and the stream worker
emit byte-identical JSON for the same pages in the same order. Keys are written in a
fixed order, without spaces, UTF-8 (ensure_ascii off): one JSON object per line/message.

Every record can be encoded or says why not: a string holding a lone surrogate (which
Python strings can hold and UTF-8 cannot) makes `encode` raise UnencodableError (a
BadInputError, reason ``unencodable``), which the shells write as a dead letter; a dead
letter itself always encodes (any lone surrogate in it becomes U+FFFD).

`loads` reads an input record (a JSONL line, a pages.raw message) exactly as `json.loads`
does, through orjson where it is installed and agrees (a few times faster on a page's
HTML), and says whether its strings are known to hold no lone surrogate.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ..engine.errors import BadInputError
from ..engine.model import TEMPLATE, BlockVerdict, CleanPage, DeadPage, RawPage, TemplateEvent
from ..engine.page import compiled

_orjson: Any
try:  # optional: the same results without it, slower
    import orjson as _orjson
except ImportError:  # pragma: no cover (orjson is a dependency; the fallback is tested by patching it away)
    _orjson = None

SCHEMA_VERSION = 1

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_SURROGATE = re.compile("[\ud800-\udfff]")

# RawPage.meta keys written into a clean page's "warc" object, under these names.
WARC_FIELDS = (("warc_file", "file"), ("warc_offset", "offset"), ("warc_record_id", "record_id"),
               ("warc_target_uri", "target_uri"))


class UnencodableError(BadInputError):
    """A record with a string no UTF-8 output can carry (a lone surrogate)."""


def page_fields(page: CleanPage) -> dict[str, Any]:
    """The fields every output format gives a clean page, in order: v, url, host, page_no,
    cluster, title, lang, date, last_modified, warc (docs/fields.md)."""
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "url": page.url,
        "host": page.host,
        "page_no": page.page_no,
    }
    if page.cluster is not None:
        out["cluster"] = page.cluster
    if page.title is not None:
        out["title"] = page.title
    if page.lang is not None:
        out["lang"] = page.lang
    meta = page.meta
    if meta:
        for key in ("date", "last_modified"):
            if meta.get(key) is not None:
                out[key] = meta[key]
        warc = warc_dict(meta)
        if warc:
            out["warc"] = warc
    return out


def warc_dict(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Where the page is in its WARC or ARC file: file, offset, record_id, target_uri (those known)."""
    return {name: meta[key] for key, name in WARC_FIELDS if meta.get(key) is not None}


def counts_dict(page: CleanPage) -> dict[str, int]:
    chars = template_chars = template_blocks = 0
    for b in page.blocks:
        chars += b.chars
        if b.verdict == TEMPLATE:
            template_chars += b.chars
            template_blocks += 1
    return _counts(len(page.blocks), template_blocks, chars, template_chars)


def _counts(blocks: int, template_blocks: int, chars: int, template_chars: int) -> dict[str, int]:
    return {"blocks": blocks, "template_blocks": template_blocks, "chars": chars, "template_chars": template_chars}


BLOCK_TEXT_CHARS = 80  # a block's text in a clean record: its first characters


def block_dicts(page: CleanPage) -> list[dict[str, Any]]:
    """A clean record's "blocks": one object a block (docs/fields.md)."""
    return [
        {
            "path": path,
            "chars": chars,
            "template_chars": template_chars,
            "ratio": round(ratio, 4),
            "verdict": verdict,
            "role": role,
            "method": method,
            "text": text[:BLOCK_TEXT_CHARS],
        }
        for path, text, chars, template_chars, ratio, verdict, method, role in page.blocks
    ]


def clean_dict(page: CleanPage, blocks: bool = True) -> dict[str, Any]:
    """A clean page's record; without `blocks` the lean form (no "blocks" array)."""
    return _clean_record(page, counts_dict(page), block_dicts(page) if blocks else None)


def _clean_record(page: CleanPage, counts: dict[str, int], blocks: Any) -> dict[str, Any]:
    out = page_fields(page)
    out["text"] = page.text
    out["counts"] = counts
    if blocks is not None:
        out["blocks"] = blocks
    out["links"] = {"content": list(page.content_links), "template": list(page.template_links)}
    if page.html is not None:
        out["html"] = page.html
    return out


def raw_dict(page: RawPage) -> dict[str, Any]:
    """The raw-page record of a page (schemas/raw-page.v1.json): url, host, html and its meta fields."""
    out: dict[str, Any] = {"url": page.url, "host": page.host, "html": page.html}
    for key, value in page.meta.items():
        if value is not None:
            out[key] = value
    return out


PAGELET_TEXT_CHARS = 80  # a template pagelet's text in an event, as a block's in a clean page


def event_dict(event: TemplateEvent) -> dict[str, Any]:
    details = event.details
    report = event.pagelets
    if report is not None:
        details = dict(details)
        details["page_pagelets"] = report.page_pagelets
        details["template_pagelets"] = report.template_pagelets
        details["pagelets"] = [
            {
                "shingle": f"{p.shingle:016x}",
                "df": p.df,
                "links": p.links,
                "order": p.order,
                "blocks": list(range(p.first_block, p.end_block)),
                "path": p.path,
                "text": p.text[:PAGELET_TEXT_CHARS],
            }
            for p in report.listed
        ]
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": event.type,
        "host": event.host,
        "page_no": event.page_no,
    }
    if event.cluster is not None:
        out["cluster"] = event.cluster
    out["url"] = event.url
    out["details"] = details
    return out


def dead_dict(dead: DeadPage, raw: bytes | None = None) -> dict[str, Any]:
    """A dead letter; `raw` (the original message bytes) is carried base64-encoded."""
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "error": dead.reason,
        "detail": dead.detail,
        "url": dead.url,
        "host": dead.host,
        "source": dead.source,
    }
    if raw is not None:
        out["raw_b64"] = base64.b64encode(raw).decode("ascii")
    return out


# orjson writes what json writes (same escapes, same shortest float digits) except for a
# float under 1e-4 in magnitude (orjson: 0.00001, json: 1e-05), NaN and infinities (orjson:
# null, json refuses), integers past 64 bits (orjson refuses), and types json refuses but
# orjson writes (dataclasses, datetimes, subclasses of str, int, dict and list: passed to
# `_refuse`, so json decides them). So it writes a record only when the caller knows its
# floats (`plain_floats`), and any refusal falls back to json.
_ORJSON_OPTIONS = 0
if _orjson is not None:
    _ORJSON_OPTIONS = (
        _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME | _orjson.OPT_PASSTHROUGH_SUBCLASS
    )


def _refuse(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is left to json")


def encode(record: dict[str, Any], plain_floats: bool = False) -> bytes:
    """The record as UTF-8 JSON; UnencodableError when a string in it has a lone surrogate.

    plain_floats: every float in the record is finite and either 0 or at least 1e-4 in
        magnitude (a clean record's rounded ratios, `plain_ratios`): orjson may write it,
        several times faster, byte for byte as json does."""
    if plain_floats and _orjson is not None:
        try:
            data: bytes = _orjson.dumps(record, default=_refuse, option=_ORJSON_OPTIONS)
            return data
        except TypeError:  # orjson.JSONEncodeError: a lone surrogate, a big integer, a type left to json
            pass
    text = _dumps(record)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        field = _field_at(text, exc.start)
        raise UnencodableError(
            "unencodable",
            f"the field {field!r} holds a lone surrogate ({text[exc.start : exc.end]!r}), which no UTF-8 output "
            "can carry",
        ) from exc


def loads(data: bytes | memoryview) -> tuple[Any, bool]:
    """`json.loads(data)` (raising what it raises: ValueError, RecursionError), and whether every
    string in the result is known to be valid Unicode (no lone surrogate: a UTF-8 output can carry it).

    orjson reads what json reads into equal values, except where it refuses (lone surrogates,
    a BOM or UTF-16/32, NaN and Infinity, invalid UTF-8: json.loads then decides, and raises
    its own error) and for integers beyond 64 bits, which it reads as floats: a float at the
    top (a record's fields are read there) is read again by json. What orjson accepts has no
    lone surrogate, neither escaped nor encoded (json.loads lets both through)."""
    if _orjson is not None:
        try:
            obj = _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
        else:
            if type(obj) is not float and not (type(obj) is dict and any(type(v) is float for v in obj.values())):
                return obj, True
    return json.loads(data if isinstance(data, bytes) else bytes(data)), False  # (json takes no memoryview)


def _field_at(text: str, at: int) -> str:
    """The name of the JSON key whose value holds character `at` of `text` (best effort, for the message)."""
    keys = re.findall(r'"([a-z_]+)":', text[:at])
    return keys[-1] if keys else "?"


def safe_text(text: str) -> str:
    """`text` with any lone surrogate made U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def plain_ratios(page: CleanPage) -> bool:
    """Whether `clean_dict(page)` holds only plain floats (see `encode`): its blocks' ratios,
    rounded to 4 places, are 0 or at least 1e-4 whenever they are finite."""
    return all(math.isfinite(b.ratio) for b in page.blocks)


def encode_clean(page: CleanPage, blocks: bool = True) -> bytes:
    """`encode(clean_dict(page, blocks), plain_ratios(page))`, the same bytes. Where orjson
    writes the record, the blocks' JSON comes from the compiled `blocks_json` (page/_walk.pyx)
    as one fragment instead of a dict a block (the blocks' dicts were most of a record's cost)."""
    if blocks and page.blocks:
        fast = _blocks_json()
        if fast is not None:
            done = fast(page.blocks, BLOCK_TEXT_CHARS, TEMPLATE)
            if done is not None:  # every ratio in [0, 1] too, so plain_ratios holds
                data, template_blocks, chars, template_chars = done
                counts = _counts(len(page.blocks), template_blocks, chars, template_chars)
                try:
                    out: bytes = _orjson.dumps(
                        _clean_record(page, counts, _orjson.Fragment(data)), default=_refuse, option=_ORJSON_OPTIONS
                    )
                    return out
                except TypeError:  # a lone surrogate elsewhere in the record: encode says which
                    pass
    return encode(clean_dict(page, blocks), plain_floats=plain_ratios(page))


# Probe blocks for the compiled blocks_json: every escape orjson makes, characters of every
# UTF-8 length, a text cut inside a multi-byte run, and ratios at and between the ends.
_PROBE_BLOCKS = tuple(
    BlockVerdict(path, text, chars, template_chars, ratio, verdict, method, role)
    for path, text, chars, template_chars, ratio, verdict, method, role in (
        ("html/body/div", "Plain text", 10, 0, 0.0, "content", "table", "main"),
        ("html/body/nav.menu", 'q"b\\s/\x00\x08\t\n\x0b\x0c\r\x1f\x7f', 14, 14, 1.0, "template", "pagelet", "template"),
        ("html/body/p", "é€😀" * 40, 120, 37, 0.30833, "content", "pagelevel", "main"),
        ("html/body/aside", "x" * 200, 200, 1, 0.005, "template", "markup", "related"),
        ("html/body/ul/li", "", 0, 0, 0.99996, "content", "cold", "other"),
        ("html/body/td", "a\u2028b", 3, 2, 0.00005, "content", "table", "comments"),
        ("html/body/div.\u00e9", "tail", 4, 3, 0.12345, "content", "table", "main"),
    )
)


def _blocks_json() -> Any:
    """The compiled blocks_json where the compiled walk is in use and it wrote orjson's bytes
    for the probe blocks, else None (then the record is built of dicts)."""
    if _orjson is None or not hasattr(_orjson, "Fragment"):
        return None
    mod = compiled.checked(_blocks_json_check)
    return None if mod is None else mod.blocks_json


def _blocks_json_check(mod: Any) -> Any:
    def agrees(m: Any) -> bool:
        page = CleanPage("u", "h", 1, "", _PROBE_BLOCKS)
        data, template_blocks, chars, template_chars = m.blocks_json(_PROBE_BLOCKS, BLOCK_TEXT_CHARS, TEMPLATE)
        counts = _counts(len(_PROBE_BLOCKS), template_blocks, chars, template_chars)
        return bool(data == _orjson.dumps(block_dicts(page)) and counts == counts_dict(page))

    return compiled.agreeing(mod, ("blocks_json",), agrees)


def encode_event(event: TemplateEvent) -> bytes:
    return encode(event_dict(event))


def encode_dead(dead: DeadPage, raw: bytes | None = None) -> bytes:
    """A dead letter's JSON: always encodable (lone surrogates in its fields become U+FFFD)."""
    return safe_text(_dumps(dead_dict(dead, raw))).encode("utf-8")
