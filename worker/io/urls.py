"""URL and host checks of every page that comes in (JSONL, WARC, ARC, pages.raw).

A page's host is the key of its segment table and of its Kafka partition, and its URL is
written into every output: both are checked before a page reaches the engine, with a
real URL parser (urllib.parse) and IDNA for host names (the ``idna`` package, UTS #46
mapping as the WHATWG URL standard's domain-to-ASCII does). `check_page_url` returns the
normalised host or raises `UrlError` with a reason code and one sentence:

- ``bad_url``: the URL is over MAX_URL_CHARS, holds a control character or a lone
  surrogate (no UTF-8 output can carry one), is not absolute
  ``http``/``https`` with a host (``//nohost``, ``/path``, ``mailto:``), or has a port that
  is not a number in 0-65535;
- ``bad_host``: the host (of the URL, or given with the record) is empty, over 253
  characters, has an empty label or one over 63 characters, holds a character no host
  may hold (space, NUL and other controls, ``/ \\ # ? @ : < > [ ] ^ |`` and ``%``: the
  WHATWG forbidden host code points), or is a non-ASCII name that IDNA refuses.

Hosts are normalised as browsers normalise them: lower-cased, without port, user info
or a trailing dot, non-ASCII names in their ASCII (``xn--``) form, so ``Bücher.Example``,
``bücher.example.`` and ``xn--bcher-kva.example`` are one site with one table. ASCII
labels are not put through IDNA's stricter rules (``my_host.example`` is a real host that
browsers reach), except ``xn--`` labels, which must decode. IPv6 literals keep their bracket-less form (``::1``).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

import idna

from ..engine.errors import BadInputError

# Longer than the request line most servers accept (Apache's LimitRequestLine 8,190,
# nginx's 8 KB header buffers): a longer URL could not have been fetched as written.
MAX_URL_CHARS = 8192
MAX_HOST_CHARS = 253  # DNS: 255 octets on the wire, 253 characters written
MAX_LABEL_CHARS = 63
SCHEMES = frozenset({"http", "https"})

# C0 controls, space and DEL anywhere in a URL (browsers strip or escape them; a crawler
# that wrote one raw wrote something broken), and lone surrogates (no UTF-8 form).
_URL_BAD = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
# WHATWG forbidden host code points, plus "%" (a percent-encoded host is decoded by
# browsers first; a crawler writes the decoded host) and every control.
_HOST_BAD = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|\ud800-\udfff]")


class UrlError(BadInputError):
    """A page URL or host that fails the checks above (reason ``bad_url`` or ``bad_host``)."""


def _show(text: str, limit: int = 60) -> str:
    """A value for an error sentence: repr'd (controls and surrogates escaped), cut."""
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")


def check_url(url: str) -> SplitResult:
    """The parsed URL; UrlError ``bad_url`` when it is not an absolute http(s) URL we can carry."""
    if len(url) > MAX_URL_CHARS:
        raise UrlError("bad_url", f"the URL has {len(url):,} characters, over the limit of {MAX_URL_CHARS:,}")
    bad = _URL_BAD.search(url)
    if bad is not None:
        raise UrlError(
            "bad_url", f"the URL holds {bad.group()!r} at character {bad.start():,}: {_show(url)}"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for its check: a port out of range raises ValueError)
    except ValueError as exc:
        raise UrlError("bad_url", f"the URL cannot be parsed ({exc}): {_show(url)}") from exc
    if parts.scheme not in SCHEMES:
        what = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise UrlError("bad_url", f"the URL has {what}, not http or https: {_show(url)}")
    if not parts.hostname:
        raise UrlError("bad_url", f"the URL has no host name: {_show(url)}")
    return parts


def normalise_host(host: str) -> str:
    """The host as a table key (see the module docstring); UrlError ``bad_host`` when it is not one."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if ":" in name and re.fullmatch(r"[0-9a-f:.]+", name):
        return name  # an IPv6 literal, as urlsplit gives it
    if name.endswith(".") and not name.endswith(".."):
        name = name[:-1]  # the root label: "example.com." is example.com
    if not name:
        raise UrlError("bad_host", "the host is empty")
    bad = _HOST_BAD.search(name)
    if bad is not None:
        raise UrlError("bad_host", f"the host holds {bad.group()!r}, which no host name may hold: {_show(host)}")
    try:
        if not name.isascii():
            name = idna.encode(name, uts46=True).decode("ascii")
        elif "xn--" in name:
            for label in name.split("."):
                if label.startswith("xn--"):
                    idna.decode(label)  # an A-label must decode, as browsers' domain-to-ASCII checks
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        raise UrlError("bad_host", f"the host is not a valid international name ({exc}): {_show(host)}") from exc
    if len(name) > MAX_HOST_CHARS:
        raise UrlError("bad_host", f"the host has {len(name):,} characters, over the limit of {MAX_HOST_CHARS}")
    for label in name.split("."):
        if not label or len(label) > MAX_LABEL_CHARS:
            raise UrlError(
                "bad_host", f"the host has an empty label or one over {MAX_LABEL_CHARS} characters: {_show(host)}"
            )
    return name


def check_page_url(url: str, host: str | None = None) -> str:
    """Check a page's URL (and its given host): the normalised host, from `host` when given, else the URL's."""
    parts = check_url(url)
    return normalise_host(parts.hostname or "" if host is None else host)


def host_of(url: str) -> str:
    """The URL's host name, normalised, or "" when the URL has none or fails the checks."""
    try:
        return check_page_url(url)
    except UrlError:
        return ""
