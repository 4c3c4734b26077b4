"""The absolute URLs of a page's links: its base URL and each href resolved, as urljoin would.

The clean page lists the links of its content blocks and of its template blocks
(`pipeline.split_links`); the batch pagelet tools resolve the links inside pagelets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from .page import compiled
from .page.meta import base_hrefs


def base_url(tree: LexborHTMLParser, url: str) -> str:
    """The URL relative links resolve against: the first `<base href>` (itself resolved) or the page URL.

    Looked for among the children of the head, where the parser puts a valid one, and of
    the body, where archived pages carry one after an inserted toolbar. Measured: a CSS
    query over the whole tree costs 170 us a page, `tags("base")` 77 us, searching the
    HTML text for "<base" 50 us; these two short child lists under 10 us, read in C
    (page/meta.py `base_hrefs`) under 1 us.
    """
    for href in base_hrefs(tree):
        href = (href or "").strip()
        if href:
            return urljoin(url, href)
    return url


def resolve(base: str, href: str) -> str | None:
    """Absolute http(s) URL of a link without its fragment; None for in-page, mailto:, javascript: links."""
    href = href.strip()
    if not href or href[0] == "#":
        return None
    try:
        absolute = urljoin(base, href)
    except ValueError:
        return None
    if not absolute.startswith(("http://", "https://")):
        return None
    return urldefrag(absolute)[0]


def _remove_dots(path: str) -> str:
    """RFC 3986 remove_dot_segments on an absolute path (what urljoin does to `.` and `..`)."""
    out: list[str] = []
    segs = path.split("/")
    for seg in segs:
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segs[-1] in (".", ".."):
        out.append("")
    return "/".join(out)


def absolute_links(base: str, hrefs: Iterable[str]) -> list[str]:
    """`resolve` over many hrefs, distinct, in first-seen order.

    Measured: urllib's urljoin costs about 7 us a link, over a millisecond on a
    documentation page with 180 relative links; the common shapes (absolute, root-relative,
    path-relative) are joined here directly, with urljoin's results (tests compare them).
    A host's pages repeat most of their links (the template's): results that depend only
    on the base's origin and directory are kept in a bounded cache. Where the page walk is
    compiled, the loop and the commonest shapes are too (page/_walk.pyx `absolute_links`,
    probe-checked against `absolute_links_python`, the reference).
    """
    return _absolute_links(base, hrefs, links_kernel())


def _absolute_links(base: str, hrefs: Iterable[str], kernel: Any) -> list[str]:
    """`absolute_links` by the extension module `kernel`, or in Python where it is None."""
    parts = urlsplit(base)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return []
    origin = f"{scheme}://{parts.netloc}"
    base_path = parts.path or "/"
    base_dir = base_path[: base_path.rfind("/") + 1]
    where = origin + base_dir

    def resolve_one(href: str) -> str | None:
        # Absolute and root-relative links resolve the same from every page of the origin,
        # relative ones from every page in the same directory.
        url = _RESOLVED.get((origin, href), _MISS)
        if url is _MISS:
            url = _RESOLVED.get((where, href), _MISS)
        if url is _MISS:
            url, reuse = _resolve_href(href, base, scheme, origin, base_path, base_dir)
            if reuse and len(href) <= _RESOLVED_MAX_CHARS:
                if len(_RESOLVED) >= _RESOLVED_MAX:
                    _RESOLVED.clear()
                _RESOLVED[(origin if reuse == _ORIGIN else where, href)] = url
        return url  # type: ignore[no-any-return]  # a str or None, as cached

    if kernel is None:
        return absolute_links_python(hrefs, resolve_one)
    # The compiled loop joins path-relative links to `where` only when the base directory
    # holds no dot segment (else they go to resolve_one, as do all uncommon shapes).
    plain = base_dir.startswith("/") and "/." not in base_dir
    return kernel.absolute_links(hrefs, origin, where if plain else None, resolve_one)  # type: ignore[no-any-return]


def absolute_links_python(hrefs: Iterable[str], resolve_one: Callable[[str], str | None]) -> list[str]:
    """Each distinct href's URL by `resolve_one`, the URLs distinct, in first-seen order
    (the reference for page/_walk.pyx `absolute_links`)."""
    seen: set[str] = set()
    out: list[str] = []
    for href in dict.fromkeys(hrefs):  # a page repeats hrefs: each distinct one once
        url = resolve_one(href)
        if url is not None and url not in seen:
            seen.add(url)
            out.append(url)
    return out


# Every shape of href the compiled loop tells apart, against bases with and without dot
# segments in their directory: the probe it must agree with absolute_links_python on.
PROBE_BASES = ("https://h.example/d/e/p.html", "http://h.example:8080", "https://h.example/d/./x/?q=1")
PROBE_HREFS = (
    "a.html", "./a.html", "../a.html", "b/../c/./d.html", "c/.hidden", "d..e/f", ".x", "g?h=../i", "?q=1", "?",
    "a?", "/", "/r", "/r/../s", "/r?", "/r?x?", "/r#f", "//o.example/p/../q", "https://o.example/a/b?c=d",
    "http://o.example", "http://o.example?", "https://o.example/#x", "HTTPS://O.example/Z", "http:/x", "https:x",
    "mailto:x@y", "javascript:void(0)", "x:y/z", "x/y:z", "x?y:z", "#top", "#", "", " ", " /lead", "/trail ",
    "\u00a0/nbsp", "a\tb", "a\nb#c\n", "x#y\tz", "/caf\u00e9", "/\U0001f600/x", "r\u00e9l/x", "a", "a", "/",
)


def checked_links(mod: Any) -> Any:
    """`mod` when its `absolute_links` gives `absolute_links_python`'s results on the probe
    hrefs, else None (then the Python loop runs)."""
    return compiled.agreeing(mod, ("absolute_links",), _links_agree)


def _links_agree(mod: Any) -> bool:
    return all(
        _absolute_links(base, hrefs, mod) == _absolute_links(base, hrefs, None)
        for base in PROBE_BASES
        for hrefs in (PROBE_HREFS, *[[href] for href in PROBE_HREFS])
    )


def links_kernel() -> Any:
    """The extension module where its `absolute_links` is in use, else None; chosen once,
    on first use, with the page walk."""
    return compiled.checked(checked_links)


_MISS = object()
_ORIGIN, _DIRECTORY = 1, 2  # what besides the href decided a link's URL (0: the whole base)
_RESOLVED: dict[tuple[str, str], Any] = {}  # (origin + base directory, href) -> URL or None
_RESOLVED_MAX = 1 << 16
_RESOLVED_MAX_CHARS = 512


def _resolve_href(
    href: str, base: str, scheme: str, origin: str, base_path: str, base_dir: str
) -> tuple[str | None, int]:
    """One href's absolute URL (None: not a page link), and what of the base decided it:
    _ORIGIN, _DIRECTORY, or 0 (more: the page's path or the whole base)."""
    href = href.strip()
    if not href or href[0] == "#":
        return None, _ORIGIN
    if "\n" in href or "\t" in href or "\r" in href:
        href = href.replace("\n", "").replace("\t", "").replace("\r", "")  # as browsers do
    cut = href.find("#")
    if cut >= 0:
        href = href[:cut]
    reuse = _ORIGIN
    if href.startswith(("https://", "http://")):
        url = href
    else:
        colon = href.find(":")
        if colon >= 0 and not any(c in href[:colon] for c in "/?"):
            # A scheme of its own: http(s) in capitals goes through urljoin, others are no page links.
            if href[:colon].lower() not in ("http", "https"):
                return None, _ORIGIN
            try:
                url = urljoin(base, href)
            except ValueError:
                return None, 0
            reuse = 0
        elif href.startswith("//"):
            url = f"{scheme}:{href}"
        else:
            if href[0] == "/":
                path = href
            elif href[0] == "?":
                path = base_path + href
                reuse = 0
            else:
                path = base_dir + href
                reuse = _DIRECTORY
            if "." in path:
                q = path.find("?")
                head, tail = (path, "") if q < 0 else (path[:q], path[q:])
                if "/." in head or head.startswith("."):
                    path = _remove_dots(head) + tail
            url = origin + path
    if url[-1] == "?" and url.find("?") == len(url) - 1:
        url = url[:-1]  # an empty query, as urljoin drops it
    return url, reuse
