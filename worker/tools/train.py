"""Training the page-level model without hand labels, as the paper does.

The site-level detector labels the data, with the principle the engine decides by
(engine/decision.py): the template is the site's layout around the content, and
repetition is evidence of template only where the layout is. Over all pages of one host
(the two-pass form of the segment table: count first, then judge every page with the
host's full counts):

- a segment on at least min(df, max(2, ceil(df_share * pages))) of the host's pages is a
  template segment; a segment on no other page of the host is new text;
- a layout path (engine/detectors/layout.py) belongs to the host's layout when it had new
  text on fewer than `region.layout_novelty` of the pages that had it and is on at least
  `region.layout_presence` of the host's pages;
- each page's content region is the deepest layout element holding `region.share` of the
  page's new plain text, widened to the host's content container, as the layout detector
  finds it (engine/detectors/layout.py).

Outside the region, a block whose template segments make up at least `template_share` of
its text is labelled template. Inside it, such a block is template only at a layout path;
a block there of mostly new text is content. Left unlabelled: mostly repeated text inside
the region off the layout (member lists, inherited methods: content, but by the host's
repetition, which a page-level model cannot see; the decision keeps it by the table's
evidence), blocks of new text with more than `content_max_anchor` of link text inside the
region (per-page link lists: related articles, "next post", tag lists, the noise the paper
names), the other blocks outside the region (the site-level detector cannot tell a
page-specific box from a part of the content there), and hosts with too few pages to have
a template. (Labelling the repeated text inside the region content was measured too, and
kept the model from removing per-page link lists on news sites: docs/measurements.md.)

Each host's examples are weighted so that a host counts with the square root of its
number of labelled blocks (one big site does not drown a hundred small ones), and each
block with log(1 + chars), since the metric is about characters.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..engine.detectors.layout import content_region
from ..engine.detectors.pagelevel import FEATURE_NAMES, PageLevelModel, features
from ..engine.errors import BadInputError
from ..engine.model import RawPage
from ..engine.page import PageTree, parse, walk
from ..engine.params import RegionParams, SegmentParams

log = logging.getLogger(__name__)


# The region parameters the labels are made with (LabelParams.region).
LABEL_REGION = RegionParams(share=0.5, layout_novelty=0.5, layout_presence=0.5, container_share=0.5)


@dataclass(frozen=True, slots=True)
class LabelParams:
    """How the site-level detector turns a host's pages into labelled blocks (the module's doc).

    min_pages: hosts with fewer pages give no labels.
    df, df_share: a segment on at least min(df, max(2, ceil(df_share * pages))) of the
        host's pages is template.
    template_share: a block's share of template text at or above which it is template
        (outside the content region, or at a layout path).
    content_max_anchor: blocks of new text inside the region with more than this share of
        link text give no label.
    max_pages_per_host: later pages of bigger hosts are not used (bounds the cost).
    region: the layout and content-region parameters the labels are made with. Fixed here,
        at the plain halves, and not the decision's tuned `region` defaults: the decision's
        parameters are chosen on ballots that carry this model's scores, so a model whose
        labels moved with them would chase its own choice (docs/measurements.md).
    """

    min_pages: int = 2
    df: int = 5
    df_share: float = 0.5
    template_share: float = 0.9
    content_max_anchor: float = 0.3
    max_pages_per_host: int = 200
    region: RegionParams = LABEL_REGION


def host_threshold(pages: int, lp: LabelParams) -> int:
    return min(lp.df, max(2, math.ceil(lp.df_share * pages)))


def label_host(
    trees: list[PageTree], lp: LabelParams, rp: RegionParams
) -> Iterator[tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]:
    """Features, labels (1 = template) and char weights of one host's labelled blocks, page by page."""
    if len(trees) < lp.min_pages:
        return
    df: dict[int, int] = defaultdict(int)
    for page in trees:
        for key in {seg.key for block in page.blocks for seg in block.segments}:
            df[key] += 1
    threshold = host_threshold(len(trees), lp)
    # Each page's blocks: (chars, template chars, new chars, layout key).
    counted = []
    seen: dict[int, int] = defaultdict(int)
    fresh: dict[int, int] = defaultdict(int)
    for page in trees:
        rows = []
        paths_with_new = set()
        for block, node in zip(page.blocks, page.node_of_block, strict=True):
            chars = tchars = new = 0
            for seg in block.segments:
                chars += seg.length
                n = df[seg.key]
                if n >= threshold:
                    tchars += seg.length
                elif n == 1:
                    new += seg.length
            path = page.layout[node]
            rows.append((chars, tchars, new, path))
            if new:
                paths_with_new.add(path)
        for path in {row[3] for row in rows}:
            seen[path] += 1
        for path in paths_with_new:
            fresh[path] += 1
        counted.append(rows)
    # Each page's content region, and how many of the host's pages each container enclosed.
    chains = []
    enclosed: dict[int, int] = defaultdict(int)
    for page, rows in zip(trees, counted, strict=True):
        chain = [content_region(page, [row[2] for row in rows], rp.share)] if page.blocks else [0]
        while page.parent and page.parent[chain[-1]] >= 0:
            chain.append(page.parent[chain[-1]])
        chains.append(chain)
        for node in chain:
            enclosed[page.container[node]] += 1
    for page, rows, chain in zip(trees, counted, chains, strict=True):
        if not page.blocks:
            continue
        region = next((n for n in chain if enclosed[page.container[n]] >= rp.container_share * len(trees)), chain[-1])
        first, end = region, page.end[region]
        X = features(page)
        nodes = []
        labels = []
        weights = []
        for (chars, tchars, _new, path), node in zip(rows, page.node_of_block, strict=True):
            repeated = tchars >= lp.template_share * chars
            if first <= node < end:
                layout = fresh[path] < rp.layout_novelty * seen[path] and seen[path] >= rp.layout_presence * len(trees)
                # Unlabelled: mostly repeated text that is not template (its repetition is
                # site-level evidence the model cannot see), and link lists of new text
                # (related articles, next post).
                unclear = 2 * tchars > chars or (
                    2 * tchars < chars and page.achars[node] > lp.content_max_anchor * chars
                )
                if layout and repeated:
                    label = 1.0
                elif unclear:
                    continue
                else:
                    label = 0.0
            elif repeated:
                label = 1.0
            else:
                continue
            nodes.append(node)
            labels.append(label)
            weights.append(math.log1p(chars))
        if nodes:
            yield X[nodes], np.asarray(labels), np.asarray(weights)


def collect(
    pages: Iterable[RawPage], params: SegmentParams, lp: LabelParams, rp: RegionParams
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], dict[str, int]]:
    """Walk every page, label each host's blocks, and weight the hosts (see the module doc)."""
    by_host: dict[str, list[PageTree]] = defaultdict(list)
    skipped = 0
    for page in pages:
        host_pages = by_host[page.host]
        if len(host_pages) >= lp.max_pages_per_host:
            continue
        try:
            host_pages.append(walk(parse(page.html, params), params))
        except BadInputError:
            skipped += 1
    X, y, w, stats = labelled_set(by_host.values(), lp, rp)
    stats["hosts"] = len(by_host)
    stats["skipped_pages"] = skipped
    return X, y, w, stats


def labelled_set(
    hosts_trees: Iterable[list[PageTree]], lp: LabelParams, rp: RegionParams
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], dict[str, int]]:
    """Features, labels and weights of all labelled blocks of the hosts' walked pages."""
    Xs, ys, ws = [], [], []
    hosts = 0
    for trees in hosts_trees:
        parts = list(label_host(trees, lp, rp))
        if not parts:
            continue
        X = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        w = np.concatenate([p[2] for p in parts])
        w *= math.sqrt(len(y)) / w.sum() * w.mean()
        hosts += 1
        Xs.append(X)
        ys.append(y)
        ws.append(w)
    stats = {"labelled_hosts": hosts, "blocks": 0, "template_blocks": 0}
    if not Xs:
        return np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), np.zeros(0), stats
    y_all = np.concatenate(ys)
    stats["blocks"] = len(y_all)
    stats["template_blocks"] = int(y_all.sum())
    return np.concatenate(Xs), y_all, np.concatenate(ws), stats


def fit_logistic(
    X: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64], l2: float = 1.0, iterations: int = 50
) -> PageLevelModel:
    """L2-regularised weighted logistic regression by Newton's method (IRLS), in numpy.

    Features are standardised first (the bias column is left alone and not penalised).
    A column constant over the training blocks is another intercept (`has_text`: every
    labelled block has text): it gets no weight, the bias alone is the intercept. Fitted
    beside it, the two split one weight between them as rounding fell (a singular Hessian),
    and the split moved with the machine's BLAS kernel.
    """
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    const = scale < 1e-9
    mean[const] = 0.0
    scale[const] = 1.0
    fitted = ~const
    fitted[FEATURE_NAMES.index("bias")] = True
    Z = (X[:, fitted] - mean[fitted]) / scale[fitted]
    d = Z.shape[1]
    penalty = np.where(const[fitted], 0.0, float(l2))  # the bias is not shrunk
    penalty *= w.sum() / max(len(w), 1)
    beta = np.zeros(d)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ beta, -30.0, 30.0)))
        grad = Z.T @ (w * (p - y)) + penalty * beta
        hess = (Z * (w * p * (1.0 - p))[:, None]).T @ Z + np.diag(penalty) + 1e-9 * np.eye(d)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if float(np.abs(step).max()) < 1e-7:
            break
    coef = np.zeros(len(fitted))
    coef[fitted] = beta
    return PageLevelModel(FEATURE_NAMES, mean, scale, coef)
