"""The cues the page walk collects and the page-level model reads: class/id hint words,
flag bits, tag groups, function words, character classes and text statistics.

Both walks use them (the Python walk in page/python.py, the compiled one gets them
passed in by page/compiled.py), and the page-level model's features read them
(detectors/pagelevel.py), so they live here, below both.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

# Class/id words that mark template regions, and words that mark the main content.
TEMPLATE_WORDS = frozenset(
    """nav navbar navigation menu menubar submenu footer foot header head masthead topbar sidebar
    side aside breadcrumb breadcrumbs crumbs comment comments share sharing social related
    widget widgets ad ads advert advertisement banner promo sponsor sponsored subscribe
    newsletter signup login search cookie cookies copyright legal skip pagination pager pages
    tags tagcloud toolbar toc util utility links more popular trending recommended disclaimer""".split()
)
CONTENT_WORDS = frozenset(
    """content article post entry main body story text prose markdown blog single page document
    doc section itemprop articlebody""".split()
)
# Substrings that give the same hints inside compound names (mainContent, site-footer2).
_TEMPLATE_PARTS = (
    "footer",
    "header",
    "sidebar",
    "navbar",
    "breadcrumb",
    "comment",
    "social",
    "widget",
    "banner",
    "menu",
)
_CONTENT_PARTS = ("content", "article", "story", "entry")

# Flag bits: on the element itself, and inherited from any enclosing element.
F_THINT = 1  # template word in the element's own class/id
F_CHINT = 2  # content word in the element's own class/id
F_IN_THINT = 4  # some enclosing element has a template word
F_IN_CHINT = 8  # some enclosing element has a content word
F_IN_NAV = 16
F_IN_HEADER = 32
F_IN_FOOTER = 64
F_IN_ASIDE = 128
F_IN_FORM = 256
F_IN_LIST = 512
F_IN_MAIN = 1024  # main or article element
F_IN_TABLE = 2048
F_IN_A = 4096  # (walk only) inside an anchor
# Section words in the element's own class (a comments section, a box of links to other
# pages), which the walk shifts left by 2 to pass them on as the enclosing ones: what a block
# that is no main content is, see engine/decision.py.
F_COMMENTS = 1 << 13
F_RELATED = 1 << 14
F_IN_COMMENTS = F_COMMENTS << 2
F_IN_RELATED = F_RELATED << 2
F_OTHER = 1 << 17  # a gallery, a byline, an author's bio or a dialog (bits 15 and 16: the two above, passed on)
F_IN_OTHER = F_OTHER << 2
INHERIT = {
    "nav": F_IN_NAV,
    "menu": F_IN_NAV,
    "header": F_IN_HEADER,
    "footer": F_IN_FOOTER,
    "aside": F_IN_ASIDE,
    "form": F_IN_FORM,
    "ul": F_IN_LIST,
    "ol": F_IN_LIST,
    "dl": F_IN_LIST,
    "main": F_IN_MAIN,
    "article": F_IN_MAIN,
    "table": F_IN_TABLE,
    "a": F_IN_A,
}
FLAG_BITS: tuple[int, ...] = (
    F_THINT,
    F_CHINT,
    F_IN_THINT,
    F_IN_CHINT,
    F_IN_NAV,
    F_IN_HEADER,
    F_IN_FOOTER,
    F_IN_ASIDE,
    F_IN_FORM,
    F_IN_LIST,
    F_IN_MAIN,
    F_IN_TABLE,
)
# Tag groups of the one-hot tag features (other tags share the last column).
TAG_GROUPS = (
    ("p",),
    ("li",),
    ("h1", "h2", "h3", "h4", "h5", "h6"),
    ("td", "th", "tr", "caption"),
    ("div",),
    ("pre", "blockquote", "figure", "figcaption"),
    ("section", "article", "main"),
    ("nav", "header", "footer", "aside", "menu"),
    ("dl", "dt", "dd"),
    ("ul", "ol"),
    ("form", "fieldset", "legend"),
    ("html", "body", ""),
)
FLAG_BITS_ARRAY = np.asarray(FLAG_BITS, dtype=np.int64)
TAG_INDEX = {tag: i for i, group in enumerate(TAG_GROUPS) for tag in group}
N_TAGS = len(TAG_GROUPS) + 1
# Function words of the commonest web languages: running prose has many, menus few.
STOPWORDS = frozenset(
    """the a an of to in and or is are was were be been for on with at by from that this it as
    not but have has had will would can could its their his her they we you he she which who
    what when there than then also more about into after over der die das und ist nicht ein
    eine zu den mit von auf für sich des dem im le la les et est une des du dans pour pas que
    qui sur au avec il elle el los las y en es por con para una del se lo como más il di che è
    per non sono della""".split()
)
COPYRIGHT_MARKS = ("©", "copyright", "all rights reserved")


def _hint_re(words: frozenset[str], parts: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(sorted(words, key=len, reverse=True))
    return re.compile(f"(?<![a-z0-9])(?:{alts})(?![a-z0-9])|" + "|".join(parts))


_TEMPLATE_RE = _hint_re(TEMPLATE_WORDS, _TEMPLATE_PARTS)
_CONTENT_RE = _hint_re(CONTENT_WORDS, _CONTENT_PARTS)
# Sections of a page that are not its main content, by their class: a container of readers'
# comments (WordPress's "comments-area" and "commentlist", Disqus's "dsq-comments"), not one
# comment's element, whose singular word also names documentation comments ("tsd-comment")
# and an article that has comments ("commented"); and a box of links to other pages
# (related, recommended, popular, most-read stories, the ad networks' "outbrain" and
# "taboola" boxes). The id is not read: a section's id is often its heading's words
# ("comments" on a page about comments in code, "recommending" in a recommender library's
# guide); nor weaker words ("read-more" names a documentation admonition, "teaser" a blog
# index's posts). Measured in docs/measurements.md ("Comments and related sections").
_COMMENTS_CLASS_RE = re.compile(r"comments|comment[-_]?list|disqus")
_RELATED_CLASS_RE = re.compile(r"related|recommend|popular|trending|most-?read|more-stories|outbrain|taboola|also-read")
# And other page-specific text that is not the article: a gallery of photos, a slideshow, a
# carousel or a slider (captions of pictures, this story's or other stories': "gallery",
# "companion-galleries", "slideshow", "carousel", "slider-module", "flexslider"), and the byline
# (the author's name, title and the dates of the story: "byline", "article-byline"), and the
# author's bio below or beside the story ("author-bio", "pb-author-info", "author-description",
# "about-the-author"), and a modal dialog, which the page shows only over itself when asked (a
# log-in, a notification's sign-up, a photo's lightbox: "modal", "modal-dialog", "ui-dialog";
# whole words, not "multimodal"). Measured in docs/measurements.md ("Galleries and bylines",
# "Sliders", "Authors' bios", "Modal dialogs").
_OTHER_CLASS_RE = re.compile(
    r"galler|slideshow|carousel|slider|byline|author-?(?:bio|info|desc)|about-?(?:the-?)?author"
    r"|(?<![a-z])(?:modal|dialog)(?![a-z])"
)


# The same patterns spelled out as marks (substrings) and words (whole runs of letters and
# digits, kind 0, or of letters, kind 1), for the compiled `hints` (page/_walk.pyx Hints):
# (text, bit, kind, class only). page/compiled.py uses it only where it gives `hints`'s bits
# on `hint_probes()`.
MARK = 255
HINT_MARKS: tuple[tuple[str, int, int, bool], ...] = (
    *((part, F_THINT, MARK, False) for part in _TEMPLATE_PARTS),
    *((word, F_THINT, 0, False) for word in sorted(TEMPLATE_WORDS)),
    *((part, F_CHINT, MARK, False) for part in _CONTENT_PARTS),
    *((word, F_CHINT, 0, False) for word in sorted(CONTENT_WORDS)),
    *((mark, F_COMMENTS, MARK, True) for mark in ("comments", "commentlist", "comment-list", "comment_list", "disqus")),
    *((mark, F_RELATED, MARK, True) for mark in (
        "related", "recommend", "popular", "trending", "mostread", "most-read", "more-stories", "outbrain", "taboola",
        "also-read",
    )),
    *((mark, F_OTHER, MARK, True) for mark in (
        "galler", "slideshow", "carousel", "slider", "byline",
        *(f"author{dash}{what}" for dash in ("", "-") for what in ("bio", "info", "desc")),
        *(f"about{dash}{the}author" for dash in ("", "-") for the in ("", "the", "the-")),
    )),
    *((word, F_OTHER, 1, True) for word in ("modal", "dialog")),
)


def hint_probes() -> list[tuple[str, str]]:
    """(class, id) pairs on which the compiled hints must give `hints`'s bits: every mark and
    word alone, between a dash and a digit, inside letters, cut short and upper-cased, in the
    class and in the id (about 1,500: 10 ms, once a process)."""
    pairs: list[tuple[str, str]] = [("", ""), ("İstanbul K-nav", "\u212aoo"), ("é-menu", "navé")]
    for text, _bit, _kind, _class_only in HINT_MARKS:
        for shaped in (text, f"a-{text}2", f"x{text}s", text[:-1], text.upper()):
            pairs += [(shaped, ""), ("", shaped)]
    return pairs


HINTS: dict[tuple[str, str], int] = {}  # (class, id) -> hint bits, a plain dict: faster than lru_cache
HINTS_MAX = 1 << 17
# Only short pairs are cached, so the cache is bounded in bytes too (about 40 MB at most):
# a hostile page's megabyte-long class attributes would otherwise stay in it.
HINTS_MAX_CHARS = 256


# Classes that say an element's state or position rather than what it is ("active",
# "current", "odd", per-item numbers): left out of layout paths (see `layout_classes`), so
# that one layout element keeps one path from page to page.
_VOLATILE_CLASS = re.compile(
    r"active|current|selected|open|show|hidden|collapse|expand|toggle|focus|hover|visited|first|last|odd|even|[0-9]"
)
LAYOUT_CLASSES: dict[str, str] = {}  # class attribute -> its layout form, a bounded cache
_LAYOUT_CLASSES_MAX = 1 << 15


# The same as marks (any of them in a class name makes it volatile), for the compiled
# `layout_classes` (page/_walk.pyx Hints.layout_form).
_VOLATILE_NAMES = _VOLATILE_CLASS.pattern.split("|")[:-1]  # the pattern's words; its last part is the digits
VOLATILE_MARKS: tuple[tuple[str, int, int, bool], ...] = tuple(
    (mark, 1, MARK, True) for mark in (*_VOLATILE_NAMES, *"0123456789")
)


def layout_classes(cls: str) -> str:
    """`layout_form`, kept in LAYOUT_CLASSES."""
    form = layout_form(cls)
    if len(cls) <= HINTS_MAX_CHARS:
        if len(LAYOUT_CLASSES) >= _LAYOUT_CLASSES_MAX:
            LAYOUT_CLASSES.clear()
        LAYOUT_CLASSES[cls] = form
    return form


def layout_form(cls: str) -> str:
    """An element's classes as a layout path names them: sorted, volatile ones left out,
    each after a dot; empty for none."""
    kept = sorted({c for c in cls.split() if not _VOLATILE_CLASS.search(c)})
    return "." + ".".join(kept) if kept else ""


def layout_probes() -> list[str]:
    """Class attributes on which the compiled `layout_classes` must give `layout_form`'s."""
    return [
        "", " ", "nav main", "b a a", "x\u00a0y\u2003z", "caf\u00e9 \u00fcber", "Active ACTIVE", "item-7 menu",
        *(f"x-{name}-y {name.upper()} k{name} {name}s" for name in _VOLATILE_NAMES), " ".join(_VOLATILE_NAMES),
        "\u0661\u0662 x",
        "a1", "9", "x0y",
    ]


# Elements that end a line of text inside a block: a text segment is the run of text
# between them (and between layout elements), whatever inline elements it spans.
# An empty element inside a word (a line-break opportunity): no space where it stands,
# whereas two inline elements' words are parted by one (page/python.py `join_pieces`).
GLUE_TAG = "wbr"
LINE_TAGS = frozenset("p h1 h2 h3 h4 h5 h6 pre blockquote dt dd dl figcaption legend summary br hr".split())


def has_word(text: str) -> bool:
    """Whether a text holds a letter or digit (what separates a sentence from " | ")."""
    return any(ch.isalnum() for ch in text)


def hints(pair: tuple[str, str]) -> int:
    """Hint flag bits of one element's class and id (`hint_bits`), kept in HINTS."""
    flags = hint_bits(pair)
    if len(pair[0]) + len(pair[1]) < HINTS_MAX_CHARS:
        if len(HINTS) >= HINTS_MAX:
            HINTS.clear()
        HINTS[pair] = flags
    return flags


def hint_bits(pair: tuple[str, str]) -> int:
    """Hint flag bits of one element's class and id: whole words, or telling parts of words."""
    text = f"{pair[0]} {pair[1]}".lower()
    flags = F_THINT if _TEMPLATE_RE.search(text) else 0
    if _CONTENT_RE.search(text):
        flags |= F_CHINT
    cls = pair[0].lower()
    if _COMMENTS_CLASS_RE.search(cls):
        flags |= F_COMMENTS
    if _RELATED_CLASS_RE.search(cls):
        flags |= F_RELATED
    if _OTHER_CLASS_RE.search(cls):
        flags |= F_OTHER
    return flags


# Character classes (bits); C_BOUNDARY (space or the newline between nodes) is not counted.
C_SPACE, C_PUNCT, C_SENT, C_DIGIT, C_UPPER, C_PIPE, C_COMMA, C_BOUNDARY = (1 << k for k in range(8))
CLOSERS = '.!?"”)'  # a text ending in one of these ends a sentence
_CLOSER_CODES = np.asarray([ord(c) for c in CLOSERS], dtype=np.uint32)
LUT_SIZE = 0x2100  # character classes of the first code points; the others have none


def _char_classes() -> NDArray[np.uint8]:
    lut = np.zeros(LUT_SIZE + 1, dtype=np.uint8)
    for chars, bit in (
        (" ", C_SPACE),
        (" \n", C_BOUNDARY),
        (".,;:!?", C_PUNCT),
        (".!?", C_SENT),
        ("0123456789", C_DIGIT),
        ("|·»", C_PIPE),
        (",", C_COMMA),
    ):
        for ch in chars:
            lut[ord(ch)] |= bit
    for code in range(LUT_SIZE):
        if chr(code).isupper():
            lut[code] |= C_UPPER
    lut[LUT_SIZE] = 0
    return lut


LUT = _char_classes()


class TextStats:
    """Character-class counts of every node's text, computed at once over the joined page text.

    Every node's text is followed by a newline in `big`, so node i owns the characters
    [starts[i], starts[i+1]) and one `reduceat` sums each class over all nodes.
    """

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        n = len(texts)
        lens = np.fromiter(map(len, texts), dtype=np.intp, count=n)
        self.big = "\n".join(texts) + "\n"
        codes = np.frombuffer(self.big.encode("utf-32-le"), dtype=np.uint32)
        cls = LUT[np.minimum(codes, LUT_SIZE)]
        self.codes = codes
        self.starts = np.zeros(n, dtype=np.intp)
        np.cumsum(lens[:-1] + 1, out=self.starts[1:])
        self.stops = self.starts + lens
        self.lens = lens
        # Sentence ends need a boundary after them, capitals one before them.
        boundary = (cls & C_BOUNDARY) != 0
        bits = cls & np.uint8(0xFF ^ (C_SENT | C_UPPER))
        sent = (cls & C_SENT) != 0
        sent[:-1] &= boundary[1:]
        upper = (cls & C_UPPER) != 0
        upper[1:] &= boundary[:-1]
        bits |= sent.astype(np.uint8) * np.uint8(C_SENT)
        bits |= upper.astype(np.uint8) * np.uint8(C_UPPER)
        unpacked = np.unpackbits(bits[:, None], axis=1, bitorder="little")
        self.counts = np.add.reduceat(unpacked, self.starts, axis=0, dtype=np.int32).astype(np.float64)

    def count(self, bit: int) -> NDArray[np.float64]:
        return self.counts[:, bit.bit_length() - 1]

    def ends_sentence(self) -> NDArray[np.float64]:
        out = np.zeros(len(self.lens))
        some = self.lens > 0
        out[some] = np.isin(self.codes[self.stops[some] - 1], _CLOSER_CODES)
        return out

    def copyright(self, lowered: str) -> NDArray[np.float64]:
        """Nodes with a copyright notice (plain substring search: regexes are slower here)."""
        out = np.zeros(len(self.lens))
        if len(lowered) != len(self.big):  # lower() changed lengths: positions would not align
            for i, text in enumerate(self.texts):
                lowered_text = text.lower()
                out[i] = any(mark in lowered_text for mark in COPYRIGHT_MARKS)
            return out
        hits = []
        for needle in COPYRIGHT_MARKS:
            at = lowered.find(needle)
            while at >= 0:
                hits.append(at)
                at = lowered.find(needle, at + 1)
        if hits:
            out[np.searchsorted(self.starts, hits, side="right") - 1] = 1.0
        return out

    def stopwords(self, lowered: str, words: NDArray[np.float64]) -> NDArray[np.float64]:
        """Function words per node (texts are single-space separated, so words align)."""
        tokens = lowered.split()
        counts = words.astype(np.intp)
        if len(tokens) != int(counts.sum()):  # lower() met a character it splits: count slowly
            return np.array([sum(map(STOPWORDS.__contains__, t.lower().split())) for t in self.texts], dtype=np.float64)
        hit = np.fromiter(map(STOPWORDS.__contains__, tokens), dtype=np.float64, count=len(tokens))
        owner = np.repeat(np.arange(len(counts)), counts)
        return np.bincount(owner, weights=hit, minlength=len(counts)).astype(np.float64)
