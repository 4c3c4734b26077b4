"""Every record the worker sends, sized before it is sent: a message over the limit never reaches the producer.

Kafka refuses a message larger than the producer's `max.request.size` (aiokafka checks it
in `send`, and Faust re-raises that as ProducerSendError) or than the broker's
`message.max.bytes` / the topic's `max.message.bytes`. One such output used to stop the
worker, and every restart read the same input and stopped again. Here each output is
encoded and measured first (`OutputLimits.fits`), and one that is too large is made
smaller in documented steps, never dropped:

- a clean page: the full record; else its lean form, which leaves out, in this order,
  `html`, `blocks` and `links` (named in the record's `omitted` list: `counts` still says
  how many blocks there were); else the lean form with `text` cut to what fits
  (`text_chars` then gives the full text's length). Only a page whose URL and host alone
  exceed the limit is left with no clean record: it becomes a dead letter
  (`output_too_large`, naming the sizes and the input's partition and offset);
- a template event: the full record; else without `details.pagelets` (`omitted`); else a
  dead letter;
- a dead letter: its `url`, `host` and `detail` cut to a few KB, and the original bytes in
  `raw_b64` cut to what fits (`raw_bytes` then gives the original size, `raw_truncated` is
  true, and `source` names the original message by topic, partition and offset).

A record that cannot be encoded at all (a lone surrogate in a string: `UnicodeEncodeError`;
any other serialisation error) becomes a dead letter `output_unencodable` the same way.
Dead letters themselves never fail: their strings are made encodable first.

State records (deltas, snapshots) are split into parts instead: detemplate.state.changelog.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine.model import CleanPage, DeadPage, TemplateEvent
from ..io import codec

# What a record costs beyond its key and value: the record and batch headers (Kafka's
# v2 record batch: 61 bytes, a record about 20, plus headers; Faust adds none here). A
# generous margin, so that aiokafka's own check (key + value + its record overhead
# against max_request_size) can never refuse what passed this one.
RECORD_OVERHEAD_BYTES = 512

# A dead letter's strings at most (characters): a URL longer than this is cut, and so is
# a host (a message key can be anything) and the detail sentence.
DEAD_URL_CHARS = 8192
DEAD_HOST_CHARS = 1024
DEAD_DETAIL_CHARS = 1024

# Encoding errors that turn an output into an `output_unencodable` dead letter: a lone
# surrogate (UnicodeEncodeError, a ValueError), NaN (ValueError), an unexpected type (TypeError).
# codec.UnencodableError: a lone surrogate in a field (a BadInputError, not a ValueError).
ENCODING_ERRORS = (codec.UnencodableError, ValueError, TypeError, OverflowError, RecursionError)

CLEAN_OMISSIONS = ("html", "blocks", "links")  # a clean page's lean form leaves these out, in this order


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """The producer's message limit (StreamSettings.max_message_bytes).

    max_message_bytes: the largest message (key + value + record overhead) the worker
        sends; at most the producer's max.request.size and the brokers' message.max.bytes
        (or the topics' max.message.bytes).
    """

    max_message_bytes: int

    def value_budget(self, key: bytes) -> int:
        """The largest value that fits beside `key`."""
        return self.max_message_bytes - RECORD_OVERHEAD_BYTES - len(key)

    def fits(self, key: bytes, value: bytes | None) -> bool:
        return len(value or b"") <= self.value_budget(key)


@dataclass(frozen=True, slots=True)
class Fitted:
    """An output ready to send, or the dead letter that replaces it."""

    value: bytes | None  # None: nothing fits, see `dead`
    omitted: tuple[str, ...] = ()  # what the record leaves out to fit ("text" when cut)
    dead: DeadPage | None = None


def safe_text(text: str, limit: int) -> str:
    """`text` with lone surrogates replaced (U+FFFD), cut to `limit` characters with a note."""
    # Through UTF-16, where a lone surrogate encodes (surrogatepass) and decodes as U+FFFD (replace).
    clean = text if _encodes(text) else text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if len(clean) > limit:
        note = f" [cut: {len(clean):,} characters]"
        clean = clean[: max(0, limit - len(note))] + note
    return clean


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def output_key(host: str) -> bytes:
    """The Kafka key of an output: the host, UTF-8 (lone surrogates replaced), at most DEAD_HOST_CHARS."""
    return safe_text(host, DEAD_HOST_CHARS).encode("utf-8")


def fit_clean(page: CleanPage, key: bytes, limits: OutputLimits, source: str) -> Fitted:
    """The clean record of `page` that fits: full, lean, or lean with its text cut (see the module)."""
    budget = limits.value_budget(key)
    try:
        data = codec.encode_clean(page)
        if len(data) <= budget:
            return Fitted(data)
        record = codec.clean_dict(page)
        plain = codec.plain_ratios(page)
        omitted: list[str] = []
        for name in CLEAN_OMISSIONS:
            if name not in record:
                continue
            del record[name]
            omitted.append(name)
            record["omitted"] = list(omitted)
            data = codec.encode(record, plain)
            if len(data) <= budget:
                return Fitted(data, tuple(omitted))
        text = record["text"]
        record["text"] = ""
        record["text_chars"] = len(text)
        record["omitted"] = [*omitted, "text"]
        room = budget - len(codec.encode(record, plain))
        if room < 0:
            return Fitted(None, dead=_too_large(page.url, page.host, "clean page", len(data), limits, source))
        record["text"] = _cut_to_json_bytes(text, room)
        return Fitted(codec.encode(record, plain), (*omitted, "text"))
    except ENCODING_ERRORS as exc:
        return Fitted(None, dead=_unencodable(page.url, page.host, "clean page", exc, source))


def as_published(full: bytes, published: bytes) -> bytes:
    """The full clean record `full` (as `detemplate run` writes it) reduced the way `published`
    (the worker's record of the same page) was: equal to `published` when the worker decided
    the page alike. For comparing a lean record with the offline one."""
    got = json.loads(published)
    if "omitted" not in got:
        return full
    want = json.loads(full)
    for name in got["omitted"]:
        if name != "text":
            want.pop(name, None)
    want["omitted"] = got["omitted"]
    if "text" in got["omitted"]:
        text = want["text"]
        want["text_chars"] = len(text)
        want["text"] = text[: len(got["text"])]
    return codec.encode(want)


def fit_event(event: TemplateEvent, key: bytes, limits: OutputLimits, source: str) -> Fitted:
    """The event record that fits: full, or without its pagelet list; else a dead letter."""
    budget = limits.value_budget(key)
    try:
        record = codec.event_dict(event)
        data = codec.encode(record)
        if len(data) <= budget:
            return Fitted(data)
        details = record.get("details")
        if isinstance(details, dict) and "pagelets" in details:
            record["details"] = {k: v for k, v in details.items() if k != "pagelets"}
            record["omitted"] = ["pagelets"]
            smaller = codec.encode(record)
            if len(smaller) <= budget:
                return Fitted(smaller, ("pagelets",))
        what = f"{event.type} event"
        return Fitted(None, dead=_too_large(event.url, event.host, what, len(data), limits, source))
    except ENCODING_ERRORS as exc:
        return Fitted(None, dead=_unencodable(event.url, event.host, f"{event.type} event", exc, source))


def fit_dead(dead: DeadPage, raw: bytes | None, limits: OutputLimits) -> tuple[bytes, bytes]:
    """(key, value) of a dead letter that fits and encodes whatever it holds (see the module)."""
    record: dict[str, Any] = codec.dead_dict(
        DeadPage(
            safe_text(dead.url, DEAD_URL_CHARS),
            safe_text(dead.host, DEAD_HOST_CHARS),
            dead.reason,
            safe_text(dead.detail, DEAD_DETAIL_CHARS),
            safe_text(dead.source, DEAD_URL_CHARS),
        )
    )
    key = record["host"].encode("utf-8")
    if raw is None:  # no message behind it (`run`'s inputs, `produce`): strings are bounded, it fits
        return key, codec.encode(record)
    record["raw_b64"] = ""
    budget = limits.value_budget(key)
    bare = len(codec.encode(record))
    full_b64 = 4 * ((len(raw) + 2) // 3)
    if bare + full_b64 <= budget:
        record["raw_b64"] = base64.b64encode(raw).decode("ascii")
        return key, codec.encode(record)
    record["raw_bytes"] = len(raw)
    record["raw_truncated"] = True
    room = budget - len(codec.encode(record))
    keep = max(0, room) // 4 * 3  # base64: 4 characters for every 3 bytes
    record["raw_b64"] = base64.b64encode(raw[:keep]).decode("ascii")
    return key, codec.encode(record)


def _too_large(url: str, host: str, what: str, size: int, limits: OutputLimits, source: str) -> DeadPage:
    return DeadPage(
        url,
        host,
        "output_too_large",
        f"its {what} is {size:,} bytes and even its smallest form is over the limit of "
        f"{limits.max_message_bytes:,} bytes a message (DETEMPLATE_MAX_MESSAGE_BYTES); the input is {source}",
        source,
    )


def _unencodable(url: str, host: str, what: str, exc: BaseException, source: str) -> DeadPage:
    return DeadPage(
        url,
        host,
        "output_unencodable",
        f"its {what} cannot be serialised as UTF-8 JSON ({type(exc).__name__}: {exc}); the input is {source}",
        source,
    )


def _cut_to_json_bytes(text: str, room: int, encode: Callable[[str], bytes] | None = None) -> str:
    """The longest prefix of `text` whose JSON string encoding grows a record by at most `room` bytes."""
    enc = encode or (lambda s: json.dumps(s, ensure_ascii=False).encode("utf-8"))
    base = len(enc(""))  # the two quotes, already in the record
    lo, hi = 0, len(text)
    while lo < hi:  # the encoded length only grows with the prefix: a binary search
        mid = (lo + hi + 1) // 2
        if len(enc(text[:mid])) - base <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
