"""Wire and file encodings of detemplate's output records.

Both shells serialise with these functions, so `detemplate run` and the stream worker
emit byte-identical JSON for the same pages in the same order. Keys are written in a
fixed order, without spaces, UTF-8 (ensure_ascii off): one JSON object per line/message.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ..engine.model import CleanPage, DeadPage, TemplateEvent

SCHEMA_VERSION = 1

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def clean_dict(page: CleanPage) -> dict[str, Any]:
    template_chars = 0
    chars = 0
    blocks = []
    for b in page.blocks:
        chars += b.chars
        if b.verdict == "template":
            template_chars += b.chars
        blocks.append(
            {
                "path": b.path,
                "chars": b.chars,
                "template_chars": b.template_chars,
                "ratio": round(b.ratio, 4),
                "verdict": b.verdict,
                "role": b.role,
                "method": b.method,
                "text": b.text[:80],
            }
        )
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "url": page.url,
        "host": page.host,
        "page_no": page.page_no,
    }
    if page.cluster is not None:
        out["cluster"] = page.cluster
    out |= {
        "text": page.text,
        "counts": {
            "blocks": len(page.blocks),
            "template_blocks": sum(1 for b in page.blocks if b.verdict == "template"),
            "chars": chars,
            "template_chars": template_chars,
        },
        "blocks": blocks,
        "links": {"content": list(page.content_links), "template": list(page.template_links)},
    }
    if page.html is not None:
        out["html"] = page.html
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


def encode(record: dict[str, Any]) -> bytes:
    return _dumps(record).encode("utf-8")


def encode_clean(page: CleanPage) -> bytes:
    return encode(clean_dict(page))


def encode_event(event: TemplateEvent) -> bytes:
    return encode(event_dict(event))


def encode_dead(dead: DeadPage, raw: bytes | None = None) -> bytes:
    return encode(dead_dict(dead, raw))
