"""The page walk (detemplate.engine.page): blocks at layout tags, visible text only, DOM paths, stable keys, limits."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from detemplate.engine.errors import BadInputError
from detemplate.engine.keys import segment_key
from detemplate.engine.model import Block
from detemplate.engine.page import parse, segment_tree
from detemplate.engine.params import SegmentParams
from selectolax.lexbor import LexborHTMLParser


def segment_html(html: str, params: SegmentParams) -> tuple[LexborHTMLParser, list[Block]]:
    """Parse and segment one page (the guards, then the walk)."""
    tree = parse(html, params)
    return tree, segment_tree(tree, params)


# An explicit cut, so these tests do not move when the measured default block tags do.
CUT = SegmentParams(block_tags=frozenset({"html", "body", "div", "ul", "li", "p", "footer"}), path_mode="tag")


def blocks_of(html: str, params: SegmentParams = CUT) -> list[tuple[str, list[str]]]:
    _, blocks = segment_html(html, params)
    return [(b.path, [s.text for s in b.segments]) for b in blocks]


def test_blocks_are_cut_at_layout_tags_only() -> None:
    html = (
        "<html><body>"
        "<div>intro <b>bold</b> <a href='#'>link</a> tail"
        "<div>inner</div>"
        "after inner</div>"
        "<ul><li>one</li><li>two <span>span</span></li></ul>"
        "<footer>foot</footer>"
        "</body></html>"
    )
    assert blocks_of(html) == [
        # Inline tags neither start a block nor cut a segment: a segment is a run of text,
        # which a nested block ends; text after it still belongs to the outer block.
        ("html/body/div", ["intro bold link tail", "after inner"]),
        ("html/body/div/div", ["inner"]),
        ("html/body/ul/li", ["one"]),
        ("html/body/ul/li", ["two span"]),
        ("html/body/footer", ["foot"]),
    ]


def test_a_segment_is_a_line_of_text() -> None:
    html = (
        "<html><body><div><h1>Title</h1><p>Some <b>bold</b> text with <a href='/x'>a link</a>.</p>"
        "<pre><span class='k'>for</span> <span class='n'>x</span> in y:<br>    pass</pre>"
        "Tail<br>after a break<hr>after a rule</div></body></html>"
    )
    # Line elements (p, h1..h6, pre, br, hr...) end a segment; inline ones join the text;
    # each segment's path names its line element.
    _, blocks = segment_html(html, SegmentParams())
    assert [s.text for s in blocks[0].segments] == [
        "Title", "Some bold text with a link.", "for x in y:", "pass", "Tail", "after a break", "after a rule",
    ]
    heading = segment_html("<html><body><div><h1>Title</h1></div></body></html>", CUT)[1][0].segments[0]
    bare = segment_html("<html><body><div>Title</div></body></html>", CUT)[1][0].segments[0]
    assert heading.text == bare.text and heading.key != bare.key


def test_two_elements_words_are_parted_and_a_wbr_joins() -> None:
    # Where one element's text ends in a letter or digit and the next begins with one, the
    # words are parted: a post's title and its date, a parameter and its type, a line number
    # and the code beside it would otherwise run into one token ("TerminalMay", "95impl").
    # The cost is markup inside a word ("<b>T</b>ype" gives "T ype"); a <wbr> is a break
    # opportunity inside a word, so across it nothing is added.
    html = (
        "<html><body><div><a href='/p'>Hello Terminal<span class='date'>May 24, 2017</span></a></div>"
        "<div><strong>lonx</strong><span class='classifier'>bool</span>: <em>x</em>, <b>y</b>.</div>"
        "<div><a href='#95'>95</a><span class='kw'>impl</span>&lt;T&gt; <b>T</b>ype</div>"
        "<div>DAP_<wbr>EXECUTE_<wbr>COMMAND <a href='/w'>write<wbr>Mem32</a> <span>\u65e5\u672c</span>\u8a9e</div>"
        "</body></html>"
    )
    assert [texts for _, texts in blocks_of(html)] == [
        ["Hello Terminal May 24, 2017"],
        ["lonx bool: x, y."],
        ["95 impl<T> T ype"],
        ["DAP_EXECUTE_COMMAND writeMem32 \u65e5\u672c \u8a9e"],
    ]


def test_a_run_of_links_is_one_segment_a_link() -> None:
    menu = (
        "<html><body><div><a href='/1'>One</a> | <a href='/2'>Two</a> \u00b7 <a href='/3'><b>Three</b> more</a></div>"
        "</body></html>"
    )
    assert blocks_of(menu) == [("html/body/div", ["One", "Two", "Three more"])]
    # A link inside a sentence is part of the sentence.
    sentence = "<html><body><div>See <a href='/1'>one</a> and <a href='/2'>two</a>.</div></body></html>"
    assert blocks_of(sentence) == [("html/body/div", ["See one and two."])]


def test_blocks_without_text_are_left_out_and_indexed_in_order() -> None:
    _, blocks = segment_html("<html><body><div> </div><div><img src=x></div><p>a</p><p>b</p></body></html>", CUT)
    assert [(b.order, [s.text for s in b.segments]) for b in blocks] == [(0, ["a"]), (1, ["b"])]


def test_default_block_tags_cut_at_containers_and_list_items() -> None:
    blocks = blocks_of(
        "<html><body><nav><ul><li>Home</li><li>About</li></ul></nav><div>text</div></body></html>",
        SegmentParams(),
    )
    assert [texts for _, texts in blocks] == [["Home"], ["About"], ["text"]]


def test_invisible_text_is_not_a_segment() -> None:
    html = (
        "<html><head><title>Title text</title><style>p { color: red }</style>"
        "<script>var headScript = 1;</script></head><body>"
        "<div>visible<!-- a comment --><script>var x = '<p>not text</p>';</script>"
        "<style>.a{}</style><noscript>enable js</noscript><template><p>tpl</p></template>"
        "<svg><text>svg text</text></svg>also visible</div>"
        "</body></html>"
    )
    assert blocks_of(html) == [("html/body/div", ["visiblealso visible"])]


@pytest.mark.parametrize("pure", [True, False])
def test_fallback_for_plugins_frames_and_media_is_not_text(pure: bool) -> None:
    # A browser never shows <noembed> or <noframes>, and the parser reads what is inside them
    # as raw text: an old ad's fallback markup would otherwise be kept as the page's words.
    # What a <video> or <audio> holds is for browsers without media support: not shown either.
    from detemplate.engine.page import walk, walk_python

    html = (
        "<html><body><div><p>The article's text.</p>"
        "<noembed><a href='https://ads.example/click?id=7'><img src='ad.gif'></a></noembed>"
        "<noframes>This page uses frames.</noframes>"
        "<video src='clip.mp4'><p>Your browser does not support the video tag.</p></video>"
        "<audio src='talk.mp3'><a href='talk.mp3'>Download the talk</a></audio>"
        "<p>Its last line.</p></div></body></html>"
    )
    tree = (walk_python if pure else walk)(parse(html, CUT), CUT)
    texts = [seg.text for block in tree.blocks for seg in block.segments]
    assert texts == ["The article's text.", "Its last line."]


def test_comment_does_not_separate_text() -> None:
    # As a browser renders it: "left<!-- c -->right" reads "leftright".
    assert blocks_of("<html><body><div>left<!-- c -->right</div></body></html>") == [("html/body/div", ["leftright"])]


def test_whitespace_is_normalised() -> None:
    html = (
        "<html><body><div>  many \n\t spaces\r\n here&nbsp;and&nbsp;&nbsp;there  </div><div> \n\t </div></body></html>"
    )
    _, blocks = segment_html(html, CUT)
    (block,) = blocks
    (seg,) = block.segments
    assert seg.text == "many spaces here and there"
    assert seg.length == len(seg.text)
    # The same text with other whitespace is the same segment.
    _, again = segment_html("<html><body><div>many spaces here and there</div></body></html>", CUT)
    assert again[0].segments[0].key == seg.key


@pytest.mark.parametrize(
    ("mode", "path"),
    [
        ("tag", "html/body/div/p"),
        ("tag_class", "html/body/div.a.b/p.x"),
        ("tag_id_class", "html/body/div#main.a.b/p.x"),
    ],
)
def test_path_forms_per_mode(mode: str, path: str) -> None:
    params = dataclasses.replace(CUT, path_mode=mode)
    _, blocks = segment_html(
        '<html><body><div id="main" class="b  a"><p class="x">text</p></div></body></html>', params
    )
    (block,) = blocks
    assert block.path == path
    assert block.segments[0].key == segment_key(path, "text")


def test_class_order_does_not_change_the_key() -> None:
    params = dataclasses.replace(CUT, path_mode="tag_class")
    _, one = segment_html('<html><body><div class="a b">t</div></body></html>', params)
    _, two = segment_html('<html><body><div class="b a">t</div></body></html>', params)
    assert one[0].segments[0].key == two[0].segments[0].key


def test_same_text_on_another_path_is_another_segment() -> None:
    _, blocks = segment_html("<html><body><div>same</div><ul><li>same</li></ul></body></html>", CUT)
    keys = [b.segments[0].key for b in blocks]
    assert len(set(keys)) == 2


# The key formula is part of the state format: keys on disk from one version must match
# keys of the next. These values are XXH3-64 of UTF-8 "path NUL text" (segment_key's
# docstring); if the formula changes, the state format version must change too.
FIXED_KEYS = [
    ("html/body/div/p", "Hello, world", 17285699953599123944),
    ("html/body/div/ul/li", "Über – Straße", 1234364309341873591),  # noqa: RUF001 (non-ASCII on purpose)
]


@pytest.mark.parametrize(("path", "text", "expected"), FIXED_KEYS)
def test_segment_key_fixed_values(path: str, text: str, expected: int) -> None:
    assert segment_key(path, text) == expected
    assert 0 <= expected < 2**64


def test_segment_key_is_stable_across_processes() -> None:
    code = "from detemplate.engine.keys import segment_key; print(segment_key('html/body/div/p', 'Hello, world'))"
    root = Path(__file__).resolve().parents[3]
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, check=True
        )
        assert int(out.stdout) == FIXED_KEYS[0][2]


def test_segments_in_the_tree_use_segment_key() -> None:
    _, blocks = segment_html("<html><body><div><p>Hello, world</p></div></body></html>", CUT)
    assert blocks[0].path == "html/body/div/p"
    assert blocks[0].segments[0].key == FIXED_KEYS[0][2]


# -- limits -------------------------------------------------------------------------------


def reason(html: str, params: SegmentParams) -> str:
    with pytest.raises(BadInputError) as err:
        segment_html(html, params)
    assert err.value.detail  # a human sentence comes with every reason
    return err.value.reason


def test_too_deep() -> None:
    params = dataclasses.replace(CUT, max_depth=50)
    assert reason("<html><body>" + "<div>" * 60 + "x" + "</div>" * 60 + "</body></html>", params) == "too_deep"
    assert blocks_of("<html><body>" + "<div>" * 40 + "x" + "</div>" * 40 + "</body></html>", params)


def test_too_many_nodes() -> None:
    params = dataclasses.replace(CUT, max_nodes=100)
    assert reason("<html><body>" + "<p>x</p>" * 200 + "</body></html>", params) == "too_many_nodes"
    assert len(blocks_of("<html><body>" + "<p>x</p>" * 20 + "</body></html>", params)) == 20


def test_too_large() -> None:
    params = dataclasses.replace(CUT, max_page_bytes=1000)
    assert reason("<html><body>" + "<p>x</p>" * 200 + "</body></html>", params) == "too_large"


@pytest.mark.parametrize("html", ["", "   \n\t "])
def test_empty(html: str) -> None:
    assert reason(html, CUT) == "empty"


@pytest.mark.parametrize(
    "html",
    [
        "just some plain text without any markup at all",
        '{"json": "document", "not": "html"}',
        "<" + "\x00" * 100 + "binary",
    ],
)
def test_not_html(html: str) -> None:
    assert reason(html, CUT) == "not_html"


def test_limits_are_validated() -> None:
    from detemplate.engine.errors import ConfigError

    with pytest.raises(ConfigError):
        SegmentParams(path_mode="xpath")
    with pytest.raises(ConfigError):
        SegmentParams(max_depth=0)


@pytest.mark.parametrize("pure", [True, False])
def test_the_body_classes_are_not_in_layout_paths(pure: bool) -> None:
    # The body's classes name the page's type (a post, an enum): a site's layout keeps one
    # path (and one container key) across its page types. Other elements' classes count.
    from detemplate.engine.page import walk, walk_python

    walker = walk_python if pure else walk

    def keys(body_class: str, main_class: str) -> tuple[list[int], list[int]]:
        html = (
            f"<html><body class='{body_class}'><ul><li><a href='/'>Home</a></li></ul>"
            f"<div class='{main_class}'><p>Some text of the page.</p></div></body></html>"
        )
        tree = walker(parse(html, CUT), CUT)
        return tree.layout, tree.container

    assert keys("rustdoc enum", "content") == keys("rustdoc struct", "content")
    assert keys("single postid-7", "content") == keys("page-template-default", "content")
    assert keys("enum", "content")[1] != keys("enum", "sidebar")[1]
