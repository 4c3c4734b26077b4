"""detemplate.io.archive: WARC and ARC files read as the web's archive readers read them, one
bad record costing that record, on files these tests build."""

from __future__ import annotations

import functools
import gzip
import io
import zlib
from pathlib import Path

import brotli  # type: ignore[import-untyped]  # brotli ships no type stubs
import pytest
from detemplate.engine.model import DeadPage, RawPage
from detemplate.io import stream
from detemplate.io.archive import dechunk
from detemplate.io.sources import iter_inputs

from tests.io.archives import arc_file, chunked, deflate, gzip_stream, http_response, warc_record, write_warc

PAGE = b"<html><head><title>T</title></head><body><article><p>%s</p></article></body></html>"


def page(n: int | str) -> bytes:
    return PAGE % str(n).encode()


def pages(items: list[RawPage | DeadPage]) -> list[RawPage]:
    return [p for p in items if isinstance(p, RawPage)]


def dead(items: list[RawPage | DeadPage]) -> list[DeadPage]:
    return [p for p in items if isinstance(p, DeadPage)]


def offset(item: RawPage | DeadPage) -> int:
    return int(item.source.rsplit("@", 1)[1])


# -- gzip per record, gzip whole, plain ------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, "record", "file"])
def test_every_layout_gives_the_same_pages_and_record_ids(tmp_path: Path, gz: str | bool) -> None:
    records = [
        warc_record("https://a.example/", b"", warc_type="warcinfo", content_type="application/warc-fields"),
        *[warc_record(f"https://a.example/{i}", page(i), record_id=f"<urn:uuid:{i}>") for i in range(4)],
    ]
    path = write_warc(tmp_path / ("a.warc.gz" if gz else "a.warc"), records, gz)
    out = list(iter_inputs([path]))
    assert not dead(out)
    assert [p.url for p in out] == [f"https://a.example/{i}" for i in range(4)]
    assert [p.meta["warc_record_id"] for p in pages(out)] == [f"<urn:uuid:{i}>" for i in range(4)]
    assert all(p.meta["date"] == "2024-01-01T00:00:00Z" and p.meta["warc_file"] == str(path) for p in pages(out))
    if gz == "record":
        # The offset is the record's gzip member in the file: where WARC tools seek.
        members = [len(gzip.compress(r)) for r in records]
        assert [offset(p) for p in out] == [sum(members[: i + 1]) for i in range(4)]
        data = path.read_bytes()
        for p in pages(out):
            assert gzip.GzipFile(fileobj=io.BytesIO(data[offset(p) :])).read().startswith(b"WARC/1.0")
    else:
        # Plain, or gzip as a whole: the offset in the (uncompressed) bytes.
        assert [offset(p) for p in out] == [sum(len(r) for r in records[: i + 1]) for i in range(4)]
    assert [p.meta["warc_offset"] for p in pages(out)] == [offset(p) for p in out]


# -- HTTP bodies -----------------------------------------------------------------------------------


def test_chunked_bodies_are_dechunked_and_fake_chunked_ones_read_as_they_are(tmp_path: Path) -> None:
    body = page("a real page held in several chunks")
    te = "Transfer-Encoding: chunked\r\n"
    records = [
        warc_record("https://c.example/real", chunked(body), extra_http=te),
        # The header says chunked, the body was stored de-chunked (many crawlers do this).
        warc_record("https://c.example/fake", body, extra_http=te),
        warc_record("https://c.example/after", page("after")),
        # Chunked and gzip-encoded, as servers send it.
        warc_record(
            "https://c.example/both", chunked(gzip.compress(body), 100), extra_http=te + "Content-Encoding: gzip\r\n"
        ),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "c.warc.gz", records, gz=True)]))
    assert not dead(out)
    assert [(p.url.rsplit("/", 1)[1], p.html.encode()) for p in pages(out)] == [
        ("real", body), ("fake", body), ("after", page("after")), ("both", body)
    ]


def test_dechunk_takes_a_body_that_only_looks_chunked_as_it_is() -> None:
    assert dechunk(b"5\r\nhello\r\n0\r\n\r\n") == b"hello"
    assert dechunk(b"5\nhello\n0\n\n") == b"hello"
    assert dechunk(b"<!doctype html><p>x</p>") == b"<!doctype html><p>x</p>"
    assert dechunk(b"abc\r\nnot a chunk of size 0xabc") == b"abc\r\nnot a chunk of size 0xabc"
    assert dechunk(b"3\r\nabcX") == b"3\r\nabcX"  # no line break where the chunk says it ends
    assert dechunk(b"3\r\nabc\r\n5\r\nde") == b"abcde"  # a connection cut mid-chunk: what arrived


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", deflate),
        ("deflate", lambda b: deflate(b, raw=True)),
        ("br", brotli.compress),
    ],
    ids=["gzip", "x-gzip", "deflate-zlib", "deflate-raw", "br"],
)
def test_content_encodings_are_undone(tmp_path: Path, coding: str, encode: object) -> None:
    body = page("encoded body " * 20)
    rec = warc_record("https://e.example/", encode(body), extra_http=f"Content-Encoding: {coding}\r\n")  # type: ignore[operator]
    (got,) = iter_inputs([write_warc(tmp_path / "e.warc", [rec])])
    assert isinstance(got, RawPage) and got.html.encode() == body


def test_a_body_stored_decoded_under_a_content_encoding_header_is_read_as_it_is(tmp_path: Path) -> None:
    body = page("stored decoded by the crawler")
    rec = warc_record("https://e.example/", body, extra_http="Content-Encoding: gzip\r\n")
    (got,) = iter_inputs([write_warc(tmp_path / "e.warc", [rec])])
    assert isinstance(got, RawPage) and got.html.encode() == body


def test_http_dates_and_language_are_kept(tmp_path: Path) -> None:
    extra = (
        "Date: Tue, 02 Jan 2024 03:04:05 GMT\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
        "Content-Language: de-DE, en\r\n"
    )
    rec = warc_record("https://d.example/", page("x"), extra_http=extra, date="2024-01-03T10:00:00Z")
    (got,) = iter_inputs([write_warc(tmp_path / "d.warc", [rec])])
    assert isinstance(got, RawPage)
    # The capture date is the WARC-Date; the HTTP Date only stands in when a record has none (ARC has its own).
    assert got.meta["date"] == "2024-01-03T10:00:00Z"
    assert got.meta["last_modified"] == "2024-01-01T00:00:00Z"
    assert got.meta["content_language"] == "de-DE"
    assert got.meta["warc_target_uri"] == "https://d.example/"


# -- charsets ------------------------------------------------------------------------------------------


def test_a_latin1_page_with_a_0x81_byte_is_read_as_windows_1252(tmp_path: Path) -> None:
    body = b"<p>Caf\xe9 \x93quoted\x94 \x81 5\x80</p>"  # 0x81: undefined in Python's cp1252
    rec = warc_record("https://l.example/", body, content_type="text/html; charset=ISO-8859-1")
    (got,) = iter_inputs([write_warc(tmp_path / "l.warc", [rec])])
    assert isinstance(got, RawPage)
    assert got.html == "<p>Caf\xe9 \u201cquoted\u201d \x81 5\u20ac</p>"


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        ("text/html; charset=latin1", "naïve €".encode("cp1252"), "naïve €"),
        ("text/html; charset=US-ASCII", "“x”".encode("cp1252"), "“x”"),
        ("text/html; charset=gb2312", "中文网页".encode("gbk"), "中文网页"),
        ("text/html; charset=x-sjis", "日本語".encode("shift_jis"), "日本語"),
        ("text/html; charset=unicode-1-1-utf-8", "ünï".encode(), "ünï"),
        ("text/html", b"\xef\xbb\xbf" + "bom ü".encode(), "bom ü"),
        ("text/html; charset=windows-1251", b"\xef\xbb\xbf" + b"bom wins", "bom wins"),
        ("text/html", b'<!-- <meta charset="koi8-r"> --><meta charset="iso-8859-2">' + "łódź".encode("iso-8859-2"),
         '<!-- <meta charset="koi8-r"> --><meta charset="iso-8859-2">łódź'),
        ("text/html", b'<meta http-equiv="Content-Type" content="text/html; charset=utf-16">' + "ü".encode(),
         '<meta http-equiv="Content-Type" content="text/html; charset=utf-16">ü'),
    ],
    ids=["latin1", "us-ascii", "gb2312", "x-sjis", "alias", "bom", "bom-over-header", "meta-not-in-comment",
         "meta-utf16-is-utf8"],
)
def test_whatwg_labels_aliases_bom_and_prescan(tmp_path: Path, content_type: str, body: bytes, text: str) -> None:
    rec = warc_record("https://w.example/", body, content_type=content_type)
    (got,) = iter_inputs([write_warc(tmp_path / "w.warc", [rec])])
    assert isinstance(got, RawPage) and got.html == text


# -- ARC ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_arc_files_are_read(tmp_path: Path, gz: bool) -> None:
    data = arc_file(
        [
            ("https://arc.example/1", http_response(page(1))),
            ("https://arc.example/img.png", http_response(b"\x89PNG", "image/png")),
            ("dns:arc.example", b"192.0.2.1"),
            ("http://arc.example/2", http_response(page(2), "text/html; charset=iso-8859-1")),
        ]
    )
    path = tmp_path / ("a.arc.gz" if gz else "a.arc")
    path.write_bytes(gzip.compress(data) if gz else data)
    out = list(iter_inputs([path]))
    assert not dead(out)
    assert [(p.url, p.host, p.html.encode()) for p in pages(out)] == [
        ("https://arc.example/1", "arc.example", page(1)), ("http://arc.example/2", "arc.example", page(2))
    ]
    assert pages(out)[0].meta["date"] == "2024-01-02T03:04:05Z"


def test_an_arc_file_under_another_name_is_sniffed(tmp_path: Path) -> None:
    path = tmp_path / "crawl.dat"
    path.write_bytes(arc_file([("https://arc.example/1", http_response(page(1)))]))
    assert [p.url for p in iter_inputs([path])] == ["https://arc.example/1"]


# -- bad records cost only themselves --------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_garbage_and_bad_lengths_mid_file_cost_one_record(tmp_path: Path, gz: bool) -> None:
    good = [warc_record(f"https://g.example/{i}", page(i)) for i in range(4)]
    records = [
        good[0],
        b"this is not a WARC header\r\n" * 20,  # more than a stray line left over by a short length
        good[1],
        warc_record("https://g.example/no-length", page("x")).replace(b"Content-Length: ", b"Content-Length: x"),
        good[2],
        warc_record("https://g.example/bad-http", b"", block=b"not an http response at all\r\n\r\n<p>x</p>"),
        good[3],
    ]
    path = write_warc(tmp_path / ("g.warc.gz" if gz else "g.warc"), records, gz=gz)
    out = list(iter_inputs([path]))
    assert [p.url for p in pages(out)] == [f"https://g.example/{i}" for i in range(4)]
    bad = dead(out)
    assert [d.reason for d in bad] == ["bad_record", "bad_record", "bad_record"]
    assert [d.url for d in bad] == ["", "https://g.example/no-length", "https://g.example/bad-http"]
    if gz:
        members = [len(gzip.compress(r)) for r in records]
        assert [offset(d) for d in bad] == [sum(members[:1]), sum(members[:3]), sum(members[:5])]
    else:
        assert offset(bad[0]) == len(records[0])


@pytest.mark.parametrize("gz", [False, True])
def test_a_length_beyond_the_file_is_truncated_and_does_not_swallow_the_next_record(tmp_path: Path, gz: bool) -> None:
    liar = warc_record("https://t.example/liar", page("liar"), declared=10**15)
    records = [warc_record("https://t.example/0", page(0)), liar, warc_record("https://t.example/1", page(1))]
    path = write_warc(tmp_path / ("t.warc.gz" if gz else "t.warc"), records, gz=gz)
    out = list(iter_inputs([path]))
    assert [p.url for p in pages(out)] == ["https://t.example/0", "https://t.example/1"]
    assert pages(out)[1].html.encode() == page(1)  # the good page, not WARC headers
    (lie,) = dead(out)
    assert lie.reason == "truncated" and lie.url == "https://t.example/liar"
    assert "1,000,000,000,000,000" in lie.detail


def test_a_length_a_few_bytes_short_is_tolerated_as_archive_readers_do(tmp_path: Path) -> None:
    # The block's last line is left over after Content-Length; the next record follows it.
    short = warc_record("https://s.example/0", page(0) + b"\r\nm")
    short = short.replace(b"Content-Length: %d\r\n\r\nHTTP" % (len(short) - 4 - short.index(b"HTTP")),
                          b"Content-Length: %d\r\n\r\nHTTP" % (len(short) - 7 - short.index(b"HTTP")))
    # Line breaks of another writer: CR CR LF.
    odd = warc_record("https://s.example/1", page(1))[:-4] + b"\r\r\n\r\r\n"
    records = [short, odd, warc_record("https://s.example/2", page(2))]
    out = list(iter_inputs([write_warc(tmp_path / "s.warc", records)]))
    assert not dead(out)
    assert [p.url for p in out] == [f"https://s.example/{i}" for i in range(3)]


def test_a_lying_length_on_a_record_that_is_not_a_page_costs_nothing_else(tmp_path: Path) -> None:
    records = [
        warc_record("https://t.example/0", page(0)),
        warc_record("https://t.example/req", b"", warc_type="request", declared=10**12),
        warc_record("https://t.example/1", page(1)),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "t.warc", records)]))
    assert [p.url for p in out] == ["https://t.example/0", "https://t.example/1"]


def test_a_file_cut_mid_record_gives_truncated_then_the_next_input(tmp_path: Path) -> None:
    records = [warc_record(f"https://c.example/{i}", page(i)) for i in range(3)]
    whole = b"".join(records)
    cut = tmp_path / "cut.warc"
    cut.write_bytes(whole[: len(whole) - 30])
    nxt = write_warc(tmp_path / "next.warc", [warc_record("https://n.example/", page("n"))])
    out = list(iter_inputs([cut, nxt]))
    assert [p.url for p in pages(out)] == ["https://c.example/0", "https://c.example/1", "https://n.example/"]
    assert [(d.reason, d.url) for d in dead(out)] == [("truncated", "https://c.example/2")]


@pytest.fixture(params=["default", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Gzip input read with the default inflater (ISA-L's where installed) and with zlib's, the
    fallback: the same records, the same dead letters."""
    if request.param == "zlib":
        monkeypatch.setattr(stream, "_gzip_inflater", functools.partial(zlib.decompressobj, wbits=31))
        monkeypatch.setattr(stream, "_INFLATE_ERRORS", (zlib.error,))
    return str(request.param)


def test_the_default_inflater_is_isal_where_it_is_installed() -> None:
    pytest.importorskip("isal")
    assert type(stream._gzip_inflater()).__module__ == "isal_zlib"


@pytest.mark.usefixtures("inflater")
def test_a_corrupt_gzip_member_costs_its_record(tmp_path: Path) -> None:
    members = [gzip.compress(warc_record(f"https://z.example/{i}", page(i))) for i in range(3)]
    broken = members[1][:20] + b"\x00" * 40 + members[1][60:]
    path = tmp_path / "z.warc.gz"
    path.write_bytes(members[0] + broken + members[2])
    nxt = write_warc(tmp_path / "next.warc", [warc_record("https://n.example/", page("n"))])
    out = list(iter_inputs([path, nxt]))
    assert [p.url for p in pages(out)] == ["https://z.example/0", "https://z.example/2", "https://n.example/"]
    (bad,) = dead(out)
    assert bad.reason == "unreadable_input" and offset(bad) == len(members[0])
    assert "next gzip member" in bad.detail


@pytest.mark.usefixtures("inflater")
def test_a_gzip_file_cut_short_reports_where_and_goes_on_with_the_next_input(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(warc_record(f"https://z.example/{i}", page(i)) for i in range(40)))
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(data[: len(data) // 2])
    nxt = write_warc(tmp_path / "next.warc", [warc_record("https://n.example/", page("n"))])
    out = list(iter_inputs([path, nxt]))
    assert pages(out)[-1].url == "https://n.example/"
    assert [d.reason for d in dead(out)][-1] == "unreadable_input"


# -- bounded reading: bombs, at a small page limit ----------------------------------------------------

LIMIT = 1 << 20  # 1 MB pages here; docs/hostile-inputs.md measures the full-size bombs


def test_a_record_over_the_page_limit_is_not_read(tmp_path: Path) -> None:
    big = warc_record("https://b.example/big", b"<p>" + b"x" * (3 * LIMIT) + b"</p>")
    records = [big, warc_record("https://b.example/ok", page("ok"))]
    out = list(iter_inputs([write_warc(tmp_path / "b.warc.gz", records, gz=True)], max_page_bytes=LIMIT))
    assert [p.url for p in pages(out)] == ["https://b.example/ok"]
    (too,) = dead(out)
    assert too.reason == "too_large" and too.url == "https://b.example/big" and "not read" in too.detail


def test_big_responses_that_are_not_pages_are_skipped_silently(tmp_path: Path) -> None:
    records = [
        warc_record("https://i.example/big.png", b"\x89PNG" + b"\0" * (3 * LIMIT), content_type="image/png"),
        warc_record("https://i.example/gone", b"<p>" + b"x" * (3 * LIMIT), status=404),
        warc_record("https://i.example/ok", page("ok")),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "i.warc.gz", records, gz=True)], max_page_bytes=LIMIT))
    assert [(type(p).__name__, p.url) for p in out] == [("RawPage", "https://i.example/ok")]


def test_a_gzip_member_inflating_far_past_the_limit_is_skipped_unheld(tmp_path: Path) -> None:
    # A 300 MB record in a member of about 300 KB: inflated through in pieces, never held.
    size = 300 << 20
    http = http_response(b"", extra_http=f"Content-Length: {size}\r\n")
    head = warc_record("https://b.example/bomb", b"", declared=len(http) + size)
    bomb = gzip_stream(size, prefix=head[: head.index(b"\r\n\r\n") + 4] + http, suffix=b"\r\n\r\n")
    path = tmp_path / "bomb.warc.gz"
    path.write_bytes(bomb + gzip.compress(warc_record("https://b.example/ok", page("ok"))))
    out = list(iter_inputs([path], max_page_bytes=LIMIT))
    assert [p.url for p in pages(out)] == ["https://b.example/ok"]
    assert [(d.reason, d.url) for d in dead(out)] == [("too_large", "https://b.example/bomb")]


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_content_encoding_bomb_stops_at_the_limit(tmp_path: Path, coding: str) -> None:
    payload = b"<p>" + b"A" * (200 << 20)
    data = {"gzip": gzip.compress, "deflate": deflate, "br": lambda b: brotli.compress(b, quality=1)}[coding](payload)
    assert len(data) < LIMIT
    records = [
        warc_record("https://b.example/bomb", data, extra_http=f"Content-Encoding: {coding}\r\n"),
        warc_record("https://b.example/ok", page("ok")),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "b.warc", records)], max_page_bytes=LIMIT))
    assert [p.url for p in pages(out)] == ["https://b.example/ok"]
    (too,) = dead(out)
    assert too.reason == "too_large" and "inflates" in too.detail


def test_stdin_reads_a_gzip_warc(tmp_path: Path) -> None:
    data = b"".join(gzip.compress(warc_record(f"https://s.example/{i}", page(i))) for i in range(3))
    out = list(iter_inputs(["-"], stdin=io.BufferedReader(io.BytesIO(data))))  # type: ignore[arg-type]
    assert [p.url for p in out] == [f"https://s.example/{i}" for i in range(3)]
    assert all(p.source.startswith("<stdin>@") for p in out)


@pytest.mark.parametrize(("data", "reasons"), [
    (b"", []),  # nothing (`grep ... | detemplate run -` that matched nothing): no page, as an empty file
    (gzip.compress(b""), []),
    (b"not a page\n", ["unreadable_input"]),  # something that is none of the formats: said
])
def test_stdin_empty_gives_no_page_and_junk_an_error(data: bytes, reasons: list[str]) -> None:
    out = list(iter_inputs(["-"], stdin=io.BufferedReader(io.BytesIO(data))))  # type: ignore[arg-type]
    assert [item.reason for item in dead(out)] == reasons and not pages(out)
