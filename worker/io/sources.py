"""Every input `detemplate run` and `detemplate produce` read, as one stream of pages.

`iter_inputs(paths)` yields a `RawPage` for each page and a `DeadPage` for each bad
record, in input order: the paths in the order given, each file front to back, each
folder walked recursively (a folder's files in sorted name order, then its subfolders
in sorted name order; names starting with "." are skipped). ``-`` is standard input
(JSONL, WARC or ARC, plain or gzip, told apart by its first bytes).

Inputs, recognised by file name, else by their first bytes:

- JSONL (``.jsonl``, ``.ndjson``, ``.json``, optionally ``.gz``): one page per line,
  ``{"url", "host"?, "html"}``, or ``"body_b64"`` (+ optional ``"content_type"``) in
  place of ``"html"`` for pages kept as raw bytes. Blank lines are skipped.
- WARC and ARC (``.warc``, ``.arc``, optionally ``.gz``): HTML pages of ``response`` and
  ``resource`` records (archive.py says which, and how bodies are read).
- A folder of ``.html`` / ``.htm`` files, or one such file. URL = the file's
  ``file://`` URI. Host = the name of the folder given on the command line (for a
  single file: its parent folder's name), lower-cased. One rule for every file: a
  host read from each page (``<link rel=canonical>``, ``<base href>``) would split a
  site whose pages disagree, or lack the tag, into several tables, and would cost a
  parse here. To run several sites, give one folder per site.

URLs and hosts are checked and hosts normalised as urls.py says (``bad_url``,
``bad_host``). Bytes are decoded by the WHATWG rules (charsets.py).

Reading is bounded whatever the input (stream.py): nothing holds more of a file than a
page's limit (`max_page_bytes`, the engine's ``segment.max_page_bytes``) plus a few
pieces of CHUNK_BYTES. A JSONL line over MAX_LINE_FACTOR times that limit is a
``too_large`` dead letter, skipped unread; so is a WARC body or HTTP content coding
that inflates past it.

Bad records give a DeadPage with ``source`` = ``path:line`` (JSONL) or ``path@offset``
(WARC, ARC), and reading goes on. Reasons: ``bad_json`` (not JSON), ``bad_record``
(missing or mistyped fields, bad base64, a WARC record that is not one), ``bad_url``
and ``bad_host``, ``undecodable`` (not text in any charset), ``not_html`` (a JSONL body
whose content type is not HTML), ``too_large``, ``truncated`` (a WARC record shorter
than it declares) and ``unreadable_input`` (a compressed file that breaks off or turns
to garbage: the rest of that file is lost, the next input follows). A path that is
missing, unreadable or of an unknown type raises ConfigError when `iter_inputs` is
called, before any page is read.

`iter_inputs(paths, undecoded=True)` (what `run --jobs N` reads with) leaves a JSONL line
whose first fields are its "url" and "host" undecoded: an `Undecoded` with the host they
name, for the job that decides the host to decode (`decode_record`) in its own process.
`decode_record` makes sure the host a line is routed by is the decoded record's: a record
that names "url" or "host" again, differently, is a ``bad_record``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, overload

from ..engine.errors import ConfigError
from ..engine.model import DeadPage, RawPage
from ..engine.params import SegmentParams
from . import codec
from .archive import HTML_TYPES, iter_archive, media_type
from .charsets import charset_of, decode_html
from .stream import GZIP_MAGIC, Stream, StreamError, iter_lines
from .urls import MAX_URL_CHARS, UrlError, check_page_url, host_of

__all__ = [
    "Undecoded", "charset_of", "decode_html", "decode_record", "estimate_total", "host_of", "input_kind", "iter_inputs",
]

STDIN = "-"
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_WARC_SUFFIXES = (".warc", ".arc")
_HTML_SUFFIXES = (".html", ".htm")
logger = logging.getLogger(__name__)

_COUNT_BYTES = 64 << 20  # estimate_total reads at most this much of a plain JSONL file
DEFAULT_MAX_PAGE_BYTES = SegmentParams().max_page_bytes
# A JSONL line carries a page JSON-escaped: up to 6 bytes a character for text escaped as
# \uXXXX (json.dumps' default), 4/3 a byte for body_b64. A longer line cannot hold a page
# within the limit; it is skipped unread.
MAX_LINE_FACTOR = 6
_LINE_SLACK = 1 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")
# A record that starts with its "url" and "host" string fields (what crawlers and
# `detemplate produce` write): read without decoding the rest of the line. A JSON string
# as an unrolled loop (runs of plain bytes between escapes): a fifth of the time of one
# alternation a byte, on every record decode_record reads.
_JSON_STRING = rb'("[^"\\]*(?:\\.[^"\\]*)*")'
_FIRST_FIELDS = re.compile(rb'\s*\{\s*"url"\s*:\s*' + _JSON_STRING + rb'\s*,\s*"host"\s*:\s*' + _JSON_STRING)


class Undecoded(NamedTuple):
    """A JSONL line left undecoded (`iter_inputs(..., undecoded=True)`), with the host its
    record's page has when the line decodes to a page (`decode_record`). In a job of `run
    --jobs`, `line` is a view of the job's receive buffer (parallel.py `_get`)."""

    line: bytes | memoryview
    source: str
    host: str


# -- the iterator ----------------------------------------------------------------------


@overload
def iter_inputs(
    paths: Sequence[str | Path],
    max_page_bytes: int = ...,
    stdin: IO[bytes] | None = ...,
    undecoded: Literal[False] = ...,
) -> Iterator[RawPage | DeadPage]: ...


@overload
def iter_inputs(
    paths: Sequence[str | Path], max_page_bytes: int = ..., stdin: IO[bytes] | None = ..., *, undecoded: Literal[True]
) -> Iterator[RawPage | DeadPage | Undecoded]: ...


def iter_inputs(
    paths: Sequence[str | Path],
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    stdin: IO[bytes] | None = None,
    undecoded: bool = False,
) -> Iterator[RawPage | DeadPage] | Iterator[RawPage | DeadPage | Undecoded]:
    """Every page of every input, in input order (see the module docstring); with `undecoded`,
    a JSONL line that starts with its "url" and "host" as an `Undecoded`.

    Every path is checked here, before the first page is read: a missing, unreadable or
    unknown input raises ConfigError at the call, not after a run has written output.
    ``-`` reads `stdin` (standard input's bytes when None), once.
    """
    if sum(1 for raw in paths if str(raw) == STDIN) > 1:
        raise ConfigError("standard input (-) can be read only once")
    kinds = [(Path(raw), STDIN if str(raw) == STDIN else input_kind(Path(raw))) for raw in paths]
    return _iter_checked(kinds, max_page_bytes, stdin, undecoded)


def _iter_checked(
    kinds: list[tuple[Path, str]], max_page_bytes: int, stdin: IO[bytes] | None, undecoded: bool
) -> Iterator[RawPage | DeadPage | Undecoded]:
    for path, kind in kinds:
        if kind == "dir":
            yield from _iter_dir(path, max_page_bytes)
        elif kind == "html":
            yield _html_file(path, path.resolve().parent.name.lower(), max_page_bytes)
        elif kind == STDIN:
            stream = stdin if stdin is not None else sys.stdin.buffer
            yield from _iter_stream(stream, "<stdin>", max_page_bytes, None, undecoded)
        else:
            with open(path, "rb") as fh:
                yield from _iter_stream(fh, str(path), max_page_bytes, kind, undecoded)


def _iter_stream(
    fh: IO[bytes], name: str, max_page_bytes: int, kind: str | None = None, undecoded: bool = False
) -> Iterator[RawPage | DeadPage | Undecoded]:
    """A JSONL, WARC or ARC file (plain or gzip) read through a bounded Stream; `kind` sniffed when None."""
    try:
        stream = Stream(fh, _peek(fh, 2) == GZIP_MAGIC)
        if kind is None:
            if stream.at_end():
                return  # (empty standard input: no page, as an empty file)
            kind = _kind_of(stream.peek(64))
            if kind is None:
                yield DeadPage(
                    "", "", "unreadable_input", "standard input is neither JSONL nor WARC nor ARC", f"{name}@0"
                )
                return
        if kind == "jsonl":
            yield from _iter_jsonl(stream, name, max_page_bytes, undecoded)
        else:
            yield from iter_archive(stream, name, max_page_bytes)
    except (StreamError, OSError) as exc:
        yield DeadPage("", "", "unreadable_input", f"the file cannot be read: {exc}", f"{name}@0")


def _peek(fh: IO[bytes], n: int) -> bytes:
    """The first `n` bytes of a file or pipe, left unread."""
    peek = getattr(fh, "peek", None)
    if peek is not None:
        return bytes(peek(n)[:n])
    here = fh.tell()
    head = fh.read(n)
    fh.seek(here)
    return head


def _kind_of(head: bytes) -> str | None:
    head = head.lstrip()
    if head.startswith((b"WARC/", b"filedesc://")):
        return "warc"
    if head.startswith(b"{"):
        return "jsonl"
    return None


def _typed_suffix(name: str, suffixes: tuple[str, ...]) -> str:
    """The end of a file name that gives its type, one of `suffixes` (any case) with ".gz"
    after it or not, as the name spells it ("" when none does)."""
    lowered = name.lower()
    gz = 3 if lowered.endswith(".gz") else 0
    for suffix in suffixes:
        if lowered[: len(lowered) - gz].endswith(suffix):
            return name[len(name) - len(suffix) - gz :]
    return ""


def input_kind(path: Path) -> str:
    """``dir``, ``html``, ``jsonl`` or ``warc`` (WARC or ARC); ConfigError for anything else."""
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise ConfigError(f"cannot read folder {path}: permission denied")
        return "dir"
    if not path.exists():
        raise ConfigError(f"input {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"input {path} is not a file or folder")
    name = path.name
    if _typed_suffix(name, _JSONL_SUFFIXES):
        kind = "jsonl"
    elif _typed_suffix(name, _WARC_SUFFIXES):
        kind = "warc"
    elif _typed_suffix(name, _HTML_SUFFIXES):
        kind = "html"
    else:
        kind = _sniff(path)
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise ConfigError(f"cannot read input {path}: {exc.strerror or exc}") from exc
    return kind


def _sniff(path: Path) -> str:
    """Recognise a file with an unknown name by its first bytes."""
    try:
        with open(path, "rb") as fh:
            kind = _kind_of(Stream(fh, _peek(fh, 2) == GZIP_MAGIC).peek(64))
    except (OSError, StreamError) as exc:
        raise ConfigError(f"cannot read input {path}: {exc}") from exc
    if kind is None:
        raise ConfigError(
            f"input {path}: unknown file type (expected .jsonl[.gz], .warc[.gz], .arc[.gz], .html or a folder of "
            ".html files)"
        )
    return kind


def estimate_total(paths: Sequence[str | Path]) -> int | None:
    """Cheap page count for a progress bar; None when some input cannot be counted cheaply.

    Folders count their HTML files, plain JSONL its lines; compressed streams and WARC
    files are not counted (that would mean reading them twice).
    """
    total = 0
    for raw in paths:
        path = Path(raw)
        kind = input_kind(path)
        if kind == "dir":
            total += sum(1 for _ in html_files(path))
        elif kind == "html":
            total += 1
        elif kind == "jsonl" and not _is_gzip(path):
            total += _count_lines(path)
        else:
            return None
    return total


def _count_lines(path: Path) -> int:
    """Lines of a plain JSONL file: counted up to _COUNT_BYTES, extrapolated beyond."""
    size = path.stat().st_size
    lines = 0
    read = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while read < _COUNT_BYTES and (chunk := fh.read(1 << 20)):
            lines += chunk.count(b"\n")
            read += len(chunk)
            last = chunk[-1:]
    if read >= size:
        return lines + (last != b"\n")
    return round(lines * size / read) if lines else 1


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


# -- folders of HTML ---------------------------------------------------------------------


def _visible_files(root: Path) -> Iterator[Path]:
    """A folder's files, hidden ones and hidden folders left out, sorted folder by folder."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(dirpath)
        for name in sorted(filenames):
            if not name.startswith("."):
                yield base / name


def html_files(root: Path) -> Iterator[Path]:
    """The files a folder input is read for (.html and .htm), in the order they are read."""
    return (path for path in _visible_files(root) if path.name.lower().endswith(_HTML_SUFFIXES))


def _iter_dir(root: Path, max_page_bytes: int) -> Iterator[RawPage | DeadPage]:
    host = root.resolve().name.lower()
    found = False
    for path in html_files(root):
        found = True
        yield _html_file(path, host, max_page_bytes)
    if not found:
        _warn_no_html(root)


def _warn_no_html(root: Path) -> None:
    """A folder input without HTML files: say so, and name the crawl files it holds, which
    are read when given as inputs themselves (a folder is read for its HTML files only)."""
    crawls: list[tuple[Path, str]] = []  # (path, its type's suffix)
    for path in _visible_files(root):
        if suffix := _typed_suffix(path.name, _JSONL_SUFFIXES + _WARC_SUFFIXES):
            crawls.append((path, suffix))
    if not crawls:
        logger.warning("folder %s holds no .html or .htm files: no pages read from it", root)
        return
    first, suffix = crawls[0]
    pattern = first.parent / ("*" + suffix)
    logger.warning(
        "folder %s holds no .html or .htm files, but %d WARC or JSONL file(s), such as %s: a folder is read "
        "for its HTML files; give those files as inputs themselves (for example %s)",
        root, len(crawls), first, pattern,
    )


def _html_file(path: Path, host: str, max_page_bytes: int) -> RawPage | DeadPage:
    url = path.resolve().as_uri()
    source = str(path)
    try:
        size = path.stat().st_size
        if size > max_page_bytes:
            return DeadPage(
                url, host, "too_large", f"the file has {size:,} bytes, over the page limit of {max_page_bytes:,}",
                source,
            )
        data = path.read_bytes()
    except OSError as exc:
        return DeadPage(url, host, "unreadable_input", f"cannot read the file: {exc.strerror or exc}", source)
    html = decode_html(data)
    if html is None:
        return DeadPage(url, host, "undecodable", "the bytes are not text in any charset", source)
    return RawPage(url, html, host, source)


# -- JSONL -------------------------------------------------------------------------------


def _iter_jsonl(
    stream: Stream, name: str, max_page_bytes: int, undecoded: bool = False
) -> Iterator[RawPage | DeadPage | Undecoded]:
    max_line = MAX_LINE_FACTOR * max_page_bytes + _LINE_SLACK
    line_no = 0
    try:
        for line_no, line in iter_lines(stream.chunks(), max_line):
            if isinstance(line, int):
                yield DeadPage(
                    "", "", "too_large",
                    f"the line has {line:,} bytes, over the limit of {max_line:,} for a page of at most "
                    f"{max_page_bytes:,} bytes; skipped unread",
                    f"{name}:{line_no}",
                )
            elif undecoded and (host := route_host(line)) is not None:
                yield Undecoded(line, f"{name}:{line_no}", host)
            else:
                yield decode_record(line, f"{name}:{line_no}")
    except StreamError as exc:
        # A truncated or corrupt file: report where it broke off, then go on with the next input.
        yield DeadPage(
            "", "", "unreadable_input", f"the file breaks off after line {line_no}: {exc}", f"{name}:{line_no + 1}"
        )


RAW_SCHEMA_VERSION = 1  # schemas/raw-page.v1.json: "v" absent, null or 1
# Raw-record fields passed through to the clean page (RawPage.meta), with their types.
META_FIELDS: dict[str, type] = {
    "date": str,
    "last_modified": str,
    "content_language": str,
    "warc_file": str,
    "warc_offset": int,
    "warc_record_id": str,
    "warc_target_uri": str,
}


def first_fields(line: bytes | memoryview) -> tuple[Any, Any] | None:
    """The "url" and "host" a JSON record starts with (the first two fields, in that order),
    decoded; None for a record that starts otherwise."""
    match = _FIRST_FIELDS.match(line)
    if match is None:
        return None
    try:
        return codec.loads(match[1])[0], codec.loads(match[2])[0]
    except (ValueError, RecursionError):
        return None


def route_host(line: bytes) -> str | None:
    """The host of the page a JSONL line holds, read from its first fields without decoding
    the rest; None when it does not start with them, or they are no page's URL and host."""
    first = first_fields(line)
    if first is None:
        return None
    try:
        return check_page_url(first[0], first[1])
    except UrlError:
        return None


def decode_record(line: bytes | memoryview, source: str) -> RawPage | DeadPage:
    """One raw-page JSON record (a JSONL line or a pages.raw message) -> RawPage or DeadPage."""
    try:
        rec, unicode_checked = codec.loads(line)
    except (ValueError, RecursionError) as exc:
        return DeadPage("", "", "bad_json", f"the line is not valid JSON: {exc}", source)
    if not isinstance(rec, dict):
        return DeadPage("", "", "bad_record", f"the line is a JSON {type(rec).__name__}, not an object", source)
    url = rec.get("url")
    shown = _clean_text(url) if isinstance(url, str) else ""
    version = rec.get("v")
    if version is not None and (isinstance(version, bool) or version != RAW_SCHEMA_VERSION):
        # Checked first: a record of another version may name its fields differently.
        return DeadPage(
            shown,
            "",
            "unsupported_version",
            f'the record is schema version {_clean_text(json.dumps(version)[:40])}; this version of detemplate '
            f'reads {RAW_SCHEMA_VERSION} (or no "v")',
            source,
        )
    if not isinstance(url, str) or not url:
        return DeadPage("", "", "bad_record", 'the record has no "url" string', source)
    host = rec.get("host")
    if host is not None and (not isinstance(host, str) or not host.strip()):
        return DeadPage(shown, "", "bad_record", '"host" must be a non-empty string', source)
    first = first_fields(line)
    if first is not None and (first[0] != url or first[1] != host):
        # JSON leaves a repeated name to the reader; here the first one would route the page
        # to one job of `run --jobs` and the last one would name its host.
        return DeadPage(shown, "", "bad_record", 'the record names "url" or "host" twice, differently', source)
    try:
        host = check_page_url(url, host)
    except UrlError as exc:
        # A URL over the limit is cut in its dead letter (a 20 MB URL would make a 20 MB letter).
        return DeadPage(shown[:MAX_URL_CHARS], "", exc.reason, exc.detail, source)
    meta = _meta(rec)
    html = rec.get("html")
    if isinstance(html, str):
        if not unicode_checked and not html.isascii() and _SURROGATE.search(html):
            # What a browser makes of a string with lone surrogates: U+FFFD each (no UTF-8 holds one).
            html = _SURROGATE.sub("\ufffd", html)
        return RawPage(url, html, host, source, meta)
    if html is not None:
        return DeadPage(url, host, "bad_record", f'"html" must be a string, not {type(html).__name__}', source)
    body = rec.get("body_b64")
    if body is None:
        return DeadPage(url, host, "bad_record", 'the record has neither "html" nor "body_b64"', source)
    content_type = rec.get("content_type")
    if not isinstance(body, str) or not (content_type is None or isinstance(content_type, str)):
        return DeadPage(url, host, "bad_record", '"body_b64" and "content_type" must be strings', source)
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        return DeadPage(url, host, "bad_record", f'"body_b64" is not valid base64: {exc}', source)
    if content_type and media_type(content_type) not in HTML_TYPES:
        return DeadPage(url, host, "not_html", f"the content type is {_clean_text(content_type)!r}, not HTML", source)
    text = decode_html(data, charset_of(content_type))
    if text is None:
        return DeadPage(url, host, "undecodable", "the bytes are not text in any charset", source)
    return RawPage(url, text, host, source, meta)


def _meta(rec: dict[str, Any]) -> dict[str, Any]:
    """The record's META_FIELDS of the right type (others are ignored, as unknown fields are)."""
    out: dict[str, Any] = {}
    for key, kind in META_FIELDS.items():
        value = rec.get(key)
        if isinstance(value, kind) and not isinstance(value, bool):
            out[key] = _clean_text(value) if isinstance(value, str) else value
    return out


def _clean_text(text: str) -> str:
    """`text` with any lone surrogate replaced by U+FFFD (so every output can be encoded)."""
    return _SURROGATE.sub("\ufffd", text) if not text.isascii() else text
