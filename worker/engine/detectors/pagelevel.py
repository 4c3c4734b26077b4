"""Page-level templateness of layout blocks, from the page alone (Chakrabarti, Kumar, Punera, WWW 2007).

The page walk (engine/page) cuts the page into its blocks and collects, per layout
element, the cues read here: text and anchor text, links, segments, tag, nesting,
position in document order, class/id hints, and the semantic elements and lists/forms
that enclose it. `features` turns them into one row per element of the block tree.

A logistic-regression model (weights in detectors/data/pagelevel.json, trained by
`detemplate train-pagelevel`, see detemplate.tools.train) scores every block's
probability of being template; the scores are then smoothed over the block tree by
the regularised isotonic regression of detectors/isotonic.py (a block is template
only if its child blocks are), and a block is template when its smoothed score is
above the threshold the decision (engine/decision.py) applies where it is: the cold
threshold on a host's first page, then one inside and one outside the page's content
region.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from selectolax.lexbor import LexborHTMLParser

from ..errors import ConfigError
from ..page import compiled, walk
from ..page.cues import (
    F_IN_LIST,
    F_IN_THINT,
    F_THINT,
    FLAG_BITS,
    FLAG_BITS_ARRAY,
    N_TAGS,
    TAG_GROUPS,
)
from ..page.tree import NODE_COLUMNS, TEXT_COLUMNS, PageTree, main_block, node_columns, text_stats
from ..params import EngineParams, SegmentParams
from ..table import HostTable
from .base import Ballot, SegmentKeys, WalkedPage
from .isotonic import isotonic_tree

# -- features -------------------------------------------------------------------------

_CHAR_BINS = (0, 10, 30, 80, 200, 500)  # direct text length bins
_ANCHOR_BINS = (0.0, 0.3, 0.7, 0.95)  # anchor share bins
_POS_BINS = (0.0, 0.1, 0.3, 0.7, 0.9)  # position of the node's start in the page text
_CHAR_EDGES = np.asarray(_CHAR_BINS[1:], dtype=np.float64)
_ANCHOR_EDGES = np.asarray(_ANCHOR_BINS[1:], dtype=np.float64)
_POS_EDGES = np.asarray(_POS_BINS[1:], dtype=np.float64)

FEATURE_NAMES: tuple[str, ...] = (
    *("log_chars", "log_sub_chars", "anchor_share", "sub_anchor_share", "links_density", "sub_links_density"),
    *("log_avg_seg", "log_segs", "sub_share", "pos_start", "pos_end", "depth", "log_children", "has_text"),
    *("punct_share", "sentences", "log_words", "avg_word", "digit_share", "title_share", "copyright", "pipes"),
    *("parent_anchor_share", "parent_sub_share", "sib_anchor_share"),
    *tuple(f"tag_{g[0] or 'root'}" for g in TAG_GROUPS),
    *("tag_other",),
    *tuple(f"flag_{b}" for b in FLAG_BITS),
    *tuple(f"chars_ge_{b}" for b in _CHAR_BINS[1:]),
    *tuple(f"anchor_ge_{b}" for b in _ANCHOR_BINS[1:]),
    *tuple(f"pos_ge_{b}" for b in _POS_BINS[1:]),
    *("anchor_x_short", "anchor_x_long", "thint_x_list"),
    *("in_main", "before_main", "after_main", "main_share", "main_is_root"),
    *("prev_log_chars", "prev_anchor", "next_log_chars", "next_anchor"),
    *("rel_chars", "main_depth_delta", "ends_sentence", "stopwords"),
    *("bias",),
)
N_FEATURES = len(FEATURE_NAMES)


def features(page: PageTree) -> NDArray[np.float64]:
    """The feature matrix of a page's block tree: one row per node, columns FEATURE_NAMES."""
    n = len(page.parent)
    X = np.zeros((n, N_FEATURES))
    if n == 0:
        return X
    cols = node_columns(page)
    parent = cols[:, 0].astype(np.intp)
    chars = cols[:, 1]
    achars = cols[:, 2]
    links = cols[:, 3]
    segs = cols[:, 4]
    first = np.arange(n)
    last = cols[:, 5].astype(np.intp)

    def subtree(values: NDArray[np.float64]) -> NDArray[np.float64]:
        acc = np.zeros(n + 1)
        np.cumsum(values, out=acc[1:])
        return acc[last] - acc[first]

    sub_chars = subtree(chars)
    sub_achars = subtree(achars)
    sub_links = subtree(links)
    children = np.bincount(parent[1:], minlength=n).astype(np.float64)
    total = max(sub_chars[0], 1.0)
    start = cols[:, 6]
    depth = cols[:, 7]

    col = 0

    def put(values: NDArray[np.float64] | float) -> None:
        nonlocal col
        X[:, col] = values
        col += 1

    anchor = np.where(chars > 0, achars / np.maximum(chars, 1.0), 0.0)
    sub_anchor = sub_achars / np.maximum(sub_chars, 1.0)
    put(np.log1p(chars))
    put(np.log1p(sub_chars))
    put(anchor)
    put(sub_anchor)
    put(links * 50.0 / (chars + 50.0))
    put(sub_links * 50.0 / (sub_chars + 50.0))
    put(np.log1p(chars / np.maximum(segs, 1.0)))
    put(np.log1p(segs))
    put(sub_chars / total)
    put(start / total)
    put((start + sub_chars) / total)
    put(np.minimum(depth, 40.0) / 40.0)
    put(np.log1p(children))
    put((chars > 0).astype(np.float64))

    # Statistics of the direct text (see text_stats).
    counts = text_stats(page)
    nonempty = chars > 0
    length = np.maximum(chars, 1.0)
    words = np.where(nonempty, counts[:, 0] + 1.0, 0.0)
    nw = np.maximum(words, 1.0)
    stats = np.zeros((n, 8))
    stats[:, 0] = counts[:, 1] / length
    stats[:, 1] = counts[:, 2] * 100.0 / (chars + 100.0)
    stats[:, 2] = np.log1p(words)
    stats[:, 3] = np.where(nonempty, np.minimum(chars / nw, 20.0) / 10.0, 0.0)
    stats[:, 4] = counts[:, 3] / length
    stats[:, 5] = counts[:, 4] / nw
    stats[:, 6] = counts[:, 8]
    stats[:, 7] = counts[:, 5] / nw
    X[:, col : col + 8] = stats
    col += 8

    # Context: the parent's link density and weight, the siblings' link density.
    par = np.maximum(parent, 0)
    put(np.where(parent >= 0, sub_anchor[par], 0.0))
    put(np.where(parent >= 0, sub_chars[par] / total, 1.0))
    sib_chars = np.bincount(par[1:], weights=sub_chars[1:], minlength=n)
    sib_achars = np.bincount(par[1:], weights=sub_achars[1:], minlength=n)
    put(np.where(parent >= 0, (sib_achars[par] - sub_achars) / np.maximum(sib_chars[par] - sub_chars, 1.0), 0.0))

    tag_cols = cols[:, 9].astype(np.intp)
    X[np.arange(n), col + tag_cols] = 1.0
    col += N_TAGS
    flags = cols[:, 8].astype(np.int64)
    pos = start / total
    width = len(FLAG_BITS_ARRAY)
    X[:, col : col + width] = (flags[:, None] & FLAG_BITS_ARRAY[None, :]) != 0
    col += width
    for values, edges in ((chars, _CHAR_EDGES), (sub_anchor, _ANCHOR_EDGES), (pos, _POS_EDGES)):
        width = len(edges)
        X[:, col : col + width] = values[:, None] >= edges[None, :]
        col += width
    put(sub_anchor * (sub_chars < 80))
    put(sub_anchor * (sub_chars >= 80))
    put((((flags & (F_THINT | F_IN_THINT)) != 0) & ((flags & F_IN_LIST) != 0)).astype(np.float64))

    # The main-content candidate, readability-style: text blocks with plain (non-link)
    # text vote for their parent and, half, for their grandparent; the node with most
    # votes holds the main content.
    plain = chars - achars
    vote = np.where(
        (plain >= 25) & (anchor < 0.5),
        1.0 + np.minimum(plain / 100.0, 3.0) + 0.5 * np.minimum(counts[:, 6], 5),
        0.0,
    )
    gpar = par[par]
    score = np.bincount(par[1:], weights=vote[1:], minlength=n) + np.bincount(
        gpar[1:], weights=0.5 * vote[1:], minlength=n
    )
    top = int(np.argmax(score)) if score.max() > 0 else 0
    in_main = (first >= top) & (first < last[top])
    main_start = start[top]
    main_end = start[top] + sub_chars[top]
    put(in_main.astype(np.float64))
    put(((start + sub_chars <= main_start) & ~in_main).astype(np.float64))
    put(((start >= main_end) & ~in_main).astype(np.float64))
    put(sub_chars[top] / total)
    put(1.0 if top == 0 else 0.0)

    # Neighbouring text blocks in document order.
    text_nodes = np.flatnonzero(chars > 0)
    prev_c = np.zeros(n)
    prev_a = np.zeros(n)
    next_c = np.zeros(n)
    next_a = np.zeros(n)
    if len(text_nodes) > 1:
        prev_c[text_nodes[1:]] = np.log1p(chars[text_nodes[:-1]])
        prev_a[text_nodes[1:]] = anchor[text_nodes[:-1]]
        next_c[text_nodes[:-1]] = np.log1p(chars[text_nodes[1:]])
        next_a[text_nodes[:-1]] = anchor[text_nodes[1:]]
    put(prev_c)
    put(prev_a)
    put(next_c)
    put(next_a)
    put(plain / max(float(plain.max()), 1.0))
    put(np.where(in_main, np.minimum(depth - depth[top], 10.0) / 10.0, -1.0))
    put(counts[:, 7])
    put(counts[:, 9] / nw)
    put(1.0)
    assert col == N_FEATURES
    return X


# The columns that hold a log1p: the compiled features leave its argument there and
# numpy takes it (numpy's SIMD log1p and libm's differ in the last bit on ~1% of values).
_LOG_COLUMNS = np.asarray(
    [FEATURE_NAMES.index(name) for name in (
        "log_chars", "log_sub_chars", "log_avg_seg", "log_segs", "log_children", "log_words",
        "prev_log_chars", "next_log_chars",
    )],
    dtype=np.intp,
)
_N_LOGS = len(_LOG_COLUMNS)
_N_NODE, _N_TEXT = len(NODE_COLUMNS), len(TEXT_COLUMNS)
_FLAG_BITS = np.ascontiguousarray(FLAG_BITS_ARRAY, dtype=np.longlong)


def compiled_features(kernel: Any, page: PageTree) -> NDArray[np.float64]:
    """`features` by the compiled kernel (`kernel`: the extension module or what has its
    `page_features` and `put_columns`, page/_walk.pyx): the same matrix.

    Timed in the pipeline (stage_times' conditions, where each numpy call runs cold), the
    numpy steps around the kernel cost more than it: the node columns and text statistics
    are handed over as the walk's own buffers (a memoryview, not three numpy calls each), and
    numpy's log1p goes over a contiguous copy of the log columns the kernel makes, written
    back by `put_columns` (fancy indexing's gather and scatter cost 20 us a page there).
    """
    n = len(page.parent)
    X = np.empty((n, N_FEATURES))
    if n == 0:
        return X
    cols = np.ascontiguousarray(node_columns(page)) if page.columns is None else _rows(page.columns, n, _N_NODE)
    counts = np.ascontiguousarray(text_stats(page)) if page.stats is None else _rows(page.stats, n, _N_TEXT)
    logs = np.empty((n, _N_LOGS))
    written = kernel.page_features(
        X, cols, counts, _FLAG_BITS, _CHAR_EDGES, _ANCHOR_EDGES, _POS_EDGES, N_TAGS, _LOG_COLUMNS, logs
    )
    if written != N_FEATURES:
        raise RuntimeError(f"the compiled features wrote {written} columns, not {N_FEATURES}")
    np.log1p(logs, out=logs)
    kernel.put_columns(X, _LOG_COLUMNS, logs)
    return X


def _rows(buffer: Any, n: int, width: int) -> memoryview[float]:
    """A flat buffer of doubles (the compiled walk's array) as n rows of `width`."""
    return memoryview(buffer).cast("B").cast("d", (n, width))


def compiled_scores(
    kernel: Any, model: PageLevelModel, X: NDArray[np.float64], rows: list[int] | None = None
) -> NDArray[np.float64]:
    """`model.scores(X)` (of the `rows` only, when given) by the compiled kernel
    (page/_walk.pyx `row_scores`): the same doubles."""
    out = np.empty(X.shape[0] if rows is None else len(rows))
    kernel.row_scores(X, model.weights, model.offset, out, rows)
    return out


def checked_kernel(mod: Any) -> Any:
    """`mod` when its compiled features give `features`' matrix on the probe page
    (page/compiled.py PROBE_PAGE) and its scores of it the model's, else None (then
    `features` and `PageLevelModel.scores` run)."""
    return compiled.agreeing(mod, ("page_features", "put_columns", "row_scores"), _features_agree)


def _features_agree(mod: Any) -> bool:
    probe = walk(LexborHTMLParser(compiled.PROBE_PAGE), SegmentParams())
    X = features(probe)
    if compiled_features(mod, probe).tobytes() != X.tobytes():
        return False
    model = load_model()
    nodes = probe.node_of_block
    # Rows past the four the kernel adds side by side, one row alone, and the blocks' rows.
    return all(
        compiled_scores(mod, model, part).tobytes() == model.scores(part).tobytes() for part in (X, X[:5], X[:1])
    ) and compiled_scores(mod, model, X, nodes).tobytes() == model.scores(X)[nodes].tobytes()


def features_kernel() -> Any:
    """The extension module where its compiled features and scores are in use, or None where
    numpy's `features` and `PageLevelModel.scores` run; chosen once, on first use, with the
    page walk (page/compiled.py)."""
    return compiled.checked(checked_kernel)


def model_scores(model: PageLevelModel, X: NDArray[np.float64], rows: list[int] | None = None) -> NDArray[np.float64]:
    """`model.scores(X)`, of the `rows` only when given, by the compiled kernel where it is in use."""
    kernel = features_kernel()
    if kernel is not None:
        return compiled_scores(kernel, model, X, rows)
    return model.scores(X if rows is None else X[np.asarray(rows, dtype=np.intp)])


def page_features(page: PageTree) -> NDArray[np.float64]:
    """`features`' matrix, by the compiled kernel where it is in use, else by `features`."""
    kernel = features_kernel()
    if kernel is None:
        return features(page)
    return compiled_features(kernel, page)


# -- the model --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PageLevelModel:
    """Logistic-regression weights over FEATURE_NAMES, with the feature scaling they expect."""

    names: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]
    # ((X - mean) / scale) @ coef = X @ weights - offset: the standardisation folded into
    # the weights, once per model rather than once per page.
    weights: NDArray[np.float64] = field(init=False, repr=False, compare=False)
    offset: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        weights = self.coef / self.scale
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "offset", float(self.mean @ weights))

    def scores(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each row's templateness, 1 / (1 + exp(-clip(X @ weights - offset, -30, 30))).

        The reference for the compiled `row_scores` (page/_walk.pyx), which `model_scores`
        runs where it gives these doubles: each row's products added in column order (numpy's
        cumsum adds so; a BLAS matrix product groups its sums by the CPU's vector width) and
        libm's exp (Python's math.exp; numpy's own differs from it in the last bit on CPUs
        with AVX-512). So a page's scores are the same bits whichever runs.
        """
        n = X.shape[0]
        if n == 0:
            return np.zeros(0)
        z = np.cumsum(X * self.weights, axis=1)[:, -1] - self.offset
        np.maximum(z, -30.0, out=z)
        np.minimum(z, 30.0, out=z)
        e = np.fromiter(map(math.exp, (-z).tolist()), dtype=np.float64, count=n)
        return 1.0 / (1.0 + e)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "detemplate-pagelevel-1",
            "features": list(self.names),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "coef": [round(float(v), 6) for v in self.coef],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PageLevelModel:
        if data.get("format") != "detemplate-pagelevel-1":
            raise ConfigError(f"not a page-level model (format {data.get('format')!r})")
        names = tuple(str(v) for v in data["features"])
        if names != FEATURE_NAMES:
            raise ConfigError("the page-level model was trained on other features than this version computes")
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "coef")]
        if any(a.shape != (N_FEATURES,) for a in arrays):
            raise ConfigError("page-level model arrays have the wrong length")
        return cls(names, arrays[0], arrays[1], arrays[2])


@lru_cache(maxsize=8)
def load_model(path: str = "") -> PageLevelModel:
    """The model in the file `path`, or the one shipped in detectors/data/pagelevel.json (cached)."""
    try:
        if not path:
            shipped = resources.files("detemplate.engine.detectors").joinpath("data/pagelevel.json")
            text = shipped.read_text(encoding="utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        return PageLevelModel.from_json(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the page-level model {path or '(shipped)'}: {exc}") from exc


def node_weights(page: PageTree, weighting: str) -> NDArray[np.float64]:
    """Each node's weight in the smoothing loss: text-less nodes weigh nothing."""
    chars = np.asarray(page.chars, dtype=np.float64)
    if weighting == "log":
        return np.log1p(chars)
    if weighting == "sqrt":
        return np.sqrt(chars)
    if weighting == "chars":
        return chars
    return (chars > 0).astype(np.float64)


def block_scores(
    page: PageTree,
    model: PageLevelModel,
    smoothing: float,
    weighting: str = "unit",
    max_values: int = 64,
    max_smooth_nodes: int = 5000,
) -> NDArray[np.float64]:
    """Templateness of each of `page.blocks`: classifier scores, smoothed over the tree."""
    if not page.blocks:
        return np.zeros(0)
    X = page_features(page)
    if smoothing > 0.0 and len(X) <= max_smooth_nodes:
        x, _ = isotonic_tree(model_scores(model, X), page.parent, smoothing, node_weights(page, weighting), max_values)
        scores = x[np.asarray(page.node_of_block, dtype=np.intp)]
    else:  # only the blocks' nodes are scored
        scores = model_scores(model, X, page.node_of_block)
    # A page-level model that calls the page's main text template has misread the page
    # (measured: this keeps articles written in an unusual style), so it never does.
    scores[main_block(page)] = 0.0
    return scores


# -- the detector ---------------------------------------------------------------------------


class PageScores(NamedTuple):
    """The page-level model's state for one page: each block's smoothed templateness."""

    scores: NDArray[np.float64]
    keys: tuple[int, ...] = ()  # it keeps nothing in the host's table


class PageLevel:
    """The page-level model's part in a page's decision: it runs on a host's first pages
    (`max_host_pages`; all of them when 0) and puts each block's templateness on the
    ballot, which the decision (engine/decision.py) weighs with the table's evidence."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        plp = params.pagelevel
        return plp.enabled and (plp.max_host_pages == 0 or table.pages < plp.max_host_pages)

    def prepare(
        self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams
    ) -> PageScores | None:
        if page.cues is None or not self.needs_cues(table, params):
            return None
        plp = params.pagelevel
        model = load_model(plp.model)
        return PageScores(
            block_scores(page.cues, model, plp.smoothing, plp.weighting, plp.max_values, plp.max_smooth_nodes)
        )

    def vote(self, mine: PageScores, dfs: list[int], ballot: Ballot) -> None:
        ballot.scores = mine.scores


PAGE_LEVEL = PageLevel()
