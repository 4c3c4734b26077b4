"""The compiled page walk (page/_walk.pyx): loaded, checked against the Python walk, chosen once.

`page.python.walk_python` is the reference: written in Python over selectolax's node
objects, it costs about 1 us per element, more than the parse. The compiled walk does the
same steps over lexbor's tree through lexbor's exported functions. It runs only when

- the extension was built (it is optional: no compiler, no extension) from the source
  this module expects (`abi.ABI`),
- the shell did not ask for the Python walk (`configure`; the settings pass
  DETEMPLATE_PURE_PYTHON in),
- lexbor's functions and the text layout were found (`_walk.init`), and
- on a probe page that exercises every branch of the walk, it gives exactly the Python
  walk's result (per pair of tag sets, when `walker` first builds one).

Otherwise the Python walk runs, with the same results. The choice is made once, at first
use (not at import): `module()` makes it, `status()` says which walk runs and why.
The walk also hands over the page's distinct segment keys and its main block. The extension
holds the engine's other compiled loops (the host table's entries, its update and new keys, the tag
scans of the input guards, the page's segment keys, the clusters' path keys and signatures,
the page-level features and scores, the pagelets' cut and min-hash keys, the layout detector's content
region, keys and shares, the ballot's tally, the decision's per-block loops and sections
beside the main text, the verdict loop, link resolution, the page's title, language and base
URL, a class and id's hints and layout form, and the parse into pooled lexbor documents that
page/guards.py `parse_page` uses); they are used exactly when the module is, those
with a floating-point or subtle result (the table's entries, the features and scores, the
pagelets, the layout's region, keys and shares, the sections, the links, the title, language
and base URL, the hints and layout forms, the parse) only after they gave their
Python reference's result on a probe (`checked`, `agreeing`). Only the default path form ("tag") and
walks that do not need selectolax node objects back (`--html`) are compiled.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from functools import cache, lru_cache
from typing import Any

import numpy as np
from selectolax.lexbor import LexborHTMLParser
from xxhash import xxh3_64_intdigest

from ..errors import BadInputError, ConfigError
from ..model import Block, Segment
from ..params import SegmentParams
from . import cues
from .abi import ABI
from .python import walk_python
from .tree import PageTree, main_block, node_columns, text_stats

_PROBE_TEXT = "detemplate probe: the text of one text node, 57 bytes."

# Every branch of the walk: layout and inline elements, leaves, skipped subtrees,
# comments, links with and without href, class/id hints, custom elements with short
# and long names, Unicode whitespace, entities, a textless block, nested anchors, runs of
# text across inline elements and white space, line elements (nested, empty, <br>), runs
# of links with ASCII and non-ASCII separators, a link around a block, classes that a
# layout path keeps or leaves out, and words of two elements (ASCII and not) parted, but
# not across a <wbr> or a comment.
PROBE_PAGE = """<!DOCTYPE html><html><head><title>t</title><style>p{}</style></head>
<body class="home page"><header id="masthead"><nav class="navbar main-menu"><ul>
<li><a href="/">Home</a></li><li><a href="/a?x=1&amp;y=2">A&nbsp;b</a></li><li><a>no href</a></li>
</ul></nav></header><!-- a comment --><main id="content"><article class="post entry">
<h1>Title\u2003with\u00a0spaces</h1><p>One <b>bold</b> and <a href="/in">a link</a>.\u3000Two\u2028lines.</p>
<my-widget>custom <span>inline</span></my-widget>
<a-very-long-custom-element-name>long name</a-very-long-custom-element-name>
<svg><text>hidden</text></svg><script>var x = "<p>not text</p>";</script>
<div class="empty"><img src="x.png"></div><div>   </div><section><div><p>deep <i>in</i> side</p></div></section>
<table><tr><td>cell</td><td><a href="/c">cell link</a></td></tr></table>
<p>\t tabs\u000band\u001fcontrol\u0085nel </p><ul><li><a href="/n"><span>nested</span> anchor</a></li></ul>
</article></main><aside class="sidebar widget"><form><input name="q"><button>Go</button></form></aside>
<footer class="site-footer">\u00a9 2026 <a href="/legal">Legal</a></footer><p>""" + _PROBE_TEXT + """</p>
<div class="menu item-3 active"><a href="/1">One</a> | <a href="/2">Two</a> \u00b7 <a href="/3"><b>Thr</b>ee</a></div>
<div><span>\u65e5\u672c</span>\u8a9e<i>\u00e9</i>t\u00e9_<b>x</b> DAP_<wbr>EXECUTE<wbr> <a href="/w">write<wbr>Mem</a>
left<!-- c -->right<span>Title</span>May 24</div>
<div class="comments related-posts"><blockquote><p>quoted <code>f</code><code>oo</code> <em>x</em>\u00a0 y</p>
</blockquote>line one<br>line two<hr><p></p>tail <a href="/t">link</a> \u00bb <span> </span>end</div>
<a href="/block"><div>block in a link</div></a><pre><span>for</span> <span>x</span>\n    pass</pre>
</body></html>"""

# The choice: asked for by `configure`, made by `module()` on first use.
_pure_python = ""  # why the Python walk must run ("": the compiled one where it loads)
_chosen: tuple[Any, str] | None = None  # (the initialised extension or None, why not)
_reason = ""  # why the Python walk runs after all (a walker's probe failed); "" while compiled


def configure(pure_python: bool, reason: str = "the Python walk was asked for") -> None:
    """Ask for the Python walk (`pure_python`, saying why) or the compiled one where it loads.

    Call it before the first page: the choice is made once. Asking for the same again is
    fine; asking for the other walk once one runs is a ConfigError.
    """
    global _pure_python
    wanted = reason if pure_python else ""
    if _chosen is not None and bool(wanted) != bool(_pure_python):
        raise ConfigError(f"the page walk was chosen already ({status()}); configure it before the first page")
    _pure_python = wanted


def _load() -> tuple[Any, str]:
    """The initialised extension module, or None with the reason it is not used."""
    if _pure_python:
        return None, _pure_python
    try:
        from . import _walk  # type: ignore[attr-defined]  # the optional extension
    except ImportError as exc:
        return None, f"the extension is not built ({exc})"
    if getattr(_walk, "ABI", None) != ABI:
        return None, f"the extension is a stale build (ABI {getattr(_walk, 'ABI', None)}, not {ABI}): run make setup"
    import selectolax.lexbor

    probe = LexborHTMLParser(f"<p>{_PROBE_TEXT}</p>")
    p = probe.css_first("p")
    text_node = p.first_child if p is not None else None
    if text_node is None:
        return None, "the probe page did not parse"
    reason = _walk.init(selectolax.lexbor.__file__, text_node.mem_id, _PROBE_TEXT.encode())
    if reason:
        return None, str(reason)
    # Keys hashed in C when the xxhash module exports its function (else through its Python
    # function: the same values, a little slower).
    library = importlib.import_module("xxhash._xxhash").__file__ or ""
    _walk.init_hash(library, xxh3_64_intdigest, [b"", b"\x01html", _PROBE_TEXT.encode() * 9])
    return _walk, ""


def module() -> Any:
    """The initialised extension module, or None where the Python code runs; chosen on first call."""
    global _chosen
    chosen = _chosen
    if chosen is None:
        chosen = _chosen = _load()
    return chosen[0]


@lru_cache(maxsize=16)
def walker(block_tags: frozenset[str], skip_tags: frozenset[str]) -> Any:
    """The compiled walker for one pair of tag sets, or None where the Python walk must run."""
    global _reason
    mod = module()
    if mod is None:
        return None
    try:
        fast = mod.Walker(
            block_tags, skip_tags, cues.INHERIT, Segment, Block, xxh3_64_intdigest, BadInputError,
            hints(), cues.LUT.tobytes(), frozenset(cues.CLOSERS),
            cues.STOPWORDS, cues.COPYRIGHT_MARKS, cues.TAG_INDEX, cues.N_TAGS - 1,
            cues.LINE_TAGS, cues.has_word, layout_classes(),
        )
        disagreement = _check(fast, block_tags, skip_tags)
    except Exception as exc:  # a build that does not fit this source: the Python walk runs
        disagreement = f"it failed on the probe page: {exc!r}"
    if disagreement:
        _reason = disagreement
        return None
    return fast


@cache
def hints() -> Callable[[tuple[str, str]], int]:
    """`cues.hints`, compiled (_walk.pyx `Hints`) where it gives `cues.hint_bits`'s bits on
    `cues.hint_probes()`; else `cues.hints` itself. Chosen once, at first use."""
    return _by_marks(  # type: ignore[no-any-return]
        lambda mod: mod.Hints(list(cues.HINT_MARKS)), cues.hints,
        lambda fast: all(fast(pair) == cues.hint_bits(pair) for pair in cues.hint_probes()),
    )


@cache
def layout_classes() -> Callable[[str], str]:
    """`cues.layout_classes`, compiled (_walk.pyx `Hints.layout_form`, by cues.VOLATILE_MARKS)
    where it gives `cues.layout_form`'s results on `cues.layout_probes()`; else
    `cues.layout_classes` itself. Chosen once, at first use."""
    return _by_marks(  # type: ignore[no-any-return]
        lambda mod: mod.Hints(list(cues.VOLATILE_MARKS)).layout_form, cues.layout_classes,
        lambda fast: all(fast(cls) == cues.layout_form(cls) for cls in cues.layout_probes()),
    )


def _by_marks(make: Callable[[Any], Any], python: Any, agrees: Callable[[Any], bool]) -> Any:
    """What `make` builds from the module's `Hints` where it `agrees` with the Python function
    on its probes; else `python`, which also runs where the module is not in use or does not
    fit this source."""
    mod = module()
    if mod is None or not hasattr(mod, "Hints"):
        return python
    try:
        fast = make(mod)
        if agrees(fast):
            return fast
    except Exception:
        pass
    return python


def _check(fast: Any, block_tags: frozenset[str], skip_tags: frozenset[str]) -> str:
    """Empty if the compiled walk gives the Python walk's result on the probe page, else why not."""
    params = SegmentParams(block_tags=block_tags, skip_tags=skip_tags)
    tree = LexborHTMLParser(PROBE_PAGE)
    root = tree.root
    if root is None:
        return "the probe page did not parse"
    fast_runs: list[int] = []
    python_runs: list[int] = []
    fast_tree = PageTree(*fast.walk(root.mem_id, params.max_depth, params.max_nodes, True, fast_runs))
    python_tree = walk_python(tree, params, None, python_runs)
    if replace(fast_tree, stats=None, columns=None) != python_tree:
        return "its page tree differs from the Python walk's on the probe page"
    if fast_runs != python_runs:
        return "its order of the segments differs from the Python walk's on the probe page"
    if not np.array_equal(node_columns(fast_tree), node_columns(python_tree)):
        return "its node columns differ from the Python ones on the probe page"
    if not np.array_equal(text_stats(fast_tree), text_stats(python_tree)):
        return "its text statistics differ from the Python ones on the probe page"
    distinct = {seg[0] for block in python_tree.blocks for seg in block[1]}
    if fast_tree.keys != (sorted(distinct), distinct):
        return "its segment keys differ from the Python walk's blocks' on the probe page"
    if fast_tree.main != main_block(python_tree):
        return "its main block differs from the Python one on the probe page"
    if fast.walk(root.mem_id, params.max_depth, params.max_nodes, False) != python_tree.blocks:
        return "its blocks differ from the Python walk's on the probe page"
    return ""


@cache
def kernel(name: str) -> Any:
    """The extension's function `name` where the compiled walk is in use, else None (then
    the caller runs its Python reference); chosen once per name, at first use."""
    return getattr(module(), name, None)


@cache
def checked(check: Callable[[Any], Any]) -> Any:
    """`check(module())`: the compiled code a caller uses after it gave its Python
    reference's result on the probe page (or None, and the reference runs); chosen once per
    check, at first use, with the page walk."""
    return check(module())


def agreeing(mod: Any, names: tuple[str, ...], agrees: Callable[[Any], bool]) -> Any:
    """`mod` when it has the functions `names` and `agrees(mod)` (they gave their Python
    reference's results on a probe), else None; also None when the probe raises (a build
    that does not fit this source). For the checks `checked` runs."""
    if mod is None or not all(hasattr(mod, name) for name in names):
        return None
    try:
        return mod if agrees(mod) else None
    except Exception:
        return None


def status() -> str:
    """Which page walk runs, for logs and benchmarks (makes the choice if it is not made yet)."""
    if module() is None:
        return f"python ({_chosen[1] if _chosen else ''})"
    return "compiled" if not _reason else f"python ({_reason})"
