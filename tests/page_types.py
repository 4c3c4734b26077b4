"""Page types of three development sites by URL, and cluster purity against them.

Used by the quality gate (tests/tools/test_eval_gate.py: the engine's template clusters) and
by scripts/measure_clusters.py. The rules are approximate by nature (a URL names a page
type, not a layout): lilianweng-hugo's `tags/*/page/1/` pages, for one, are redirect
stubs of a layout of their own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence


def _path(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[1] if "/" in rest else ""


def type_lilianweng(url: str) -> str:
    p = _path(url)
    if p.startswith("tags/"):
        return "tag"
    if re.match(r"posts/\d{4}-", p):
        return "post"
    if p.startswith(("page/", "posts/page/")) or p in ("posts/", "posts/index.html"):
        return "list"
    return "other"


def type_lenskit(url: str) -> str:
    p = _path(url)
    for prefix in ("api/", "guide/"):
        if p.startswith(prefix):
            return prefix[:-1]
    return "other"


def type_antsr(url: str) -> str:
    p = _path(url)
    for prefix in ("docs/reference/", "docs/articles/"):
        if p.startswith(prefix):
            return prefix.split("/")[1]
    return "other"


URL_TYPES: dict[str, Callable[[str], str]] = {
    "site-lilianweng-hugo": type_lilianweng,
    "site-lenskit-docs": type_lenskit,
    "site-antsr-pkgdown": type_antsr,
}


def purity(labels: Sequence[int], types: Sequence[str]) -> tuple[float, float]:
    """Purity (majority type per cluster) and inverse purity (largest cluster per type)."""
    by_cluster: dict[int, Counter[str]] = {}
    by_type: dict[str, Counter[int]] = {}
    for lab, t in zip(labels, types, strict=True):
        by_cluster.setdefault(lab, Counter())[t] += 1
        by_type.setdefault(t, Counter())[lab] += 1
    n = len(labels)
    pur = sum(c.most_common(1)[0][1] for c in by_cluster.values()) / n
    inv = sum(c.most_common(1)[0][1] for c in by_type.values()) / n
    return pur, inv


