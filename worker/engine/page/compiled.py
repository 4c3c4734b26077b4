"""The compiled page walk (worker/_walk.pyx), used when it is built and agrees with Python's.

`detemplate.engine.detectors.pagelevel.walk` (and `detemplate.engine.page.guards.segment_tree`, its table-only
subset) are the reference: written in Python over selectolax's node objects, they cost
about 1 us per element, more than the parse. The compiled walk does the same steps over
lexbor's tree through lexbor's exported functions. It is used only when

- the extension was built (it is optional: no compiler, no extension),
- DETEMPLATE_PURE_PYTHON is not set,
- lexbor's functions and the text layout were found (`_walk.init`), and
- on a probe page that exercises every branch of the walk, it gives exactly the Python
  walk's result.

Otherwise the Python walk runs, with the same results. `status()` says which and why;
`detemplate bench` prints it. Only the default path form ("tag") and walks that do not
need selectolax node objects back (`--html`) are compiled.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
from selectolax.lexbor import LexborHTMLParser

logger = logging.getLogger(__name__)

ABI = 6  # worker/_walk.pyx's ABI this module is written for

_PROBE_TEXT = "detemplate probe: the text of one text node, 57 bytes."

# Every branch of the walk: layout and inline elements, leaves, skipped subtrees,
# comments, links with and without href, class/id hints, custom elements with short
# and long names, Unicode whitespace, entities, a textless block, nested anchors.
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
</body></html>"""


def _load() -> tuple[Any, str]:
    """The initialised extension module, or None with the reason it is not used."""
    if os.environ.get("DETEMPLATE_PURE_PYTHON"):
        return None, "DETEMPLATE_PURE_PYTHON is set"
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
    return _walk, ""


_MODULE, _REASON = _load()


@lru_cache(maxsize=16)
def walker(block_tags: frozenset[str], skip_tags: frozenset[str]) -> Any:
    """The compiled walker for one pair of tag sets, or None where the Python walk must run."""
    global _REASON
    if _MODULE is None:
        return None
    from xxhash import xxh3_64_intdigest

    from ..detectors import pagelevel
    from ..errors import BadInputError
    from ..model import Block, Segment

    try:
        fast = _MODULE.Walker(
            block_tags, skip_tags, pagelevel._INHERIT, Segment, Block, xxh3_64_intdigest, BadInputError,
            pagelevel._hints, pagelevel._HINTS, pagelevel._LUT.tobytes(), frozenset(pagelevel.CLOSERS),
            pagelevel.STOPWORDS, pagelevel._COPYRIGHT_MARKS, pagelevel._TAG_INDEX, pagelevel._N_TAGS - 1,
        )
        disagreement = _check(fast, block_tags, skip_tags)
    except Exception as exc:  # a build that does not fit this source: the Python walk runs
        disagreement = f"it failed on the probe page: {exc!r}"
    if disagreement:
        _REASON = disagreement
        logger.warning("the compiled page walk is not used: %s", disagreement)
        return None
    return fast


def _check(fast: Any, block_tags: frozenset[str], skip_tags: frozenset[str]) -> str:
    """Empty if the compiled walk gives the Python walk's result on the probe page, else why not."""
    from ..detectors import pagelevel
    from ..params import SegmentParams
    from .guards import segment_tree

    params = SegmentParams(block_tags=block_tags, skip_tags=skip_tags)
    tree = LexborHTMLParser(PROBE_PAGE)
    root = tree.root
    if root is None:
        return "the probe page did not parse"
    fast_tree = pagelevel.PageTree(*fast.walk(root.mem_id, params.max_depth, params.max_nodes, True))
    python_tree = pagelevel.walk_python(tree, params)
    if replace(fast_tree, stats=None, columns=None) != python_tree:
        return "its page tree differs from the Python walk's on the probe page"
    if not np.array_equal(pagelevel.features(fast_tree), pagelevel.features(python_tree)):
        return "its text statistics differ from the Python ones on the probe page"
    if fast.walk(root.mem_id, params.max_depth, params.max_nodes, False) != segment_tree(tree, params, []):
        return "its blocks differ from the Python walk's on the probe page"
    return ""


def module() -> Any:
    """The initialised extension module (for its scanning functions), or None."""
    return _MODULE


def status() -> str:
    """Which page walk runs, for logs and benchmarks."""
    if _MODULE is None:
        return f"python ({_REASON})"
    return "compiled" if not _REASON else f"python ({_REASON})"
