"""Every input `detemplate run` and `detemplate produce` read, as one stream of pages.

`iter_inputs(paths)` yields a `RawPage` for each page and a `DeadPage` for each bad
record, in input order: the paths in the order given, each file front to back, each
folder walked recursively (a folder's files in sorted name order, then its subfolders
in sorted name order; names starting with "." are skipped).

Inputs, recognised by file name, else by their first bytes:

- JSONL (``.jsonl``, ``.ndjson``, ``.json``, optionally ``.gz``): one page per line,
  ``{"url", "host"?, "html"}``, or ``"body_b64"`` (+ optional ``"content_type"``) in
  place of ``"html"`` for pages kept as raw bytes. Blank lines are skipped.
- WARC (``.warc``, ``.warc.gz``, via fastwarc): ``response`` records with a 2xx HTTP
  status and an HTML content type (or none), and ``resource`` records with an HTML
  content type. Other records (requests, metadata, images, redirects) are not pages
  and are skipped silently.
- A folder of ``.html`` / ``.htm`` files, or one such file. URL = the file's
  ``file://`` URI. Host = the name of the folder given on the command line (for a
  single file: its parent folder's name), lower-cased. One rule for every file: a
  host read from each page (``<link rel=canonical>``, ``<base href>``) would split a
  site whose pages disagree, or lack the tag, into several tables, and would cost a
  parse here. To run several sites, give one folder per site.

Host, when a JSONL record has none, is the URL's host name: lower-cased, without port
or userinfo. A given host is only lower-cased and stripped.

Bytes are decoded in this order, the first that decodes strictly wins: byte order
mark (it overrides every declaration, as in the WHATWG encoding standard), the HTTP
``Content-Type`` charset, a ``<meta charset>`` / ``http-equiv`` charset in the first
2 KB, UTF-8, then cp1252. Bytes none of these decode give a DeadPage ``undecodable``.

Bad records give a DeadPage with ``source`` = ``path:line`` (JSONL) or ``path@offset``
(WARC), and reading goes on. Reasons: ``bad_json`` (not JSON), ``bad_record`` (missing
or mistyped fields, no host, bad base64, malformed HTTP headers), ``undecodable`` (no
charset fits), ``not_html`` (a JSONL body whose content type is not HTML),
``truncated`` (a WARC record shorter than it declares: the file was cut), and
``unreadable_input`` (a compressed or WARC file that breaks off or turns to garbage:
the rest of that file is lost, the next input follows). A path that is missing,
unreadable or of an unknown type raises ConfigError when `iter_inputs` is called,
before any page is read.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ..engine.errors import ConfigError
from ..engine.model import DeadPage, RawPage

_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_WARC_SUFFIXES = (".warc", ".arc")
_HTML_SUFFIXES = (".html", ".htm")
_GZIP_MAGIC = b"\x1f\x8b"
_FREEZE_LIMIT = 64 << 20  # WARC records up to this size are checked for truncation
_COUNT_BYTES = 64 << 20  # estimate_total reads at most this much of a plain JSONL file
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# Labels whose WHATWG meaning differs from Python's codec of the same name: browsers
# decode pages labelled latin-1 or ascii as windows-1252, and gb2312 as gb18030.
_CHARSET_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "windows-1252": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-sjis": "shift_jis",
    "utf8": "utf-8",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)


# -- decoding ------------------------------------------------------------------------


def _codec(label: str | None) -> str | None:
    """Python codec name for a charset label, or None when Python does not know it."""
    if not label:
        return None
    label = label.strip().lower()
    label = _CHARSET_ALIASES.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def charset_of(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type value, if any."""
    if not content_type:
        return None
    m = _CT_CHARSET.search(content_type)
    return m.group(1) if m else None


def decode_html(data: bytes, http_charset: str | None = None) -> str | None:
    """Decode page bytes (BOM, HTTP charset, meta charset, UTF-8, cp1252); None if none fits."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(name)
            except UnicodeDecodeError:
                return None  # a BOM is a promise: bytes that break it are not text
    tried: set[str] = set()
    for label in (http_charset, _meta_charset(data)):
        found = _codec(label)
        if found is None or found in tried:
            continue
        # A page that states its charset in ASCII bytes is not UTF-16 (WHATWG).
        name = "utf-8" if found.startswith("utf-16") else found
        tried.add(found)
        tried.add(name)
        try:
            return data.decode(name)
        except UnicodeDecodeError:
            continue  # a wrong declaration is common: fall back to the defaults
    for name in ("utf-8", "cp1252"):
        if name not in tried:
            try:
                return data.decode(name)
            except UnicodeDecodeError:
                continue
    return None


def _meta_charset(data: bytes) -> str | None:
    m = _META_CHARSET.search(data, 0, 2048)
    return m.group(1).decode("ascii") if m else None


def host_of(url: str) -> str:
    """The URL's host name: lower-cased, without port or userinfo ("" when it has none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


# -- the iterator ----------------------------------------------------------------------


def iter_inputs(paths: Sequence[str | Path]) -> Iterator[RawPage | DeadPage]:
    """Every page of every input, in input order (see the module docstring).

    Every path is checked here, before the first page is read: a missing, unreadable or
    unknown input raises ConfigError at the call, not after a run has written output.
    """
    kinds = [(Path(raw), input_kind(Path(raw))) for raw in paths]
    return _iter_checked(kinds)


def _iter_checked(kinds: list[tuple[Path, str]]) -> Iterator[RawPage | DeadPage]:
    for path, kind in kinds:
        if kind == "dir":
            yield from _iter_dir(path)
        elif kind == "html":
            yield _html_file(path, path.resolve().parent.name.lower())
        elif kind == "jsonl":
            yield from _iter_jsonl(path)
        else:
            yield from _iter_warc(path)


def input_kind(path: Path) -> str:
    """``dir``, ``html``, ``jsonl`` or ``warc``; ConfigError for anything else."""
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise ConfigError(f"cannot read folder {path}: permission denied")
        return "dir"
    if not path.exists():
        raise ConfigError(f"input {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"input {path} is not a file or folder")
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(_JSONL_SUFFIXES):
        kind = "jsonl"
    elif name.endswith(_WARC_SUFFIXES):
        kind = "warc"
    elif name.endswith(_HTML_SUFFIXES):
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
            head = fh.read(64)
            if head.startswith(_GZIP_MAGIC):
                fh.seek(0)
                with gzip.open(fh) as gz:
                    head = gz.read(64)
    except (OSError, EOFError, zlib.error) as exc:
        raise ConfigError(f"cannot read input {path}: {exc}") from exc
    head = head.lstrip()
    if head.startswith(b"WARC/"):
        return "warc"
    if head.startswith(b"{"):
        return "jsonl"
    raise ConfigError(
        f"input {path}: unknown file type (expected .jsonl[.gz], .warc[.gz], .html or a folder of .html files)"
    )


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
            total += sum(1 for _ in _walk_html(path))
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
        return fh.read(2) == _GZIP_MAGIC


# -- folders of HTML ---------------------------------------------------------------------


def _walk_html(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(dirpath)
        for name in sorted(filenames):
            if not name.startswith(".") and name.lower().endswith(_HTML_SUFFIXES):
                yield base / name


def _iter_dir(root: Path) -> Iterator[RawPage | DeadPage]:
    host = root.resolve().name.lower()
    for path in _walk_html(root):
        yield _html_file(path, host)


def _html_file(path: Path, host: str) -> RawPage | DeadPage:
    url = path.resolve().as_uri()
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return DeadPage(url, host, "unreadable_input", f"cannot read the file: {exc.strerror or exc}", source)
    html = decode_html(data)
    if html is None:
        return DeadPage(url, host, "undecodable", "the bytes decode in no known charset", source)
    return RawPage(url, html, host, source)


# -- JSONL -------------------------------------------------------------------------------


def _iter_jsonl(path: Path) -> Iterator[RawPage | DeadPage]:
    name = str(path)
    line_no = 0
    fh = gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")  # noqa: SIM115 (closed below)
    try:
        for line_no, line in enumerate(fh, 1):
            if line.isspace():
                continue
            yield decode_record(line, f"{name}:{line_no}")
    except (OSError, EOFError, zlib.error) as exc:
        # A truncated or corrupt file: report where it broke off, then go on with the next input.
        yield DeadPage(
            "", "", "unreadable_input", f"the file breaks off after line {line_no}: {exc}", f"{name}:{line_no + 1}"
        )
    finally:
        fh.close()


RAW_SCHEMA_VERSION = 1  # schemas/raw-page.v1.json: "v" absent, null or 1


def decode_record(line: bytes, source: str) -> RawPage | DeadPage:
    """One raw-page JSON record (a JSONL line or a pages.raw message) -> RawPage or DeadPage."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return DeadPage("", "", "bad_json", f"the line is not valid JSON: {exc}", source)
    if not isinstance(rec, dict):
        return DeadPage("", "", "bad_record", f"the line is a JSON {type(rec).__name__}, not an object", source)
    version = rec.get("v")
    if version is not None and (isinstance(version, bool) or version != RAW_SCHEMA_VERSION):
        # Checked first: a record of another version may name its fields differently.
        url = rec.get("url")
        return DeadPage(
            url if isinstance(url, str) else "",
            "",
            "unsupported_version",
            f'the record is schema version {json.dumps(version)[:40]}; this version of detemplate reads '
            f'{RAW_SCHEMA_VERSION} (or no "v")',
            source,
        )
    url = rec.get("url")
    if not isinstance(url, str) or not url:
        return DeadPage("", "", "bad_record", 'the record has no "url" string', source)
    host = rec.get("host")
    if host is None:
        host = host_of(url)
        if not host:
            return DeadPage(url, "", "bad_record", 'the record has no "host" and its URL has no host name', source)
    elif not isinstance(host, str) or not host.strip():
        return DeadPage(url, "", "bad_record", '"host" must be a non-empty string', source)
    else:
        host = host.strip().lower()
    html = rec.get("html")
    if isinstance(html, str):
        return RawPage(url, html, host, source)
    if html is not None:
        return DeadPage(url, host, "bad_record", f'"html" must be a string, not {type(html).__name__}', source)
    body = rec.get("body_b64")
    if body is None:
        return DeadPage(url, host, "bad_record", 'the record has neither "html" nor "body_b64"', source)
    content_type = rec.get("content_type")
    if not isinstance(body, str) or not (content_type is None or isinstance(content_type, str)):
        return DeadPage(url, host, "bad_record", '"body_b64" and "content_type" must be strings', source)
    if content_type and _media_type(content_type) not in _HTML_TYPES:
        return DeadPage(url, host, "not_html", f"the content type is {content_type!r}, not HTML", source)
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        return DeadPage(url, host, "bad_record", f'"body_b64" is not valid base64: {exc}', source)
    text = decode_html(data, charset_of(content_type))
    if text is None:
        return DeadPage(url, host, "undecodable", "the bytes decode in no known charset", source)
    return RawPage(url, text, host, source)




def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


# -- WARC --------------------------------------------------------------------------------


def _iter_warc(path: Path) -> Iterator[RawPage | DeadPage]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    name = str(path)
    offset = 0
    with open(path, "rb") as fh:
        records = ArchiveIterator(fh, record_types=WarcRecordType.response | WarcRecordType.resource, parse_http=False)
        try:
            for record in records:
                offset = record.stream_pos
                page = _warc_record(record, f"{name}@{offset}")
                if page is not None:
                    yield page
        except OSError as exc:
            yield DeadPage(
                "", "", "unreadable_input", f"the WARC file breaks off after offset {offset}: {exc}", f"{name}@{offset}"
            )


def _warc_record(record: object, source: str) -> RawPage | DeadPage | None:
    """A page from one WARC record, or None when the record is not an HTML page."""
    from fastwarc.warc import WarcRecordType

    rec = record  # fastwarc ships no type stubs
    url = rec.headers.get("WARC-Target-URI") or ""  # type: ignore[attr-defined]
    url = url.strip().strip("<>")  # WARC 1.0 drafts wrote the URI in angle brackets
    is_response = rec.record_type == WarcRecordType.response  # type: ignore[attr-defined]
    if is_response and not rec.headers.get("Content-Type", "").lower().startswith("application/http"):  # type: ignore[attr-defined]
        return None  # a response of another protocol (dns:, ftp:)
    # A file cut off mid-record gives a short last record: a page missing its end (often
    # its footer, the template) would teach the table wrong things. freeze() reads the
    # block into memory and sets content_length to the bytes actually there; the gzip
    # decoder of parse_http would hide the loss by returning what it could inflate.
    declared = rec.content_length  # type: ignore[attr-defined]
    if declared <= _FREEZE_LIMIT:  # a huge video record is not held in memory to check it
        rec.freeze()  # type: ignore[attr-defined]
    present = rec.content_length  # type: ignore[attr-defined]
    if is_response:
        try:
            rec.parse_http(auto_decode="all")  # type: ignore[attr-defined]
        except (OSError, ValueError):
            return DeadPage(url, host_of(url), "bad_record", "the HTTP headers of the record are malformed", source)
        status = rec.http_headers.status_code  # type: ignore[attr-defined]
        if status is None or not 200 <= status < 300:
            return None  # redirects and errors are not pages of the site
        content_type = rec.http_headers.get("Content-Type")  # type: ignore[attr-defined]
    else:
        content_type = rec.headers.get("Content-Type")  # type: ignore[attr-defined]
        if not content_type:
            return None
    if content_type and _media_type(content_type) not in _HTML_TYPES:
        return None
    host = host_of(url)
    if not host:
        return DeadPage(url, "", "bad_record", "the record's WARC-Target-URI has no host name", source)
    try:
        data = rec.reader.read()  # type: ignore[attr-defined]
    except OSError as exc:
        return DeadPage(url, host, "undecodable", f"the record body cannot be read: {exc}", source)
    if present < declared:
        return DeadPage(
            url, host, "truncated", f"the record holds {present:,} of the {declared:,} bytes it declares", source
        )
    text = decode_html(data, charset_of(content_type))
    if text is None:
        return DeadPage(url, host, "undecodable", "the bytes decode in no known charset", source)
    return RawPage(url, text, host, source)
