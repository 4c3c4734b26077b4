"""Page bytes to text, by the WHATWG encoding rules, as browsers decode a page.

The labels, their aliases and the BOM rule come from ``webencodings`` (the WHATWG
Encoding standard's label table in Python, used by html5lib, tinycss2 and WeasyPrint),
not from a table of ours: ``latin1``, ``iso-8859-1``, ``us-ascii`` and ``ascii`` mean
windows-1252, ``gb2312`` means GBK, ``x-sjis`` Shift_JIS, and an unknown label is no label.
The decoders are Python's, with the one gap that matters closed: Python's cp1252 leaves
0x81, 0x8D, 0x8F, 0x90 and 0x9D undefined where WHATWG's windows-1252 maps them to the C1
controls U+0081... (so a latin-1 page with a stray 0x81 decodes, as in a browser).

The encoding of a page is, as the HTML standard's sniffing algorithm picks it:

1. a byte order mark (UTF-8, UTF-16 LE/BE): it overrides every declaration;
2. the HTTP ``Content-Type`` charset;
3. the prescan: a ``<meta charset>`` or ``<meta http-equiv="Content-Type" content="...;
   charset=...">`` in the first 1,024 bytes, comments skipped (UTF-16 there means UTF-8,
   x-user-defined windows-1252, as the standard says);
4. no declaration: UTF-8 when the bytes are valid UTF-8, else windows-1252 (the
   standard's default for most locales; its optional autodetection step, reduced to
   the one test that is never wrong).

Bytes invalid in the chosen encoding are decoded as browsers decode them, each bad
sequence to U+FFFD, with one exception: a declared encoding the bytes break while they
are valid UTF-8 gives UTF-8 (a page re-saved as UTF-8 under its old declaration is
common in crawls, and reading it in the declared encoding would garble every non-ASCII
character). A page whose decoded text is more than MAX_REPLACEMENT_SHARE U+FFFD is not
text in any encoding: `decode_html` returns None (the ``undecodable`` dead letter).
"""

from __future__ import annotations

import codecs
import re

import webencodings  # type: ignore[import-untyped]  # webencodings ships no type stubs

MAX_REPLACEMENT_SHARE = 0.1  # over this share of U+FFFD, the bytes are not text
PRESCAN_BYTES = 1024  # the HTML standard's prescan reads this much

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16le"), (codecs.BOM_UTF16_BE, "utf-16be"))
_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';]+)""", re.IGNORECASE)
_COMMENT = re.compile(rb"<!--.*?(?:-->|$)", re.DOTALL)
_META = re.compile(rb"<meta[\s/]([^>]*)", re.IGNORECASE)
_ATTR = re.compile(rb"""([^\s/=>]+)\s*(?:=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_CONTENT_CHARSET = re.compile(rb"""charset\s*=\s*["']?\s*([^\s"';]+)""", re.IGNORECASE)

# WHATWG windows-1252 maps the five bytes cp1252 leaves undefined to U+0081, U+008D,
# U+008F, U+0090 and U+009D: the same code point as the byte, which is what this
# handler returns for them (and only for them: any other error is raised as it came).
_C1_BYTES = frozenset(b"\x81\x8d\x8f\x90\x9d")


def _c1_controls(exc: UnicodeError) -> tuple[str, int]:
    if isinstance(exc, UnicodeDecodeError) and all(b in _C1_BYTES for b in exc.object[exc.start : exc.end]):
        return "".join(map(chr, exc.object[exc.start : exc.end])), exc.end
    raise exc


codecs.register_error("detemplate-whatwg-c1", _c1_controls)


def charset_of(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type value, if any."""
    if not content_type:
        return None
    m = _CT_CHARSET.search(content_type)
    return m.group(1) if m else None


def prescan(data: bytes) -> str | None:
    """The charset label a `<meta>` in the first PRESCAN_BYTES declares, if any (comments skipped)."""
    head = _COMMENT.sub(b"", data[:PRESCAN_BYTES])
    for meta in _META.finditer(head):
        attrs: dict[bytes, bytes] = {}
        for m in _ATTR.finditer(meta.group(1)):
            name = m.group(1).lower()
            if name not in attrs:  # the first of a repeated attribute counts
                attrs[name] = m.group(2) or m.group(3) or m.group(4) or b""
        charset = attrs.get(b"charset")
        if charset:
            return charset.strip().decode("ascii", "replace")
        if attrs.get(b"http-equiv", b"").strip().lower() == b"content-type":
            found = _CONTENT_CHARSET.search(attrs.get(b"content", b""))
            if found:
                return found.group(1).decode("ascii", "replace")
    return None


def _encoding(label: str | None) -> webencodings.Encoding | None:
    if not label:
        return None
    return webencodings.lookup(label)


def _decode(data: bytes, encoding: webencodings.Encoding, errors: str) -> str:
    if encoding.name == "windows-1252":
        # Strict still fails on what WHATWG maps nowhere (nothing, for this encoding).
        return data.decode("cp1252", "detemplate-whatwg-c1" if errors == "strict" else errors)
    text: str = encoding.codec_info.decode(data, errors)[0]
    return text


def sniff(data: bytes, http_charset: str | None = None) -> tuple[str, bytes, str]:
    """(WHATWG encoding name, the bytes without a BOM, which step chose it: ``bom``, ``http``,
    ``meta`` or ``default``), by steps 1-4 above."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, data[len(bom) :], "bom"
    found = _encoding(http_charset)
    if found is not None:
        return found.name, data, "http"
    found = _encoding(prescan(data))
    if found is not None:
        if found.name.startswith("utf-16"):
            return "utf-8", data, "meta"
        if found.name == "x-user-defined":
            return "windows-1252", data, "meta"
        return found.name, data, "meta"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "windows-1252", data, "default"
    return "utf-8", data, "default"


def decode_html(data: bytes, http_charset: str | None = None) -> str | None:
    """Decode page bytes as a browser would (module docstring); None when they are not text."""
    name, body, step = sniff(data, http_charset)
    encoding = webencodings.lookup(name)
    assert encoding is not None  # sniff returns WHATWG names
    try:
        return _decode(body, encoding, "strict")
    except UnicodeDecodeError:
        pass
    if step in ("http", "meta") and name != "utf-8":
        try:
            return body.decode("utf-8")  # a page re-saved as UTF-8 under its old declaration
        except UnicodeDecodeError:
            pass
    text = _decode(body, encoding, "replace")
    if text.count("\ufffd") > MAX_REPLACEMENT_SHARE * max(len(text), 1):
        return None
    return text
