"""WARC and ARC files that the tests build byte by byte: well-formed, broken and hostile."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from detemplate.io.urls import host_of


def http_response(
    body: bytes, content_type: str | None = "text/html; charset=utf-8", status: int = 200, extra_http: str = ""
) -> bytes:
    """An HTTP response block: status line, headers (Content-Length of `body` unless given in extra_http), body."""
    head = f"HTTP/1.1 {status} X\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    if "content-length" not in extra_http.lower() and "transfer-encoding" not in extra_http.lower():
        head += f"Content-Length: {len(body)}\r\n"
    return (head + extra_http + "\r\n").encode("latin-1") + body


def warc_record(
    url: str,
    body: bytes,
    content_type: str | None = "text/html; charset=utf-8",
    status: int = 200,
    warc_type: str = "response",
    extra_http: str = "",
    record_id: str | None = None,
    declared: int | None = None,
    date: str = "2024-01-01T00:00:00Z",
    block: bytes | None = None,
) -> bytes:
    """One WARC/1.0 record: text headers, CRLF, the block, CRLF CRLF. `declared` overrides its Content-Length."""
    if block is None:
        if warc_type == "response":
            block = http_response(body, content_type, status, extra_http)
        elif warc_type == "request":
            block = f"GET / HTTP/1.1\r\nHost: {host_of(url)}\r\n\r\n".encode()
        else:  # resource, warcinfo, metadata: the block is the body itself
            block = body
    if warc_type in ("response", "request"):
        block_type = f"application/http; msgtype={warc_type}"
    else:
        block_type = content_type or "application/octet-stream"
    rid = record_id or f"<urn:uuid:00000000-0000-0000-0000-{abs(hash((url, warc_type))) % 10**12:012d}>"
    headers = (
        "WARC/1.0\r\n"
        f"WARC-Type: {warc_type}\r\n"
        f"WARC-Target-URI: {url}\r\n"
        f"WARC-Date: {date}\r\n"
        f"WARC-Record-ID: {rid}\r\n"
        f"Content-Type: {block_type}\r\n"
        f"Content-Length: {len(block) if declared is None else declared}\r\n\r\n"
    )
    return headers.encode("utf-8") + block + b"\r\n\r\n"


def write_warc(path: Path, records: list[bytes], gz: str | bool = False) -> Path:
    """A WARC file: plain, one gzip member a record (gz=True or "record", as crawlers write it) or
    one member for the whole file (gz="file")."""
    if gz == "file":
        path.write_bytes(gzip.compress(b"".join(records)))
    elif gz:
        path.write_bytes(b"".join(gzip.compress(r) for r in records))
    else:
        path.write_bytes(b"".join(records))
    return path


def arc_file(records: list[tuple[str, bytes]], date: str = "20240102030405") -> bytes:
    """An ARC v1 file: its filedesc record, then one record a (url, HTTP response block)."""
    desc = b"1 0 Test\nURL IP-address Archive-date Content-type Archive-length\n"
    out = [f"filedesc://test.arc 0.0.0.0 {date} text/plain {len(desc)}\n".encode() + desc + b"\n"]
    for url, block in records:
        out.append(f"{url} 192.0.2.1 {date} text/html {len(block)}\n".encode() + block + b"\n")
    return b"".join(out)


def chunked(body: bytes, size: int = 7) -> bytes:
    """`body` in HTTP/1.1 chunked framing."""
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    parts = [f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in pieces]
    return b"".join(parts) + b"0\r\n\r\n"


def deflate(data: bytes, raw: bool = False) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15 if raw else 15)
    return c.compress(data) + c.flush()


def gzip_stream(
    total: int, fill: bytes = b"\x00", prefix: bytes = b"", suffix: bytes = b"", level: int = 9, wbits: int = 31
) -> bytes:
    """One gzip member (zlib with wbits=15) whose data is `prefix`, `total` bytes of `fill`, `suffix`:
    a bomb of any size, compressed piece by piece (never held whole)."""
    c = zlib.compressobj(level, zlib.DEFLATED, wbits)
    out = [c.compress(prefix)]
    piece = fill * ((1 << 20) // len(fill))
    left = total
    while left > 0:
        take = piece[: min(left, len(piece))]
        out.append(c.compress(take))
        left -= len(take)
    out.append(c.compress(suffix))
    out.append(c.flush())
    return b"".join(out)
