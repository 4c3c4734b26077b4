"""Regularised isotonic regression over a tree (Chakrabarti, Kumar, Punera, WWW 2007).

Templateness is monotone on the DOM tree: a node is template if and only if all its
children are. With raw classifier scores x_i (probability of being template), the
smoothed scores y_i must therefore satisfy

    y_parent <= y_child  for every edge of the tree,

and the paper picks the y minimising

    sum_i w_i |x_i - y_i|  +  c * (number of sections),

where a *section* is a maximal connected group of nodes sharing one y value (the
paper's "adjacent nodes with same y_i values"; each root opens one, and every edge
whose child takes a different value from its parent opens another). The weights w_i
default to 1, as in the paper.

For the L1 loss an optimal y takes only values among the x_j (the paper's lemma: fix
the sections and the problem is a linear programme whose vertices sit on data
values; merging two adjacent sections that end up equal only lowers the cost). The
dynamic programme over the candidate values v_1 < ... < v_K is then exact:

    C(i, k) = w_i |x_i - v_k| + sum_{j child of i} min( C(j, k),  c + min_{k' > k} C(j, k') )

and the optimum is sum over roots of c + min_k C(root, k). It costs O(n K) time and
memory; here it runs level by level with numpy, so the Python overhead is one step per
tree depth, not per node.

Cost bound: K is at most `max_values`. Beyond it the candidate set becomes `max_values`
evenly spaced quantiles of the scores, so the result is optimal over that grid only
(still monotone). The caller bounds n (detemplate.engine.detectors.pagelevel leaves trees above
`PageLevelParams.max_smooth_nodes` unsmoothed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def _levels(parent: Sequence[int]) -> list[NDArray[np.intp]]:
    """Node indices grouped by depth (roots at depth 0); parent[i] < i is not required."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    roots = []
    for i, p in enumerate(parent):
        if p < 0:
            roots.append(i)
        else:
            if not 0 <= p < n or p == i:
                raise ValueError(f"node {i} has invalid parent {p}")
            children[p].append(i)
    levels: list[NDArray[np.intp]] = []
    frontier = roots
    seen = 0
    while frontier:
        levels.append(np.asarray(frontier, dtype=np.intp))
        seen += len(frontier)
        frontier = [c for f in frontier for c in children[f]]
    if seen != n:
        raise ValueError("the parent array has a cycle")
    return levels


def isotonic_tree(
    x: Sequence[float] | FloatArray,
    parent: Sequence[int],
    c: float,
    weights: Sequence[float] | FloatArray | None = None,
    max_values: int = 256,
) -> tuple[FloatArray, float]:
    """Smoothed scores y (parent <= child) minimising weighted L1 + c * sections; and that cost.

    `parent[i]` is the index of node i's parent, or -1 for a root (a forest is allowed).
    With at most `max_values` distinct scores the result is exactly optimal.
    """
    xs = np.asarray(x, dtype=np.float64)
    n = xs.shape[0]
    if len(parent) != n:
        raise ValueError("x and parent differ in length")
    if n == 0:
        return xs.copy(), 0.0
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    values = np.unique(xs)
    if values.shape[0] > max_values:
        values = np.unique(np.quantile(xs, np.linspace(0.0, 1.0, max_values)))
    k = values.shape[0]
    par = np.asarray(parent, dtype=np.intp)
    levels = _levels(parent)

    # cost[i, k]: best cost of i's subtree with y_i = values[k] (sections inside it, not i's own).
    cost = w[:, None] * np.abs(xs[:, None] - values[None, :])
    # For each node, the best value index strictly above each k, and its cost (for backtracking).
    up_idx = np.empty((n, k), dtype=np.intp)
    up_cost = np.empty((n, k))
    for level in reversed(levels[1:]):
        sub = cost[level]  # children's subtree costs are final: deeper levels are done
        # Suffix minimum over k' >= k and where it is reached, from a right-to-left scan.
        rev = sub[:, ::-1]
        run_min = np.minimum.accumulate(rev, axis=1)
        updated = np.empty(rev.shape, dtype=bool)
        updated[:, 0] = True
        updated[:, 1:] = rev[:, 1:] <= run_min[:, :-1]
        last = np.maximum.accumulate(np.where(updated, np.arange(k)[None, :], 0), axis=1)
        suf_min = run_min[:, ::-1]
        suf_arg = (k - 1 - last)[:, ::-1]
        # Strictly above k: the suffix from k + 1, plus the price of a new section.
        strict_cost = np.full_like(sub, np.inf)
        strict_cost[:, :-1] = suf_min[:, 1:] + c
        strict_arg = np.full(sub.shape, -1, dtype=np.intp)
        strict_arg[:, :-1] = suf_arg[:, 1:]
        up_idx[level] = strict_arg
        up_cost[level] = strict_cost
        best = np.minimum(sub, strict_cost)
        np.add.at(cost, par[level], best)

    y_idx = np.empty(n, dtype=np.intp)
    roots = levels[0]
    y_idx[roots] = np.argmin(cost[roots], axis=1)
    total = float(cost[roots, y_idx[roots]].sum() + c * len(roots))
    for level in levels[1:]:
        pk = y_idx[par[level]]
        stay = cost[level, pk] <= up_cost[level, pk]
        y_idx[level] = np.where(stay, pk, up_idx[level, pk])
    return values[y_idx], total


def objective(
    x: Sequence[float] | FloatArray,
    y: Sequence[float] | FloatArray,
    parent: Sequence[int],
    c: float,
    weights: Sequence[float] | FloatArray | None = None,
) -> float:
    """The regularised cost of scores y for data x (sections counted as in the module doc)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    w = np.ones(len(xs)) if weights is None else np.asarray(weights, dtype=np.float64)
    sections = sum(1 for i, p in enumerate(parent) if p < 0 or ys[p] != ys[i])
    return float((w * np.abs(xs - ys)).sum() + c * sections)


def is_monotone(y: Sequence[float] | FloatArray, parent: Sequence[int]) -> bool:
    """Whether every node's score is at least its parent's."""
    return all(p < 0 or y[p] <= y[i] for i, p in enumerate(parent))
