"""WARC and ARC files, record by record, as the web's archive readers read them.

`iter_archive` yields a RawPage for each HTML page of a WARC (1.0/1.1) or ARC (v1/v2)
file, plain or gzip (one member a record, or the whole file), and a DeadPage for each
record that is broken, with the record's offset in ``source`` (``file@offset``). One bad
record costs that record: after a record whose header is garbage, whose declared length
runs past its gzip member or the file, or that is followed by garbage, reading resumes
at the next record header (the next gzip member, or the next ``WARC/1.x`` line of a plain
file), so a record that declares ``Content-Length: 10^15`` does not swallow the records
after it.

Pages: WARC ``response`` records of ``application/http`` with a 2xx status and an HTML
content type (or none), WARC ``resource`` records with an HTML content type, and ARC
records of http(s) URLs read the same way as a response. Everything else (requests,
metadata, revisits, images, redirects, ``dns:`` records, ARC's ``filedesc``) is not a page
and is skipped silently.

HTTP bodies are read as browsers' archive replay (and warcio) reads them:
``Transfer-Encoding: chunked`` is undone only when the body really is chunked (many
crawlers store the body de-chunked and keep the header); ``Content-Encoding`` gzip,
deflate and br are undone, at most the page size limit (a body inflating past it is a
``too_large`` dead letter, inflated no further), and a body that is not encoded as its
header says is taken as it is (also common: the crawler stored it decoded). Nothing of
a record beyond the page size limit is held in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from ..engine.model import DeadPage, RawPage
from .charsets import charset_of, decode_html
from .stream import Stream, StreamError, TooLarge, inflate
from .urls import MAX_URL_CHARS, UrlError, check_page_url, host_of

MAX_HEADER_BYTES = 64 << 10  # a WARC or HTTP header block longer than this is not one
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_PEEK_BYTES = 16 << 10
_STRAY_LINE_BYTES = 256  # an ARC header line (its URL) is recognised within this much
_RESYNC_BYTES = 1 << 62  # resynchronising scans to the end of the file if it must
_WARC_START = re.compile(rb"(?:^|\n)WARC/1\.[0-9]\r?\n")
_ARC_LINE = re.compile(rb"\S+ \S+ \d{14} ")  # URL IP-address archive-date ...
_ARC_START = re.compile(rb"\n(?=\S+ \S+ \d{14} )")
_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def iter_archive(stream: Stream, name: str, max_page_bytes: int) -> Iterator[RawPage | DeadPage]:
    """Every page of one WARC or ARC file (module docstring); `name` goes into each source."""
    reader = _Reader(stream, name, max_page_bytes)
    while True:
        try:
            yield from reader.records()
            return
        except StreamError as exc:
            # A broken gzip member: that record is lost; the next member is the next record.
            at = stream.member_offset if stream.gz else stream.pos
            recovered = stream.recover()
            more = "reading goes on at the next gzip member" if recovered else "the rest of the file is lost"
            yield DeadPage("", "", "unreadable_input", f"{exc}; {more}", f"{name}@{at}")
            if not recovered:
                return


class _Reader:
    def __init__(self, stream: Stream, name: str, max_page_bytes: int) -> None:
        self.s = stream
        self.name = name
        self.max_page_bytes = max_page_bytes
        self.arc = False

    def _skip_blank(self) -> None:
        """Skip the line breaks between records (any run of CR and LF: writers differ)."""
        s = self.s
        while True:
            head = s.peek(256)
            n = len(head) - len(head.lstrip(b"\r\n"))
            if not n:
                return
            s.skip(n)

    def _stray_line(self, head: bytes) -> bool:
        """Skip one short stray line after a record when a record header follows it: a block
        whose Content-Length was a few bytes short, which archive readers tolerate (warcio
        warns): nothing is lost, so it is no dead letter."""
        nl = head.find(b"\n", 0, _STRAY_LINE_BYTES)
        if nl < 0:
            return False
        rest = head[nl + 1 :].lstrip(b"\r\n")
        if not (rest.startswith(b"WARC/") or (self.arc and _ARC_LINE.match(rest))):
            return False
        self.s.skip(nl + 1)
        return True

    def records(self) -> Iterator[RawPage | DeadPage]:
        s = self.s
        head = s.peek(16)
        self.arc = head.startswith(b"filedesc://")
        after_record = False
        while True:
            self._skip_blank()
            if s.at_end():
                return
            if after_record:
                after_record = False
                head = s.peek(_PEEK_BYTES)
                is_header = head.startswith(b"WARC/") or (self.arc and _ARC_LINE.match(head))
                if not is_header and self._stray_line(head):
                    self._skip_blank()
            offset = s.record_offset()
            own_member = s.gz and offset == s.member_offset
            source = f"{self.name}@{offset}"
            head = s.peek(_PEEK_BYTES)
            if head.startswith(b"WARC/"):
                s.readline(MAX_HEADER_BYTES)
                out = self._warc(source, offset, own_member)
            elif self.arc and _ARC_LINE.match(head):
                out = self._arc(s.readline(MAX_HEADER_BYTES), source, offset, own_member)
            else:
                out = self._garbage(head, source)
            after_record = not isinstance(out, DeadPage) or out.reason != "bad_record"
            if out is not None:
                yield out

    # -- resynchronising ---------------------------------------------------------------

    def _garbage(self, head: bytes, source: str) -> DeadPage:
        """A record that does not start with a header: skipped to the next header."""
        start = self.s.pos
        self._resync()
        what = "an ARC" if self.arc else "a WARC"
        return DeadPage(
            "", "", "bad_record",
            f"not {what} record header ({head[:40]!r}); {self.s.pos - start:,} bytes skipped to the next record",
            source,
        )

    def _resync(self, back_to: int | None = None) -> None:
        """Go to the next record header: from `back_to` (the start of a record's block, when the
        record lied about its length and the input can go back there), else from here."""
        s = self.s
        if back_to is not None and not s.seek(back_to):
            return  # a pipe: what the record swallowed is lost
        s.find(_ARC_START if self.arc else _WARC_START, _RESYNC_BYTES)

    # -- WARC ------------------------------------------------------------------------

    def _headers(self) -> dict[str, str] | None:
        """Header lines up to the blank line (continuation lines joined); None when over MAX_HEADER_BYTES."""
        s = self.s
        headers: dict[str, str] = {}
        last = ""
        total = 0
        while True:
            line = s.readline(MAX_HEADER_BYTES)
            total += len(line)
            if total > MAX_HEADER_BYTES or not line.endswith(b"\n"):
                return None
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if not text:
                return headers
            if text[0] in " \t" and last:
                headers[last] += " " + text.strip()
                continue
            key, sep, value = text.partition(":")
            if not sep:
                return None
            last = key.strip().lower()
            headers.setdefault(last, value.strip())

    def _warc(self, source: str, offset: int, own_member: bool) -> RawPage | DeadPage | None:
        headers = self._headers()
        if headers is None:
            return self._garbage(b"WARC/... (a header block too long or malformed)", source)
        url = headers.get("warc-target-uri", "").strip().strip("<>")
        try:
            declared = int(headers.get("content-length", ""))
            if declared < 0:
                raise ValueError
        except ValueError:
            self._resync()
            return DeadPage(url, host_of(url), "bad_record", "the WARC record has no valid Content-Length", source)
        rtype = headers.get("warc-type", "").strip().lower()
        block_type = headers.get("content-type", "")
        if rtype == "response" and media_type(block_type) == "application/http":
            is_http = True
        elif rtype == "resource" and media_type(block_type) in HTML_TYPES:
            is_http = False
        else:
            self._pass(declared, own_member)
            return None
        meta: dict[str, Any] = {"warc_file": self.name, "warc_offset": offset}
        if headers.get("warc-record-id"):
            meta["warc_record_id"] = headers["warc-record-id"]
        if url:
            meta["warc_target_uri"] = url
        date = _iso_warc_date(headers.get("warc-date", ""))
        if date:
            meta["date"] = date
        return self._page(url, declared, own_member, is_http, None if is_http else block_type, meta, source)

    def _pass(self, declared: int, own_member: bool) -> None:
        """Skip a record that is not a page; resynchronise when it runs past its member or the file."""
        start = self.s.pos
        if self.s.skip(declared, in_member=own_member) < declared:
            self._after_short(start, own_member)

    def _after_short(self, start: int, own_member: bool) -> None:
        """After a record shorter than it declares: the next record is the next gzip member
        (where the stream stopped) or, in a plain file, the next header after the block's `start`."""
        if not own_member:
            self._resync(start)

    # -- ARC -------------------------------------------------------------------------

    def _arc(self, line: bytes, source: str, offset: int, own_member: bool) -> RawPage | DeadPage | None:
        fields = line.decode("utf-8", "replace").split()
        url = fields[0]
        try:
            declared = int(fields[-1])
            if declared < 0 or len(fields) not in (5, 10):
                raise ValueError
        except ValueError:
            self._resync()
            return DeadPage(url, host_of(url), "bad_record", f"not an ARC record header: {line[:80]!r}", source)
        if not url.startswith(("http://", "https://")):
            self._pass(declared, own_member)  # filedesc:// (the file's own record), dns:, ...
            return None
        meta: dict[str, Any] = {"warc_file": self.name, "warc_offset": offset, "warc_target_uri": url}
        date = _iso_arc_date(fields[2])
        if date:
            meta["date"] = date
        return self._page(url, declared, own_member, True, None, meta, source)

    # -- a page's block ------------------------------------------------------------------

    def _page(
        self,
        url: str,
        declared: int,
        own_member: bool,
        is_http: bool,
        content_type: str | None,
        meta: dict[str, Any],
        source: str,
    ) -> RawPage | DeadPage | None:
        s = self.s
        start = s.pos
        want = min(declared, self.max_page_bytes + (MAX_HEADER_BYTES if is_http else 0))
        block = s.read(min(want, MAX_HEADER_BYTES), in_member=own_member)
        # An HTTP response that is plainly not a page (an image, a redirect) is skipped
        # without reading its body into memory.
        head = _http_head(block) if is_http else None
        skip_body = head is not None and not _maybe_page(head)
        if not skip_body and len(block) < want and len(block) == min(want, MAX_HEADER_BYTES):
            block += s.read(want - len(block), in_member=own_member)
        present = len(block)
        rest = declared - present
        if rest > 0 and (skip_body or present == want):
            present += s.skip(rest, in_member=own_member)
        truncated = present < declared
        if truncated:
            self._after_short(start, own_member)
        if skip_body:
            return None
        encodings: list[str] = []
        transfer = ""
        body_start = 0
        if is_http:
            parsed = _http_head(block)
            if parsed is None:
                if truncated:
                    return None if not block else self._dead(url, "truncated", _short(present, declared), source)
                return self._dead(url, "bad_record", "the HTTP headers of the record are malformed", source)
            status, http, body_start = parsed
            if not 200 <= status < 300:
                return None  # redirects and errors are not pages of the site
            content_type = http.get("content-type")
            if http.get("last-modified"):
                modified = _iso_http_date(http["last-modified"])
                if modified:
                    meta["last_modified"] = modified
            if "date" not in meta and http.get("date"):
                when = _iso_http_date(http["date"])
                if when:
                    meta["date"] = when
            if http.get("content-language"):
                meta["content_language"] = http["content-language"].split(",")[0].strip()
            encodings = [e.strip().lower() for e in http.get("content-encoding", "").split(",") if e.strip()]
            transfer = http.get("transfer-encoding", "").lower()
        if content_type and media_type(content_type) not in HTML_TYPES:
            return None
        if truncated:
            return self._dead(url, "truncated", _short(present, declared), source)
        body_bytes = declared - body_start
        if body_bytes > self.max_page_bytes and not encodings and "chunked" not in transfer:
            return self._dead(
                url, "too_large",
                f"the body has {body_bytes:,} bytes, over the page limit of {self.max_page_bytes:,}; not read", source,
            )
        if len(block) < declared:
            # Over the limit even with its chunk framing: no body this long can be a page.
            return self._dead(
                url, "too_large",
                f"the record holds {declared:,} bytes, over the page limit of {self.max_page_bytes:,}; not read",
                source,
            )
        body = block[body_start:]
        if "chunked" in transfer:
            body = dechunk(body)
        stored = body
        try:
            for coding in reversed(encodings):
                if coding != "identity":
                    body = inflate(body, coding, self.max_page_bytes)
        except TooLarge:
            return self._dead(
                url, "too_large",
                f"the body inflates ({'+'.join(encodings)}) past the page limit of {self.max_page_bytes:,} bytes; "
                "inflated no further",
                source,
            )
        except ValueError:
            body = stored  # not encoded as the header says: the crawler stored it decoded
        if len(body) > self.max_page_bytes:
            return self._dead(
                url, "too_large", f"the body has {len(body):,} bytes, over the page limit of {self.max_page_bytes:,}",
                source,
            )
        try:
            host = check_page_url(url)
        except UrlError as exc:
            return DeadPage(url[:MAX_URL_CHARS], "", exc.reason, exc.detail, source)
        text = decode_html(body, charset_of(content_type))
        if text is None:
            return DeadPage(url, host, "undecodable", "the bytes are not text in any charset they declare", source)
        return RawPage(url, text, host, source, meta)

    def _dead(self, url: str, reason: str, detail: str, source: str) -> DeadPage:
        return DeadPage(url, host_of(url), reason, detail, source)


def _maybe_page(head: tuple[int, dict[str, str], int]) -> bool:
    """Whether an HTTP response head may be a page's: a 2xx status and an HTML content type (or none)."""
    status, headers, _ = head
    content_type = headers.get("content-type")
    return 200 <= status < 300 and (not content_type or media_type(content_type) in HTML_TYPES)


def _short(present: int, declared: int) -> str:
    return f"the record holds {present:,} of the {declared:,} bytes it declares"


def _http_head(block: bytes) -> tuple[int, dict[str, str], int] | None:
    """(status, headers with lower-case names, where the body starts) of an HTTP response block."""
    end = block.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES)
    sep = 4
    lf = block.find(b"\n\n", 0, MAX_HEADER_BYTES)
    if lf >= 0 and (end < 0 or lf < end):
        end, sep = lf, 2
    if end < 0:
        if len(block) < MAX_HEADER_BYTES and block.startswith(b"HTTP/"):
            end, sep = len(block), 0  # headers without a body
        else:
            return None
    lines = block[:end].decode("latin-1").splitlines()
    # Read as leniently as warcio reads it: any protocol word, then a three-digit status.
    m = re.match(r"\S+\s+(\d{3})(?:\s|$)", lines[0]) if lines else None
    if m is None:
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        key, colon, value = line.partition(":")
        if colon:
            headers.setdefault(key.strip().lower(), value.strip())
    return int(m.group(1)), headers, end + sep


def dechunk(body: bytes) -> bytes:
    """The body without its chunk framing when it is chunked; else the body as it is.

    Chunked means: the body begins with a chunk-size line (hex, optional extensions) and
    the first chunk ends with a line break where its size says (or at the body's end).
    A later chunk that breaks off ends the body there (the connection was cut).
    """
    parts: list[bytes] = []
    pos = 0
    n = len(body)
    while pos < n:
        nl = body.find(b"\n", pos, pos + 1024)
        size_text = body[pos:nl].split(b";", 1)[0].strip() if nl >= 0 else b""
        if nl < 0 or not _HEX.fullmatch(size_text):
            if not parts and pos == 0:
                return body
            break
        size = int(size_text, 16)
        if size == 0:
            break
        data_start = nl + 1
        data_end = data_start + size
        if not parts and (data_end > n or (data_end < n and body[data_end : data_end + 1] not in (b"\r", b"\n"))):
            return body  # a first "chunk" longer than the body, or not followed by a line break: not chunked
        parts.append(body[data_start:data_end])
        pos = data_end
        if body.startswith(b"\r\n", pos):
            pos += 2
        elif body.startswith(b"\n", pos):
            pos += 1
    return b"".join(parts)


def _iso(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _iso_warc_date(text: str) -> str | None:
    """A WARC-Date (W3C date-time) as ISO 8601 UTC; None when it is not one."""
    text = text.strip()
    try:
        return _iso(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def _iso_arc_date(text: str) -> str | None:
    try:
        return _iso(datetime.strptime(text, "%Y%m%d%H%M%S"))
    except ValueError:
        return None


def _iso_http_date(text: str) -> str | None:
    try:
        return _iso(parsedate_to_datetime(text))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
