"""detemplate.io.urls: page URLs and hosts checked with a real URL parser and IDNA, in the
decoder that `run` and the stream worker share."""

from __future__ import annotations

import json

import pytest
from detemplate.engine.model import DeadPage, RawPage
from detemplate.io.sources import decode_record
from detemplate.io.urls import UrlError, check_page_url, normalise_host


def decoded(url: str, host: str | None = None) -> RawPage | DeadPage:
    rec: dict[str, str] = {"url": url, "html": "<p>x</p>"}
    if host is not None:
        rec["host"] = host
    return decode_record(json.dumps(rec).encode(), "t:1")


@pytest.mark.parametrize(
    ("url", "host", "reason"),
    [
        ("https://a b.example/", None, "bad_host"),
        ("https://a.example/", "a b.example", "bad_host"),
        ("https://a\x00b.example/", None, "bad_url"),
        ("https://a.example/", "a\x00b.example", "bad_host"),
        ("https://a.example/" + "x" * (20 << 20), None, "bad_url"),
        ("//nohost/page", None, "bad_url"),
        ("/relative/page", "a.example", "bad_url"),
        ("https://a.example:99999/", None, "bad_url"),
        ("https://a.example:-1/", None, "bad_url"),
        ("ftp://a.example/file", None, "bad_url"),
        ("mailto:someone@a.example", None, "bad_url"),
        ("https:///no-host", None, "bad_url"),
        ("https://sur.example/\udfff", None, "bad_url"),
        ("https://a.example/", "sur\udfff.example", "bad_host"),
        ("https://a.example/line\nbreak", None, "bad_url"),
        ("https://a..example/", None, "bad_host"),
        ("https://" + "a" * 64 + ".example/", None, "bad_host"),
        ("https://" + ("abcdefghi." * 26) + "example/", None, "bad_host"),
        ("https://a%2fb.example/", None, "bad_host"),
        ("https://xn--a.example/", None, "bad_host"),  # not a valid A-label
        ("https://a.example/", "a/b.example", "bad_host"),
    ],
)
def test_bad_urls_and_hosts_are_dead_letters_with_a_reason(url: str, host: str | None, reason: str) -> None:
    got = decoded(url, host)
    assert isinstance(got, DeadPage), got
    assert got.reason == reason and got.detail
    assert len(got.detail) < 400  # a 20 MB URL is not repeated in the detail
    got.detail.encode("utf-8")  # and the detail is always encodable (lone surrogates escaped)


@pytest.mark.parametrize(
    ("url", "host", "expected"),
    [
        ("https://WWW.Example.COM:8443/a?b=1", None, "www.example.com"),
        ("https://user:pw@a.example/", None, "a.example"),
        ("http://[::1]:8080/", None, "::1"),
        ("http://192.0.2.7/", None, "192.0.2.7"),
        ("https://my_host.example/", None, "my_host.example"),  # browsers reach underscores; IDNA would refuse
        ("https://example.com./", None, "example.com"),
        ("https://Bücher.Example/", None, "xn--bcher-kva.example"),
        ("https://xn--bcher-kva.example/", None, "xn--bcher-kva.example"),
        ("https://例え.テスト/", None, "xn--r8jz45g.xn--zckzah"),
        ("https://a.example/", "  Given.HOST ", "given.host"),
        ("https://a.example/a path with spaces", None, "a.example"),
        ("HTTPS://A.EXAMPLE/", None, "a.example"),
    ],
)
def test_good_hosts_are_normalised_as_browsers_do(url: str, host: str | None, expected: str) -> None:
    got = decoded(url, host)
    assert isinstance(got, RawPage), got
    assert got.host == expected and got.url == url
    assert check_page_url(url, host) == expected


def test_one_site_one_table_whatever_the_spelling() -> None:
    spellings = ["Bücher.example", "bücher.example.", "XN--BCHER-KVA.example", "xn--bcher-kva.example"]
    assert {normalise_host(h) for h in spellings} == {"xn--bcher-kva.example"}


def test_url_error_is_a_bad_input_error() -> None:
    with pytest.raises(UrlError) as info:
        check_page_url("https://a.example:99999/")
    assert info.value.reason == "bad_url"
