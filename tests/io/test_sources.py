"""detemplate.io.sources: JSONL, WARC and folders of HTML as one stream of pages, in input order."""

# ruff: noqa: RUF001 (the charset tests need typographic characters that cp1252 and UTF-8 encode differently)

from __future__ import annotations

import base64
import gzip
import json
import os
import random
from pathlib import Path

import pytest
from detemplate.engine.errors import ConfigError
from detemplate.engine.model import DeadPage, RawPage
from detemplate.io.sources import Undecoded, decode_html, decode_record, estimate_total, iter_inputs, route_host

from tests.factories import make_page, make_site, write_jsonl
from tests.io.archives import warc_record, write_warc


def pages(items: list[RawPage | DeadPage]) -> list[RawPage]:
    return [p for p in items if isinstance(p, RawPage)]


def dead(items: list[RawPage | DeadPage]) -> list[DeadPage]:
    return [p for p in items if isinstance(p, DeadPage)]


# -- JSONL ------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl_round_trip_keeps_order_and_fields(tmp_path: Path, gz: bool) -> None:
    site = make_site("blog.example", 7, seed=3)
    path = write_jsonl(site, tmp_path / ("p.jsonl.gz" if gz else "p.jsonl"), gz=gz)
    out = list(iter_inputs([path]))
    assert [(p.url, p.host, p.html) for p in out] == [(s.page.url, s.page.host, s.page.html) for s in site]
    assert [p.source for p in out] == [f"{path}:{i}" for i in range(1, 8)]


def test_jsonl_host_from_url_lowercased_without_port_or_userinfo(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        json.dumps({"url": "https://User:pw@WWW.Example.COM:8443/a?b=1", "html": "<p>x</p>"})
        + "\n"
        + json.dumps({"url": "http://[::1]:8080/", "html": "<p>y</p>"})
        + "\n"
        + json.dumps({"url": "https://a.example/", "host": "  Given.HOST ", "html": "<p>z</p>"})
        + "\n"
    )
    assert [p.host for p in iter_inputs([path])] == ["www.example.com", "::1", "given.host"]


def test_jsonl_bad_lines_are_dead_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    lines = [
        '{"url": "https://a.example/1", "html": "<p>one</p>"}',
        '{"url": "https://a.example/2", "html": ',  # truncated JSON
        "",  # blank: skipped, no record
        '["not", "an", "object"]',
        '{"html": "<p>no url</p>"}',
        '{"url": "https://a.example/5"}',  # no html
        '{"url": "https://a.example/6", "html": 42}',
        '{"url": "no-host-here", "html": "<p>x</p>"}',
        '{"url": "https://a.example/8", "host": 7, "html": "<p>x</p>"}',
        '{"url": "https://a.example/9", "html": "<p>nine</p>"}',
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"url": "https://a.example/\xff", "html": ""}\n')
    out = list(iter_inputs([path]))
    assert [p.url for p in pages(out)] == ["https://a.example/1", "https://a.example/9"]
    reasons = [(d.reason, d.source.rsplit(":", 1)[1], d.url) for d in dead(out)]
    assert reasons == [
        ("bad_json", "2", ""),
        ("bad_record", "4", ""),
        ("bad_record", "5", ""),
        ("bad_record", "6", "https://a.example/5"),
        ("bad_record", "7", "https://a.example/6"),
        ("bad_url", "8", "no-host-here"),
        ("bad_record", "9", "https://a.example/8"),
        ("bad_json", "11", ""),  # invalid UTF-8 in the line
    ]
    assert all(d.detail for d in dead(out))
    # Order is input order: the dead letters sit where their lines were.
    assert [getattr(p, "source", "").rsplit(":", 1)[1] for p in out] == [
        "1",
        "2",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "10",
        "11",
    ]


def test_a_record_that_names_url_or_host_twice_differently_is_bad() -> None:
    # `run --jobs` routes a line by its first "url" and "host"; a decoder keeps the last.
    for line in (
        b'{"url": "https://a.example/1", "host": "a.example", "html": "<p>x</p>", "host": "b.example"}',
        b'{"url": "https://a.example/1", "host": "a.example", "html": "<p>x</p>", "url": "https://b.example/"}',
    ):
        dead = decode_record(line, "f:1")
        assert isinstance(dead, DeadPage) and dead.reason == "bad_record" and "twice" in dead.detail
    same = b'{"url": "https://a.example/1", "host": "a.example", "html": "<p>x</p>", "host": "a.example"}'
    assert isinstance(decode_record(same, "f:1"), RawPage)


def test_undecoded_lines_carry_the_host_their_record_decodes_to(tmp_path: Path) -> None:
    lines = [
        b'{"url": "https://A.example/1", "host": "A.Example", "html": "<p>one</p>"}',  # routed
        b'{"url":"https://a.example/\\u0032","host":"a.example","html":"<p>two</p>"}',  # escapes, no spaces
        b'{"html": "<p>three</p>", "url": "https://c.example/3", "host": "c.example"}',  # other order: decoded
        b'{"url": "https://d.example/4", "html": "<p>four</p>"}',  # no host field: decoded
        b'{"url": "https://a.example/5", "host": "a.example", "html": 5}',  # routed; a dead letter once decoded
        b'{"url": "no-host-here", "host": "x", "html": "<p>x</p>"}',  # no page's URL: decoded
    ]
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(iter_inputs([path], undecoded=True))
    kinds = ["Undecoded", "Undecoded", "RawPage", "RawPage", "Undecoded", "DeadPage"]
    assert [type(i).__name__ for i in items] == kinds
    for item, line in zip(items, lines, strict=True):
        if isinstance(item, Undecoded):
            assert item.line == line and item.host == route_host(line)
            decoded = decode_record(item.line, item.source)
            assert not isinstance(decoded, RawPage) or decoded.host == item.host
    assert [i.host for i in items if isinstance(i, Undecoded)] == ["a.example", "a.example", "a.example"]
    # Decoded, the items are what the plain reader yields.
    plain = list(iter_inputs([path]))
    assert [decode_record(i.line, i.source) if isinstance(i, Undecoded) else i for i in items] == plain


def test_jsonl_empty_html_is_passed_on_for_the_pipeline_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"url": "https://a.example/1", "html": ""}\n')
    (page,) = iter_inputs([path])
    assert isinstance(page, RawPage) and page.html == ""


def test_jsonl_body_b64_is_decoded_with_its_charset(tmp_path: Path) -> None:
    html = "<p>Grüße, café – “quoted”</p>"
    path = tmp_path / "p.jsonl"
    recs = [
        {
            "url": "https://a.example/1",
            "body_b64": base64.b64encode(html.encode("cp1252")).decode(),
            "content_type": "text/html; charset=windows-1252",
        },
        {"url": "https://a.example/2", "body_b64": base64.b64encode(html.encode()).decode()},
        {"url": "https://a.example/3", "body_b64": base64.b64encode(b"\x89PNG").decode(), "content_type": "image/png"},
        {"url": "https://a.example/4", "body_b64": "!!not base64!!"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = list(iter_inputs([path]))
    assert [p.html for p in pages(out)] == [html, html]
    assert [(d.reason, d.url) for d in dead(out)] == [
        ("not_html", "https://a.example/3"),
        ("bad_record", "https://a.example/4"),
    ]


def test_truncated_gzip_gives_one_dead_record_then_the_next_input(tmp_path: Path) -> None:
    site = make_site("a.example", 40)
    whole = write_jsonl(site, tmp_path / "whole.jsonl.gz", gz=True).read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    after = write_jsonl([make_page(url="https://b.example/1", host="b.example")], tmp_path / "after.jsonl")
    out = list(iter_inputs([cut, after]))
    good = pages(out)
    assert 0 < len(good) < 40 + 1
    assert good[-1].host == "b.example"
    assert [p.url for p in good[:-1]] == [s.page.url for s in site[: len(good) - 1]]
    (broken,) = dead(out)
    assert broken.reason == "unreadable_input" and broken.source.startswith(str(cut))


# -- WARC -------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_warc_yields_html_responses_only_in_order(tmp_path: Path, gz: bool) -> None:
    records = [
        warc_record("https://a.example/", b"", warc_type="warcinfo", content_type="application/warc-fields"),
        warc_record("https://a.example/1", b"", warc_type="request"),
        warc_record("https://a.example/1", b"<html><body><p>one</p></body></html>"),
        warc_record("https://a.example/logo.png", b"\x89PNG\r\n", content_type="image/png"),
        warc_record("https://a.example/old", b"<p>moved</p>", status=301, extra_http="Location: /new\r\n"),
        warc_record("https://a.example/missing", b"<p>not found</p>", status=404),
        warc_record("https://A.Example:443/2", b"<p>two</p>", content_type="application/xhtml+xml"),
        warc_record("https://a.example/3", b"<p>three</p>", content_type=None),  # no type: let the parser judge
        warc_record("https://b.example/res", b"<p>resource</p>", warc_type="resource", content_type="text/html"),
        warc_record("https://b.example/meta", b"k: v", warc_type="metadata", content_type="text/plain"),
    ]
    path = write_warc(tmp_path / ("a.warc.gz" if gz else "a.warc"), records, gz=gz)
    out = list(iter_inputs([path]))
    assert not dead(out)
    assert [(p.url, p.host) for p in out] == [
        ("https://a.example/1", "a.example"),
        ("https://A.Example:443/2", "a.example"),
        ("https://a.example/3", "a.example"),
        ("https://b.example/res", "b.example"),
    ]
    assert out[0].html == "<html><body><p>one</p></body></html>"
    offsets = [int(p.source.rsplit("@", 1)[1]) for p in out]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4
    assert all(p.source.startswith(f"{path}@") for p in out)


def test_warc_offsets_point_at_the_records(tmp_path: Path) -> None:
    records = [warc_record(f"https://a.example/{i}", f"<p>{i}</p>".encode()) for i in range(3)]
    path = write_warc(tmp_path / "a.warc", records)
    starts = [sum(len(r) for r in records[:i]) for i in range(3)]
    assert [p.source for p in iter_inputs([path])] == [f"{path}@{s}" for s in starts]


def test_warc_gzip_content_encoding_is_undone(tmp_path: Path) -> None:
    body = gzip.compress(b"<p>zipped page</p>")
    rec = warc_record("https://a.example/z", body, extra_http="Content-Encoding: gzip\r\n")
    (page,) = iter_inputs([write_warc(tmp_path / "z.warc", [rec])])
    assert isinstance(page, RawPage) and page.html == "<p>zipped page</p>"


def test_warc_undecodable_body_is_dead(tmp_path: Path) -> None:
    # A UTF-8 BOM followed by bytes that are not UTF-8: no charset may override a BOM.
    rec = warc_record("https://a.example/bad", b"\xef\xbb\xbf<p>\xff\xfe\xfd</p>", content_type="text/html")
    ok = warc_record("https://a.example/ok", b"<p>fine</p>")
    out = list(iter_inputs([write_warc(tmp_path / "u.warc", [rec, ok])]))
    assert [type(p).__name__ for p in out] == ["DeadPage", "RawPage"]
    assert out[0].reason == "undecodable" and out[0].url == "https://a.example/bad"
    assert out[0].host == "a.example" and "@0" in out[0].source


# -- charsets ---------------------------------------------------------------------------


FRENCH = "<p>Déjà vu – “l’été” € œuvre</p>"
JAPANESE = "<p>日本語のページです。テンプレート</p>"


def test_charset_from_http_header(tmp_path: Path) -> None:
    recs = [
        warc_record("https://a.example/1", FRENCH.encode("cp1252"), "text/html; charset=windows-1252"),
        warc_record("https://a.example/2", FRENCH.encode("cp1252"), "text/html; charset=ISO-8859-1"),
        warc_record("https://a.example/3", JAPANESE.encode("shift_jis"), 'text/html; charset="Shift_JIS"'),
        warc_record("https://a.example/4", JAPANESE.encode("euc_jp"), "text/html;charset=euc-jp"),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "c.warc", recs)]))
    # ISO-8859-1 is read as windows-1252, as browsers do: the curly quotes and € survive.
    assert [p.html for p in out] == [FRENCH, FRENCH, JAPANESE, JAPANESE]


def test_charset_from_meta_when_the_header_has_none(tmp_path: Path) -> None:
    meta_html5 = '<html><head><meta charset="shift_jis"></head><body>' + JAPANESE + "</body></html>"
    meta_http_equiv = (
        '<html><head><META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=windows-1252">'
        "</head><body>" + FRENCH + "</body></html>"
    )
    recs = [
        warc_record("https://a.example/1", meta_html5.encode("shift_jis"), "text/html"),
        warc_record("https://a.example/2", meta_http_equiv.encode("cp1252"), "text/html"),
    ]
    out = list(iter_inputs([write_warc(tmp_path / "m.warc", recs)]))
    assert [p.html for p in out] == [meta_html5, meta_http_equiv]


def test_meta_charset_beyond_2kb_is_ignored() -> None:
    russian = "<p>Привет, мир</p>"
    early = ('<meta charset="koi8-r">' + russian).encode("koi8_r")
    late = ("<!-- " + "x" * 2100 + " -->" + '<meta charset="koi8-r">' + russian).encode("koi8_r")
    assert decode_html(early) == early.decode("koi8_r")
    # Not found in the first 2 KB: UTF-8 fails, cp1252 decodes (to mojibake), as specified.
    assert decode_html(late) == late.decode("cp1252") != late.decode("koi8_r")


def test_bom_overrides_declarations() -> None:
    html = "<p>BOM wins: ñ</p>"
    assert decode_html(b"\xef\xbb\xbf" + html.encode(), "windows-1252") == html
    assert decode_html(b"\xff\xfe" + html.encode("utf-16-le"), "utf-8") == html
    assert decode_html(b"\xfe\xff" + html.encode("utf-16-be")) == html


def test_utf8_default_and_cp1252_fallback() -> None:
    assert decode_html(FRENCH.encode()) == FRENCH
    assert decode_html(FRENCH.encode("cp1252")) == FRENCH
    # A wrong declaration falls back to the defaults rather than killing the page.
    assert decode_html(FRENCH.encode(), "shift_jis") == FRENCH
    assert decode_html(FRENCH.encode(), "no-such-charset") == FRENCH
    # 0x81 is undefined in Python's cp1252; WHATWG's windows-1252 maps it to U+0081, as browsers do.
    assert decode_html(b"<p>\x81\x81</p>") == "<p>\x81\x81</p>"
    # A BOM is a promise: bytes that are mostly not UTF-8 after it are not text.
    assert decode_html(b"\xef\xbb\xbf<p>\xff\xfe\xfd</p>") is None


# -- folders of HTML --------------------------------------------------------------------


def test_folder_walk_is_sorted_and_recursive_with_folder_host(tmp_path: Path) -> None:
    root = tmp_path / "My.Site"
    (root / "b").mkdir(parents=True)
    (root / "a").mkdir()
    (root / ".hidden").mkdir()
    for rel in ["z.html", "b/2.htm", "b/1.html", "a/x.HTML", "m.html", ".hidden/h.html", "notes.txt", "a/img.png"]:
        (root / rel).write_text(f"<p>{rel}</p>")
    out = list(iter_inputs([root]))
    rels = [Path(p.source).relative_to(root).as_posix() for p in out]
    assert rels == ["m.html", "z.html", "a/x.HTML", "b/1.html", "b/2.htm"]
    assert {p.host for p in out} == {"my.site"}
    assert out[0].url == (root / "m.html").resolve().as_uri() and out[0].url.startswith("file:///")
    assert estimate_total([root]) == 5


def test_a_folder_without_html_says_so_and_names_its_crawl_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "segments"
    (root / "day2").mkdir(parents=True)
    write_jsonl([make_page()], root / "day2" / "b.jsonl")
    write_warc(root / "a.2024.warc.gz", [warc_record("https://w.example/", b"<p>x</p>")])
    (root / "notes.txt").write_text("x")
    with caplog.at_level("WARNING", logger="detemplate.io.sources"):
        assert list(iter_inputs([root])) == []
    message = caplog.records[-1].getMessage()
    assert "no .html or .htm files, but 2 WARC or JSONL file(s)" in message
    assert f"such as {root / 'a.2024.warc.gz'}" in message and f"{root / '*.warc.gz'}" in message
    caplog.clear()
    with caplog.at_level("WARNING", logger="detemplate.io.sources"):
        assert list(iter_inputs([tmp_path / "segments" / "day2"])) == []
        (root / "day2" / "p.html").write_text("<p>a page</p>")
        assert len(list(iter_inputs([root]))) == 1
    assert [r.getMessage().split(": ")[0] for r in caplog.records] == [
        f"folder {root / 'day2'} holds no .html or .htm files, but 1 WARC or JSONL file(s), such as "
        f"{root / 'day2' / 'b.jsonl'}"
    ]


def test_folder_files_are_decoded_by_meta_and_fallback(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    sjis = '<meta charset="shift_jis">' + JAPANESE
    (root / "1.html").write_bytes(sjis.encode("shift_jis"))
    (root / "2.html").write_bytes(FRENCH.encode("cp1252"))
    (root / "3.html").write_bytes(b"\xef\xbb\xbf<p>\xff\xfe\xfd</p>")
    out = list(iter_inputs([root]))
    assert [p.html for p in pages(out)] == [sjis, FRENCH]
    assert [(d.reason, d.host) for d in dead(out)] == [("undecodable", "site")]


def test_single_html_file_takes_its_parent_folder_as_host(tmp_path: Path) -> None:
    (tmp_path / "docs.example").mkdir()
    f = tmp_path / "docs.example" / "index.html"
    f.write_text("<p>x</p>")
    (page,) = iter_inputs([f])
    assert isinstance(page, RawPage) and page.host == "docs.example"


# -- mixed inputs, errors, estimates ----------------------------------------------------


def test_mixed_inputs_in_the_order_given(tmp_path: Path) -> None:
    folder = tmp_path / "folder.example"
    folder.mkdir()
    (folder / "a.html").write_text("<p>folder page</p>")
    jl = write_jsonl([make_page(url="https://j.example/1", host="j.example")], tmp_path / "j.jsonl.gz", gz=True)
    warc = write_warc(tmp_path / "w.warc.gz", [warc_record("https://w.example/1", b"<p>w</p>")], gz=True)
    out = list(iter_inputs([str(warc), folder, jl, warc]))
    assert [p.host for p in out] == ["w.example", "folder.example", "j.example", "w.example"]


def test_unknown_names_are_sniffed(tmp_path: Path) -> None:
    jl = tmp_path / "pages.dump"
    jl.write_text(json.dumps({"url": "https://s.example/", "html": "<p>s</p>"}) + "\n")
    warc = write_warc(tmp_path / "crawl.bin", [warc_record("https://w.example/1", b"<p>w</p>")], gz=True)
    assert [p.host for p in iter_inputs([jl, warc])] == ["s.example", "w.example"]


def test_missing_or_unknown_inputs_raise_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        list(iter_inputs([tmp_path / "nope.jsonl"]))
    other = tmp_path / "data.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="unknown file type"):
        list(iter_inputs([other]))
    with pytest.raises(ConfigError):
        estimate_total([other])


def test_permission_denied_raises_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Denied by the OS call itself: a chmod test would pass vacuously as root, which reads every file.
    import detemplate.io.sources

    f = write_jsonl([make_page()], tmp_path / "locked.jsonl")

    def denied(path: object, *args: object, **kwargs: object) -> object:
        if Path(str(path)) == f:
            raise PermissionError(13, "Permission denied")
        return open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(detemplate.io.sources, "open", denied, raising=False)
    with pytest.raises(ConfigError, match=r"cannot read input .*Permission denied"):
        iter_inputs([f])


def test_a_bad_path_fails_at_the_call_before_any_page_is_read(tmp_path: Path) -> None:
    good = write_jsonl([make_page()], tmp_path / "good.jsonl")
    with pytest.raises(ConfigError, match=r"missing\.warc"):
        iter_inputs([good, tmp_path / "missing.warc"])  # not even iterated


def test_estimate_total_extrapolates_big_plain_jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import detemplate.io.sources

    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"url": "https://a.example/", "html": "<p>x</p>"}\n' * 1000)
    monkeypatch.setattr(detemplate.io.sources, "_COUNT_BYTES", 1 << 20)  # reads whole 1 MB chunks: exact
    assert estimate_total([path]) == 1000
    path.write_bytes(path.read_bytes() * 60)  # 60000 lines, about 3 MB
    estimate = estimate_total([path])
    assert estimate is not None and abs(estimate - 60_000) <= 600


def test_estimate_total(tmp_path: Path) -> None:
    site = make_site("a.example", 9)
    plain = write_jsonl(site, tmp_path / "a.jsonl")
    assert estimate_total([plain]) == 9
    no_final_newline = tmp_path / "b.jsonl"
    no_final_newline.write_bytes(plain.read_bytes().rstrip(b"\n"))
    assert estimate_total([plain, no_final_newline]) == 18
    gz = write_jsonl(site, tmp_path / "a.jsonl.gz", gz=True)
    assert estimate_total([plain, gz]) is None
    warc = write_warc(tmp_path / "w.warc", [warc_record("https://w.example/1", b"<p>w</p>")])
    assert estimate_total([warc]) is None


def test_a_fifo_is_not_an_input(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a file or folder"):
        list(iter_inputs([fifo]))


@pytest.mark.parametrize("encoded", [False, True])
def test_warc_truncated_last_record_is_dead_not_a_partial_page(tmp_path: Path, encoded: bool) -> None:
    words = random.Random(4).choices(["alpha", "beta", "gamma", "delta", "omega"], k=400)
    body = b"<html><body><p>" + " ".join(words).encode() + b"</p><footer>the footer</footer></body></html>"
    extra = ""
    if encoded:
        body, extra = gzip.compress(body), "Content-Encoding: gzip\r\n"
    first = warc_record("https://a.example/0", b"<p>zero</p>")
    last = warc_record("https://a.example/1", body, extra_http=extra)
    path = tmp_path / "t.warc"
    path.write_bytes(first + last[:-60])
    out = list(iter_inputs([path]))
    assert isinstance(out[0], RawPage)
    assert [(d.reason, d.url) for d in dead(out)] == [("truncated", "https://a.example/1")]


# -- bounded reading of JSONL -------------------------------------------------------------------

SMALL = 64 << 10  # pages of at most 64 KB: a line over 6 x 64 KB + 1 MB is skipped unread


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_over_the_limit_is_skipped_unread_and_the_next_line_read(tmp_path: Path, gz: bool) -> None:
    from tests.io.archives import gzip_stream

    good = json.dumps({"url": "https://a.example/ok", "html": "<p>ok</p>"}).encode()
    head = b'{"url": "https://a.example/big", "html": "'
    path = tmp_path / ("big.jsonl.gz" if gz else "big.jsonl")
    size = 40 << 20
    if gz:
        path.write_bytes(gzip_stream(size, b"x", prefix=good + b"\n" + head, suffix=b'"}\n' + good + b"\n"))
    else:
        path.write_bytes(good + b"\n" + head + b"x" * size + b'"}\n' + good + b"\n")
    out = list(iter_inputs([path], max_page_bytes=SMALL))
    assert [type(p).__name__ for p in out] == ["RawPage", "DeadPage", "RawPage"]
    big = out[1]
    assert isinstance(big, DeadPage) and big.reason == "too_large" and big.source == f"{path}:2"
    assert f"{size + len(head) + 2:,} bytes" in big.detail  # the line without its newline
    assert out[2].source == f"{path}:3"


def test_gigabytes_of_blank_lines_are_passed_over_a_piece_at_a_time(tmp_path: Path) -> None:
    from tests.io.archives import gzip_stream

    good = json.dumps({"url": "https://a.example/ok", "html": "<p>ok</p>"}).encode()
    path = tmp_path / "blank.jsonl.gz"
    blank = 256 << 20  # 256 MB of newlines here; scripts/hostile_inputs.py runs 2 GB
    path.write_bytes(gzip_stream(blank, b"\n", prefix=b"  \t\n", suffix=good + b"\n"))
    (page,) = iter_inputs([path])
    assert isinstance(page, RawPage) and page.source == f"{path}:{blank + 2}"


def test_lines_split_across_reads_keep_their_numbers() -> None:
    from detemplate.io.stream import iter_lines

    pieces = [b'{"a":1}\n\n  \n{"b"', b":2}\n{x}\r\n", b"\n\n", b"last"]
    assert list(iter_lines(iter(pieces), 100)) == [(1, b'{"a":1}'), (4, b'{"b":2}'), (5, b"{x}\r"), (8, b"last")]
    assert list(iter_lines(iter([b"a" * 50, b"a" * 60, b"\nok\n"]), 100)) == [(1, 110), (2, b"ok")]
    assert list(iter_lines(iter([b"x" * 150, b"\n\n  y\n"]), 100)) == [(1, 150), (3, b"  y")]


def test_a_pages_meta_rides_through_pages_raw(tmp_path: Path) -> None:
    """`detemplate produce` sends a WARC page's date and record with it; the worker's decoder reads them back."""
    from detemplate.io.sources import decode_record
    from detemplate.stream.kafka_io import encode_raw

    rec = warc_record("https://m.example/", b"<p>m</p>", record_id="<urn:uuid:7>")
    (page,) = iter_inputs([write_warc(tmp_path / "m.warc.gz", [rec], gz=True)])
    assert isinstance(page, RawPage) and page.meta["warc_record_id"] == "<urn:uuid:7>"
    again = decode_record(encode_raw(page), "pages.raw/0/0")
    assert isinstance(again, RawPage)
    assert (again.url, again.host, again.html, dict(again.meta)) == (page.url, page.host, page.html, dict(page.meta))


# Records on which orjson and json.loads could part ways: lone surrogates escaped and encoded,
# a BOM, UTF-16, NaN, integers past 64 bits (orjson reads them as floats), duplicate keys, deep
# nesting, invalid UTF-8, meta fields of the wrong type.
TRICKY_RECORDS = [
    b'{"url": "https://a.example/1", "html": "<p>\\ud800 lone</p>"}',
    b'{"url": "https://a.example/2", "html": "<p>\xed\xa0\x80 encoded</p>"}',
    b'{"url": "https://a.example/3", "html": "<p>\\ud83d\\ude00 pair, caf\xc3\xa9</p>"}',
    b'\xef\xbb\xbf{"url": "https://a.example/4", "html": "<p>bom</p>"}',
    '{"url": "https://a.example/5", "html": "<p>utf-16</p>"}'.encode("utf-16"),
    b'{"url": "https://a.example/6", "html": "<p>x</p>", "warc_offset": NaN}',
    b'{"url": "https://a.example/7", "html": "<p>x</p>", "warc_offset": 123456789012345678901234567890}',
    b'{"url": "https://a.example/8", "html": "<p>x</p>", "v": 123456789012345678901234567890}',
    b'{"url": "https://a.example/9", "html": "<p>x</p>", "v": 1.0}',
    b'{"url": "https://a.example/10", "html": "<p>first</p>", "html": "<p>last</p>"}',
    b'{"url": "https://a.example/11", "html": "<p>x</p>", "deep": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"url": "https://a.example/12", "html": "<p>\xff</p>"}',
    b'{"url": "https://a.example/13", "html": "<p>x</p>", "warc_offset": 1e400}',
    b'{"url": "https://a.example/\\udc00", "html": "<p>x</p>"}',
    b'123456789012345678901234567890',
    b'[1, 2]',
    b'{"url": "https://a.example/17", "body_b64": "PHA+eDwvcD4=", "content_type": "text/html"}',
]


@pytest.mark.parametrize("line", TRICKY_RECORDS, ids=range(len(TRICKY_RECORDS)))
def test_decode_record_is_the_same_with_or_without_orjson(line: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from detemplate.io import codec
    from detemplate.io.sources import decode_record

    assert codec._orjson is not None  # a dependency: the fast path is the one measured
    fast = decode_record(line, "t:1")
    monkeypatch.setattr(codec, "_orjson", None)
    plain = decode_record(line, "t:1")
    assert type(fast) is type(plain)
    if isinstance(fast, RawPage):
        assert isinstance(plain, RawPage)
        assert (fast.url, fast.host, fast.html) == (plain.url, plain.host, plain.html)
        assert dict(fast.meta) == dict(plain.meta)
        assert "\ud800" not in fast.html and "\udc00" not in fast.html  # lone surrogates made U+FFFD either way
    else:
        assert fast == plain


def test_codec_loads_says_which_strings_are_known_free_of_lone_surrogates(monkeypatch: pytest.MonkeyPatch) -> None:
    from detemplate.io import codec

    assert codec.loads('{"html": "caf\u00e9"}'.encode()) == ({"html": "caf\u00e9"}, True)
    assert codec.loads(b'{"html": "\\ud800"}') == ({"html": "\ud800"}, False)  # json.loads read it
    assert codec.loads(b'{"n": 123456789012345678901234567890}') == ({"n": 123456789012345678901234567890}, False)
    with pytest.raises(ValueError):
        codec.loads(b'{"html": ')
    monkeypatch.setattr(codec, "_orjson", None)
    assert codec.loads('{"html": "caf\u00e9"}'.encode()) == ({"html": "caf\u00e9"}, False)
