"""`detemplate run --format`: every format carries the same fields and a record for every dead
letter, and each opens with the library its users read it with (pyarrow, warcio and FastWARC,
a YAML and a Markdown parser)."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type stubs
import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml's stubs are not installed
from detemplate.cli import main
from detemplate.engine.errors import BadInputError
from detemplate.engine.model import CleanPage, RawPage
from detemplate.engine.params import EngineParams
from detemplate.io import codec
from detemplate.io.formats import JsonlWriter, OutputOptions, format_for
from detemplate.offline import run_pages
from detemplate.state.memory import MemoryStore
from fastwarc.warc import ArchiveIterator as FastArchiveIterator
from markdown_it import MarkdownIt
from warcio.archiveiterator import ArchiveIterator

from tests.factories import interleave, make_page, make_site, write_warc
from tests.io.test_schemas import errors

FIELDS = ("v", "url", "host", "page_no", "cluster", "title", "lang", "date", "warc")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WARC.gz of two generated sites (24 pages), with one broken record in the middle."""
    folder = tmp_path_factory.mktemp("crawl")
    site = interleave(make_site("a.example", 14, seed=1, layout="blog"), make_site("b.example", 10, seed=2))
    path = write_warc(site, folder / "crawl.warc.gz")
    # A garbage member after the 5th record: a dead letter in every format, the rest read.
    data = _members(path.read_bytes())
    path.write_bytes(b"".join(data[:5]) + gzip.compress(b"garbage, not a WARC record\r\n") + b"".join(data[5:]))
    return path


def _members(data: bytes) -> list[bytes]:
    """The gzip members of a file."""
    import zlib

    out = []
    at = 0
    while at < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[at:])
        end = len(data) - len(d.unused_data)
        out.append(data[at:end])
        at = end
    return out


def run(inputs: list[str], output: Path, *flags: str) -> None:
    assert main(["run", *inputs, "--output", str(output), *flags]) == 0


@pytest.fixture(scope="module")
def jsonl(crawl: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("jsonl") / "out.jsonl"
    run([str(crawl)], out)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_jsonl_pages_carry_title_lang_date_and_their_warc_record(jsonl: list[dict[str, Any]], crawl: Path) -> None:
    clean = [r for r in jsonl if "error" not in r]
    bad = [r for r in jsonl if "error" in r]
    assert len(clean) == 24 and [r["error"] for r in bad] == ["bad_record"]
    assert jsonl.index(bad[0]) == 5  # in input order
    for r in clean:
        assert errors("clean-page", r) == [], r["url"]
        assert r["title"] and r["lang"] == "en" and r["date"] == "2024-01-01T00:00:00Z"
        assert r["warc"]["file"] == str(crawl) and r["warc"]["target_uri"] == r["url"]
        assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", r["warc"]["record_id"])
    # The offset is the record's gzip member: reading there gives the record back.
    data = crawl.read_bytes()
    for r in clean[:3]:
        record = next(iter(ArchiveIterator(io.BytesIO(data[r["warc"]["offset"] :]))))
        assert record.rec_headers.get_header("WARC-Record-ID") == r["warc"]["record_id"]


def test_no_blocks_is_the_lean_form(crawl: Path, jsonl: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "lean.jsonl"
    run([str(crawl)], out, "--no-blocks")
    lean = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [{k: v for k, v in r.items() if k != "blocks"} for r in jsonl] == lean
    assert all(errors("clean-page", r) == [] for r in lean if "error" not in r)
    full_size = sum(len(json.dumps(r)) for r in jsonl)
    assert sum(len(json.dumps(r)) for r in lean) < full_size / 2


def _front_matter_pages(text: str) -> list[tuple[dict[str, Any], str]]:
    """Split a Markdown or text output at its `---` lines: (front matter, body) per record."""
    parts = re.split(r"(?m)^---\n", text)
    assert parts[0] == ""
    out = []
    for i in range(1, len(parts), 2):
        out.append((yaml.safe_load(parts[i]), parts[i + 1].strip("\n")))
    return out


@pytest.mark.parametrize("fmt", ["markdown", "text"])
def test_markdown_and_text_carry_the_same_fields(
    fmt: str, crawl: Path, jsonl: list[dict[str, Any]], tmp_path: Path
) -> None:
    out = tmp_path / ("out.md" if fmt == "markdown" else "out.txt")
    run([str(crawl)], out)  # the format by the output's name
    records = _front_matter_pages(out.read_text(encoding="utf-8"))
    assert len(records) == len(jsonl)
    md = MarkdownIt("commonmark").enable("table")
    for (front, body), rec in zip(records, jsonl, strict=True):
        if "error" in rec:
            assert front == {k: rec[k] for k in ("v", "error", "detail", "url", "host", "source")} and body == ""
            continue
        assert front == {k: rec[k] for k in (*FIELDS, "counts") if k in rec}
        if fmt == "text":
            assert body == rec["text"]
        else:
            tokens = md.parse(body)
            assert tokens, rec["url"]
            text = " ".join(t.content for t in tokens if t.type in ("inline", "fence", "code_block"))
            # Every word of the kept text is in the Markdown's text, and no word of the page's template.
            assert set(re.findall(r"\w+", rec["text"])) <= set(re.findall(r"\w+", text)), rec["url"]


def test_wet_is_read_by_warcio_and_fastwarc(crawl: Path, jsonl: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "out.wet.gz"
    run([str(crawl)], out)
    clean = [r for r in jsonl if "error" not in r]
    with open(out, "rb") as fh:
        records = [(r.rec_type, r.rec_headers, r.content_stream().read()) for r in ArchiveIterator(fh)]
    assert [t for t, _, _ in records] == ["warcinfo"] + ["conversion"] * 5 + ["metadata"] + ["conversion"] * 19
    conversions = [(h, body) for t, h, body in records if t == "conversion"]
    for (headers, body), rec in zip(conversions, clean, strict=True):
        assert headers.get_header("WARC-Target-URI") == rec["url"]
        assert headers.get_header("WARC-Refers-To") == rec["warc"]["record_id"]
        assert headers.get_header("WARC-Date") == "2024-01-01T00:00:00Z"
        assert headers.get_header("Content-Type") == "text/plain"
        assert headers.get_header("Detemplate-Title") == rec["title"]
        assert headers.get_header("Detemplate-Source-Offset") == str(rec["warc"]["offset"])
        assert body.decode("utf-8") == rec["text"]
    dead = json.loads(records[6][2])
    assert dead["error"] == "bad_record"
    # FastWARC checks every block digest; one gzip member a record.
    with open(out, "rb") as fh:
        digests = [r.verify_block_digest() for r in FastArchiveIterator(fh, parse_http=False)]
    assert digests == [True] * len(records)
    assert len(_members(out.read_bytes())) == len(records)


def test_parquet_rows_are_the_jsonl_records(crawl: Path, jsonl: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    run([str(crawl)], out)
    table = pq.read_table(out)
    assert table.num_rows == len(jsonl)
    rows = table.to_pylist()
    for row, rec in zip(rows, jsonl, strict=True):
        assert {k: v for k, v in row.items() if v is not None} == rec
    assert {"title", "lang", "date", "warc", "blocks", "links", "error"} <= set(table.column_names)


def test_format_by_name_and_flag() -> None:
    assert format_for("x.jsonl.gz", None) == "jsonl"
    assert format_for("x.md", None) == "markdown"
    assert format_for("x.txt.gz", None) == "text"
    assert format_for("x.warc.wet.gz", None) == "wet"
    assert format_for("x.warc.gz", None) == "wet"
    assert format_for("x.parquet", None) == "parquet"
    assert format_for("-", None) == "jsonl"
    assert format_for("x.out", None) == "jsonl"
    assert format_for("x.md", "jsonl") == "jsonl"
    with pytest.raises(BadInputError.__mro__[1]):  # DetemplateError: a ConfigError
        format_for("x.parquet.gz", None)


def test_stdin_is_an_input(crawl: Path, jsonl: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "detemplate", "run", "-", "--output", str(out)],
        input=crawl.read_bytes(), capture_output=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r.get("text") for r in got] == [r.get("text") for r in jsonl]
    assert all(r["warc"]["file"] == "<stdin>" for r in got if "error" not in r)


# -- no record crashes the encoder -----------------------------------------------------------------


def test_a_lone_surrogate_in_a_url_is_a_dead_letter_and_the_run_goes_on(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    line = b'{"url": "https://sur.example/\\udfff", "html": "<p>x</p>"}'
    assert len(line) == 57
    good = json.dumps({"url": "https://ok.example/", "html": "<p>fine</p>"}).encode()
    src.write_bytes(line + b"\n" + good + b"\n")
    out = tmp_path / "out.jsonl"
    run([str(src)], out)
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert recs[0]["error"] == "bad_url" and "\\udfff" in recs[0]["detail"]
    assert recs[1]["url"] == "https://ok.example/"


def test_a_page_that_cannot_be_encoded_becomes_an_error_line(tmp_path: Path) -> None:
    # Only a caller of the API can hand the engine such a page: the decoders refuse them.
    bad = RawPage("https://a.example/\udfff", "<p>text</p>", "a.example", "api:1")
    good = make_page(url="https://a.example/ok", host="a.example")
    buf = io.BytesIO()
    summary = run_pages([bad, good], MemoryStore(), EngineParams(), buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert lines[0]["error"] == "unencodable" and lines[0]["url"] == "https://a.example/\ufffd"
    assert lines[1]["url"] == "https://a.example/ok"
    assert summary.errors["unencodable"] == 1 and summary.clean == 1


def test_the_codec_never_crashes_on_a_surrogate() -> None:
    page = CleanPage("https://a.example/\udfff", "a.example", 1, "t", ())
    with pytest.raises(codec.UnencodableError, match="url"):
        codec.encode_clean(page)
    writer = JsonlWriter(io.BytesIO(), OutputOptions())
    with pytest.raises(codec.UnencodableError):
        writer.clean(page, RawPage(page.url, "<p>t</p>", "a.example"))
    assert writer.out.getvalue() == b""  # type: ignore[attr-defined]  # nothing half-written
    from detemplate.engine.model import DeadPage

    line = codec.encode_dead(DeadPage("https://a.example/\udfff", "h\ud800", "bad_url", "d\udc00", "s"))
    assert json.loads(line)["url"] == "https://a.example/\ufffd"
