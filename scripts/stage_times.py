"""Where a page's time goes: ms a page per stage of engine/pipeline.py and per costly step in them.

    python scripts/stage_times.py ../shared/corpora/*/ [--passes 5] [--cpu 1] [--detail]

Pages are preloaded; each pass runs `process_page` over every corpus with a fresh
MemoryStore per corpus and the engine's caches emptied (stream order, a first pass, as
`detemplate bench`). The stages (and with
`--detail` the steps named in STEPS) are timed by wrapping the functions the pipeline
calls; the wrapper costs well under a microsecond a call. Printed: ms a page, the best
pass (the least disturbed on a shared machine) and the median, plus the total (wall
clock, and the process's CPU time, which other processes on a shared machine disturb less).
The garbage collector's threshold and BLAS's threads are set as every command sets them
(settings.tune_gc, tune_blas), so the stages are timed as `bench` and `run` run them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detemplate import settings
from detemplate.engine import pipeline
from detemplate.engine.detectors import base, pagelets, pagelevel
from detemplate.engine.page import compiled, guards
from detemplate.engine.params import EngineParams
from detemplate.state import MemoryStore
from detemplate.tools.evaluate import load_corpus

STAGES = [(name, pipeline, name) for name in pipeline.STAGES]

# Steps inside the stages: (label, the object the pipeline looks the function up on, its name).
STEPS: list[tuple[str, Any, str]] = [
    ("walk_page: guards.parse (guards + lexbor)", pipeline, "parse"),
    ("  guards.check_html", guards, "check_html"),
    ("walk_page: walk (cues)", pipeline, "walk"),
    ("walk_page: segment_tree (no cues)", pipeline, "segment_tree"),
    ("pagelevel.block_scores", pagelevel, "block_scores"),
    ("  pagelevel.features (numpy)", pagelevel, "features"),
    ("  pagelevel.page_features", pagelevel, "page_features"),
    ("  pagelevel.model_scores", pagelevel, "model_scores"),
    ("  isotonic_tree", pagelevel, "isotonic_tree"),
    ("pagelets.page_sketches", pagelets, "page_sketches"),
    ("pagelets.block_pagelets", pagelets, "block_pagelets"),
    ("combine_votes: decide_blocks", pipeline, "decide_blocks"),
    ("Ballot.tally", base.Ballot, "tally"),
    ("page_outcome: split_links", pipeline, "split_links"),
    ("  base_url", pipeline, "base_url"),
    ("  absolute_links", pipeline, "absolute_links"),
    ("page_outcome: page_title", pipeline, "page_title"),
    ("page_outcome: page_lang", pipeline, "page_lang"),
]


def detector_steps() -> list[tuple[str, Any, str]]:
    """Each detector's prepare and vote."""
    out = []
    for detector in pipeline.DETECTORS:
        name = type(detector).__name__
        out.append((f"prepare: {name}", type(detector), "prepare"))
        out.append((f"vote: {name}", type(detector), "vote"))
    return out


def timed(fn: Callable[..., Any], sums: dict[str, float], label: str) -> Callable[..., Any]:
    clock = time.perf_counter

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            sums[label] += clock() - t

    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus_dirs", nargs="+")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--detail", action="store_true", help="also time the steps inside the stages")
    parser.add_argument("--param", action="append", default=[], help="an engine parameter override, e.g. x.y=1")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    settings.tune_gc()  # as every command does (cli.main): the collector's and BLAS's settings of `bench`
    settings.tune_blas()
    from detemplate.engine.params import with_overrides

    params = with_overrides(EngineParams(), args.param)
    corpora = [load_corpus(p, gold=False) for p in args.corpus_dirs]  # timing needs no gold: a crawl will do
    pages = sum(len(c.pages) for c in corpora)
    targets = STAGES + (STEPS + detector_steps() if args.detail else [])
    # An older engine (PYTHONPATH to another checkout) lacks some steps: those print "-".
    absent = [label for label, owner, name in targets if not hasattr(owner, name)]
    targets = [(label, owner, name) for label, owner, name in targets if hasattr(owner, name)]
    passes: list[dict[str, float]] = []
    sums: dict[str, float] = defaultdict(float)
    originals = [(owner, name, getattr(owner, name)) for _label, owner, name in targets]
    for (label, owner, name), (_o, _n, fn) in zip(targets, originals, strict=True):
        setattr(owner, name, timed(fn, sums, label))
    try:
        clock = time.perf_counter
        for _ in range(args.passes):
            sums.clear()
            pipeline.forget_caches(params)  # each pass a first pass, as `bench`'s rounds
            start = clock()
            cpu = time.process_time()
            for corpus in corpora:
                store = MemoryStore()
                for page in corpus.pages:
                    pipeline.process_page(page, store, params)
            sums["total (process_page)"] = clock() - start
            sums["total, CPU time"] = time.process_time() - cpu
            passes.append(dict(sums))
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)
    print(f"{len(corpora)} corpora, {pages} pages, {args.passes} passes; page walk: {compiled.status()}")
    print(f"{'ms a page':<46} {'best':>7} {'median':>7}")
    labels = [label for label, _o, _n in targets] + ["total (process_page)", "total, CPU time"]
    for label in labels:
        values = [p.get(label, 0.0) * 1000 / pages for p in passes]
        print(f"{label:<46} {min(values):>7.3f} {statistics.median(values):>7.3f}")
    for label in absent:
        print(f"{label:<46} {'-':>7} {'-':>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
