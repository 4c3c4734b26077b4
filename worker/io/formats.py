"""The output formats of `detemplate run`: JSONL, Markdown, plain text, WET and Parquet.

Every format carries the same fields for a clean page (`codec.page_fields`: url, host,
page_no, cluster, title, lang, date, last_modified and, for WARC or ARC input, the
record's file, offset, id and target URI) and a record for every dead letter, in input
order; what differs is how the content is written (docs/formats.md):

- ``jsonl``: the clean-page record of schemas/clean-page.v1.json, one a line; dead letters
  as error lines (the stream's exact bytes).
- ``markdown``: each page a YAML front matter (the fields, each value in JSON, which YAML
  reads) between two ``---`` lines, then its kept content as Markdown (markdown.py). A
  dead letter is a front matter with ``error``, ``detail``, ``url``, ``host``, ``source``
  and no body. No line of a body is exactly ``---``: split the file at those lines.
- ``text``: the same, with the kept text (in document order, a paragraph a line) as the body.
- ``wet``: a WARC file as Common Crawl's WET files are: a ``warcinfo`` record, then a
  ``conversion`` record for each clean page (``text/plain``, its kept text), with
  ``WARC-Refers-To`` the source record's id (WARC input) and the fields in
  ``Detemplate-*`` headers; a dead letter is a ``metadata`` record holding its JSON.
  With ``.gz``, one gzip member a record (what WARC tools seek in).
- ``parquet``: one row a record (pyarrow, the ``parquet`` extra), the JSONL fields as
  columns (``warc``, ``counts``, ``links`` and ``blocks`` as structs and lists), the dead
  letters' ``error``, ``detail`` and ``source`` in their own columns (null for pages).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from ..engine.errors import ConfigError
from ..engine.model import CleanPage, DeadPage, RawPage
from ..engine.params import SegmentParams
from . import codec

FORMATS = ("jsonl", "markdown", "text", "wet", "parquet")
# By the output file's name (after a .gz): only where a name says one format.
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".wet": "wet",
    ".warc": "wet",
    ".parquet": "parquet",
}
PARQUET_ROWS = 1000  # a Parquet row group holds at most this many rows...
PARQUET_BYTES = 64 << 20  # ...or about this much text


def format_for(path: str, asked: str | None) -> str:
    """The format of output PATH: `asked` when given, else by its name, else jsonl."""
    name = path.lower()
    gz = name.endswith(".gz")
    if gz:
        name = name[:-3]
    by_name = next((fmt for ext, fmt in EXTENSIONS.items() if name.endswith(ext)), None)
    fmt = asked or by_name or "jsonl"
    if fmt not in FORMATS:
        raise ConfigError(f"unknown output format {fmt!r} (one of {', '.join(FORMATS)})")
    if fmt == "parquet" and (gz or path == "-"):
        raise ConfigError("Parquet output goes to a file, not compressed further (Parquet compresses itself)")
    return fmt


@dataclass
class OutputOptions:
    """What every writer is told: blocks (False: the lean form), the walk's parameters (Markdown),
    whether the output is gzip (WET writes a member a record), the run's start (a WET record's
    date when the page has none)."""

    blocks: bool = True
    segment: SegmentParams = field(default_factory=SegmentParams)
    gz: bool = False
    started: datetime = field(default_factory=lambda: datetime.now(UTC))


class Writer:
    """One output file of a run: clean pages and dead letters, in order."""

    def __init__(self, out: IO[bytes], options: OutputOptions) -> None:
        self.out = out
        self.options = options
        self.fallbacks = 0  # pages whose Markdown lost its structure (markdown.py)

    def clean(self, page: CleanPage, raw: RawPage) -> None:
        """Write a clean page; UnencodableError (writing nothing) when a field cannot be written."""
        raise NotImplementedError

    def dead(self, dead: DeadPage) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file (Parquet's footer); the caller closes `out`."""


class JsonlWriter(Writer):
    def clean(self, page: CleanPage, raw: RawPage) -> None:
        self.out.write(codec.encode_clean(page, self.options.blocks) + b"\n")

    def dead(self, dead: DeadPage) -> None:
        self.out.write(codec.encode_dead(dead) + b"\n")


def _utf8(text: str) -> bytes:
    """`text` as UTF-8; UnencodableError for a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise codec.UnencodableError(
            "unencodable", f"the page holds a lone surrogate ({text[exc.start : exc.end]!r}), which no UTF-8 output "
            "can carry"
        ) from exc


_FRONT = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False).encode
_FENCE_LINE = re.compile(r"(?m)^---$")


def front_matter(fields: dict[str, Any]) -> str:
    """A YAML front matter: each value written as JSON (a YAML flow scalar or mapping)."""
    return "---\n" + "".join(f"{key}: {_FRONT(value)}\n" for key, value in fields.items()) + "---\n"


class _FrontMatterWriter(Writer):
    def _body(self, page: CleanPage, raw: RawPage) -> str:
        raise NotImplementedError

    def clean(self, page: CleanPage, raw: RawPage) -> None:
        fields = codec.page_fields(page)
        fields["counts"] = codec.counts_dict(page)
        body = self._body(page, raw)
        self.out.write(_utf8(front_matter(fields) + "\n" + (body + "\n\n" if body else "")))

    def dead(self, dead: DeadPage) -> None:
        fields = codec.dead_dict(dead)
        self.out.write(codec.safe_text(front_matter(fields) + "\n").encode("utf-8"))


class TextWriter(_FrontMatterWriter):
    def _body(self, page: CleanPage, raw: RawPage) -> str:
        return _FENCE_LINE.sub("--- ", page.text)


class MarkdownWriter(_FrontMatterWriter):
    def _body(self, page: CleanPage, raw: RawPage) -> str:
        from .markdown import render_markdown

        text, structured = render_markdown(raw.html, page, self.options.segment)
        if not structured:
            self.fallbacks += 1
        return text


class WetWriter(Writer):
    """WARC/1.0 conversion records, as Common Crawl's WET files."""

    def __init__(self, out: IO[bytes], options: OutputOptions) -> None:
        super().__init__(out, options)
        info = (
            b"software: detemplate (https://detemplate.dev)\r\n"
            b"format: WARC File Format 1.0\r\n"
            b"description: the kept content of each page, its site template removed (detemplate run --format wet)\r\n"
        )
        self._record(
            {
                "WARC-Type": "warcinfo",
                "WARC-Date": _warc_date(self.options.started.isoformat()),
                "WARC-Record-ID": _record_id("warcinfo", self.options.started.isoformat()),
                "Content-Type": "application/warc-fields",
            },
            info,
        )

    def _record(self, headers: dict[str, str], block: bytes) -> None:
        lines = ["WARC/1.0"]
        lines.extend(f"{k}: {_header_value(v)}" for k, v in headers.items())
        lines.append(f"WARC-Block-Digest: sha1:{base64.b32encode(hashlib.sha1(block).digest()).decode()}")
        lines.append(f"Content-Length: {len(block)}")
        record = _utf8("\r\n".join(lines) + "\r\n\r\n") + block + b"\r\n\r\n"
        self.out.write(gzip.compress(record, mtime=0) if self.options.gz else record)

    def clean(self, page: CleanPage, raw: RawPage) -> None:
        fields = codec.page_fields(page)
        headers = {
            "WARC-Type": "conversion",
            "WARC-Target-URI": page.url,
            "WARC-Date": _warc_date(fields.get("date") or self.options.started.isoformat()),
            "WARC-Record-ID": _record_id(page.url, raw.source, str(page.page_no)),
        }
        warc = fields.get("warc", {})
        if warc.get("record_id"):
            headers["WARC-Refers-To"] = warc["record_id"]
        headers["Content-Type"] = "text/plain"
        headers["Detemplate-Host"] = page.host
        headers["Detemplate-Page-No"] = str(page.page_no)
        for key in ("cluster", "title", "lang", "last_modified"):
            if key in fields:
                headers["Detemplate-" + key.replace("_", "-").title()] = str(fields[key])
        if "file" in warc:
            headers["Detemplate-Source-File"] = str(warc["file"])
        if "offset" in warc:
            headers["Detemplate-Source-Offset"] = str(warc["offset"])
        counts = codec.counts_dict(page)
        headers["Detemplate-Counts"] = " ".join(f"{k}={v}" for k, v in counts.items())
        self._record(headers, _utf8(page.text))

    def dead(self, dead: DeadPage) -> None:
        body = codec.encode_dead(dead)
        headers = {
            "WARC-Type": "metadata",
            "WARC-Date": _warc_date(self.options.started.isoformat()),
            "WARC-Record-ID": _record_id("dead", dead.source, dead.reason),
        }
        if dead.url:
            headers["WARC-Target-URI"] = codec.safe_text(dead.url)
        headers["Content-Type"] = "application/json"
        self._record(headers, body)


def _header_value(value: str) -> str:
    """A WARC header value on one line."""
    return " ".join(value.split()) if any(c in value for c in "\r\n\t") else value


def _record_id(*parts: str) -> str:
    """A record id that a rerun of the same input gives again."""
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'detemplate:' + chr(0).join(parts))}>"


def _warc_date(iso: str) -> str:
    """An ISO 8601 date as WARC-Date writes it (UTC, seconds, Z)."""
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ParquetWriter(Writer):
    """Rows in row groups of PARQUET_ROWS (or PARQUET_BYTES of text), so memory stays bounded."""

    def __init__(self, out: IO[bytes], options: OutputOptions) -> None:
        super().__init__(out, options)
        try:
            import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
            import pyarrow.parquet as pq  # type: ignore[import-untyped]
        except ModuleNotFoundError as exc:
            raise ConfigError(
                "Parquet output needs pyarrow: pip install 'detemplate[parquet]'"
            ) from exc
        self.pa = pa
        self.schema = parquet_schema(options.blocks)
        self.writer = pq.ParquetWriter(out, self.schema, compression="zstd")
        self.rows: list[dict[str, Any]] = []
        self.bytes = 0

    def clean(self, page: CleanPage, raw: RawPage) -> None:
        row = codec.clean_dict(page, self.options.blocks)
        codec.encode(row)  # raises UnencodableError for what Arrow could not store either
        self._add(row, len(page.text) + len(page.html or ""))

    def dead(self, dead: DeadPage) -> None:
        row = json.loads(codec.encode_dead(dead))
        self._add(row, len(dead.detail))

    def _add(self, row: dict[str, Any], size: int) -> None:
        self.rows.append(row)
        self.bytes += size
        if len(self.rows) >= PARQUET_ROWS or self.bytes >= PARQUET_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(self.pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []
            self.bytes = 0

    def close(self) -> None:
        self._flush()
        self.writer.close()


def parquet_schema(blocks: bool = True) -> Any:
    """The Parquet columns: the clean page's fields, and a dead letter's."""
    import pyarrow as pa

    columns = [
        ("v", pa.int8()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("page_no", pa.int64()),
        ("cluster", pa.int32()),
        ("title", pa.string()),
        ("lang", pa.string()),
        ("date", pa.string()),
        ("last_modified", pa.string()),
        ("warc", pa.struct([("file", pa.string()), ("offset", pa.int64()), ("record_id", pa.string()),
                            ("target_uri", pa.string())])),
        ("text", pa.string()),
        ("counts", pa.struct([("blocks", pa.int32()), ("template_blocks", pa.int32()), ("chars", pa.int64()),
                              ("template_chars", pa.int64())])),
    ]
    if blocks:
        columns.append(("blocks", pa.list_(pa.struct([
            ("path", pa.string()), ("chars", pa.int64()), ("template_chars", pa.int64()), ("ratio", pa.float64()),
            ("verdict", pa.string()), ("role", pa.string()), ("method", pa.string()), ("text", pa.string()),
        ]))))
    columns += [
        ("links", pa.struct([("content", pa.list_(pa.string())), ("template", pa.list_(pa.string()))])),
        ("html", pa.string()),
        ("error", pa.string()),
        ("detail", pa.string()),
        ("source", pa.string()),
    ]
    return pa.schema(columns)


WRITERS: dict[str, type[Writer]] = {
    "jsonl": JsonlWriter,
    "markdown": MarkdownWriter,
    "text": TextWriter,
    "wet": WetWriter,
    "parquet": ParquetWriter,
}


def make_writer(fmt: str, out: IO[bytes], options: OutputOptions) -> Writer:
    return WRITERS[fmt](out, options)
