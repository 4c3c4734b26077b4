"""Coverage-guided fuzzing of the page path with atheris: bytes in, a clean page or a dead letter out.

    .venv/bin/pip install atheris
    .venv/bin/python scripts/fuzz_pages.py -atheris_runs=200000 [CORPUS_DIR]

Each input is split by its first byte into how it enters: a raw-page record (a JSONL line
or pages.raw message: `sources.decode_record`), page bytes in some charset
(`sources.decode_html`, as a WARC body), or markup wrapped in a page. Every input must end
as a clean page or a dead letter whose reason is one of the known ones, both must encode,
and the compiled page walk must give exactly the Python walk's result (blocks, segment
keys, cues and features). Anything else raises, and atheris stops with the input saved.
At the end (or on Ctrl-C) it prints how many inputs ran and the outcomes by reason.
"""

from __future__ import annotations

import atexit
import sys
from collections import Counter
from dataclasses import replace

import atheris

with atheris.instrument_imports():
    import numpy as np
    from detemplate.engine.detectors.pagelevel import features
    from detemplate.engine.errors import BadInputError
    from detemplate.engine.model import DeadPage, RawPage
    from detemplate.engine.page import PageTree, compiled, segment_tree, walk_python
    from detemplate.engine.params import EngineParams
    from detemplate.engine.pipeline import decide
    from detemplate.engine.table import HostTable
    from detemplate.io.codec import encode_clean, encode_dead
    from detemplate.io.sources import decode_html, decode_record
    from selectolax.lexbor import LexborHTMLParser

PARAMS = EngineParams()
SP = PARAMS.segment
FAST = compiled.walker(SP.block_tags, SP.skip_tags)
CHARSETS = [None, "utf-8", "latin-1", "cp1252", "utf-16", "shift_jis", "gb18030", "koi8-r", "nonsense"]
REASONS = {
    "empty", "not_html", "too_large", "too_deep", "too_many_nodes", "bad_json", "bad_record", "bad_url", "bad_host",
    "undecodable",
    "unsupported_version",
}
seen: Counter[str] = Counter()


def check_walks(html: str) -> None:
    """The compiled walk against the Python walk on one page (skipped when not compiled)."""
    if FAST is None:
        return
    tree = LexborHTMLParser(html)
    root = tree.root
    if root is None:
        return
    try:
        fast = PageTree(*FAST.walk(root.mem_id, SP.max_depth, SP.max_nodes, True))
    except BadInputError as exc:
        fast_error = (exc.reason, exc.detail)
    else:
        fast_error = None
    try:
        slow = walk_python(tree, SP)
    except BadInputError as exc:
        assert fast_error == (exc.reason, exc.detail), (fast_error, exc)
        return
    assert fast_error is None, fast_error
    assert replace(fast, stats=None, columns=None) == slow
    assert np.array_equal(features(fast), features(slow))
    assert FAST.walk(root.mem_id, SP.max_depth, SP.max_nodes, False) == segment_tree(tree, SP, [])


def one(data: bytes) -> None:
    if not data:
        return
    how, rest = data[0] % 3, data[1:]
    if how == 0:
        page: RawPage | DeadPage = decode_record(rest, "fuzz")
    elif how == 1:
        charset = CHARSETS[rest[0] % len(CHARSETS)] if rest else None
        text = decode_html(rest[1:], charset)
        if text is None:
            page = DeadPage("u", "h", "undecodable", "", "fuzz")
        else:
            page = RawPage("https://h.example/", text, "h")
    else:
        page = RawPage("https://h.example/p", "<html><body>" + rest.decode("utf-8", "replace"), "h.example")
    if isinstance(page, DeadPage):
        assert page.reason in REASONS, page.reason
        encode_dead(page, data)
        seen[page.reason] += 1
        return
    outcome = decide(page, HostTable(PARAMS.table), PARAMS)
    if outcome.dead is not None:
        assert outcome.clean is None and outcome.dead.reason in REASONS, outcome.dead
        encode_dead(outcome.dead, data)
        seen[outcome.dead.reason] += 1
    else:
        assert outcome.clean is not None
        encode_clean(outcome.clean)
        seen["clean"] += 1
        check_walks(page.html)


def report() -> None:
    total = sum(seen.values())
    print(f"\nfuzz: {total:,} inputs decided; page walk {compiled.status()}", file=sys.stderr)
    for reason, count in seen.most_common():
        print(f"  {reason:<20} {count:>9,}", file=sys.stderr)


if __name__ == "__main__":
    atexit.register(report)
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
