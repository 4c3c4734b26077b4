"""Algorithm knobs as frozen dataclasses, with the reason for each default.

Defaults marked "measured" were chosen with `detemplate eval` on the development
corpora; docs/measurements.md records the runs behind them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from worker.errors import ConfigError

# Layout tags that cut a page into blocks. The paper names "html tags that usually
# determine the page layout" without listing them. Measured: cutting at block-level
# HTML elements (paragraphs, list items and headings included) beats a coarse cut at
# table/div only, because a coarse block mixes a repeated heading with page-specific
# text and the 0.7 ratio then keeps or drops both together.
BLOCK_TAGS = frozenset(
    """html body div table thead tbody tfoot tr td th caption ul ol li dl dt dd p
    h1 h2 h3 h4 h5 h6 section article nav header footer aside main form fieldset
    legend pre blockquote figure figcaption address center details summary menu
    dialog hgroup search""".split()
)

# Elements whose text is never visible as page text.
SKIP_TAGS = frozenset(
    """head script style noscript template svg math iframe object embed canvas
    select option datalist textarea title meta link base""".split()
)

PATH_MODES = ("tag", "tag_class", "tag_id_class")


@dataclass(frozen=True, slots=True)
class SegmentParams:
    """How a page is cut into blocks and text segments.

    block_tags: elements that start a new block.
    skip_tags: elements whose whole subtree is not visible text.
    path_mode: how a DOM path names each element on it: ``tag`` (tag names only),
        ``tag_class`` (tag plus sorted class names) or ``tag_id_class`` (plus the id).
        Measured (docs/measurements.md): ``tag_class`` separates a site's nav list
        from an article list with the same tags, while ids are often generated per
        page (``post-1234``) and split one template segment into many.
    max_page_bytes: larger pages are rejected as ``too_large`` before parsing.
    max_nodes: pages with more elements and text nodes are rejected as ``too_many_nodes``.
    max_depth: pages nested deeper are rejected as ``too_deep``.
    """

    block_tags: frozenset[str] = BLOCK_TAGS
    skip_tags: frozenset[str] = SKIP_TAGS
    path_mode: str = "tag_class"
    max_page_bytes: int = 10 * 1024 * 1024
    max_nodes: int = 200_000
    max_depth: int = 400

    def __post_init__(self) -> None:
        if self.path_mode not in PATH_MODES:
            raise ConfigError(f"path_mode must be one of {PATH_MODES}, not {self.path_mode!r}")
        for name in ("max_page_bytes", "max_nodes", "max_depth"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")


@dataclass(frozen=True, slots=True)
class TableParams:
    """The per-host segment table of Wang et al. (WWW 2008).

    template_df: a segment seen on at least this many of the host's pages is a
        template segment (paper: 5).
    template_ratio: a block is template when its template segments make up more than
        this share of its text length (paper: 0.7).
    tb: pages a segment seen once survives without being seen again (the paper's Tb).
    n: the lifetime of a frequent segment tends to tb * n pages (the paper's N).
        The paper gives no values; tb and n were chosen by measurement.
    """

    template_df: int = 5
    template_ratio: float = 0.7
    tb: int = 100
    n: float = 10.0

    def __post_init__(self) -> None:
        if self.template_df < 1:
            raise ConfigError("template_df must be at least 1")
        if not 0.0 <= self.template_ratio < 1.0:
            raise ConfigError("template_ratio must be in [0, 1)")
        if self.tb < 1:
            raise ConfigError("tb must be at least 1")
        if self.n < 1.0:
            raise ConfigError("n must be at least 1")

    def lifetime(self, df: int) -> int:
        """Pages a segment with document frequency `df` lives unseen: Tb*N / (1 + (N-1) e^-(df-1))."""
        return max(1, round(self.tb * self.n / (1.0 + (self.n - 1.0) * math.exp(-(df - 1)))))


@dataclass(frozen=True, slots=True)
class EventParams:
    """When the detector tells consumers about a host's template.

    min_template_segments: the template counts as learned once the host has this
        many template segments.
    change_share: a ``template.changed`` event fires when the template segments added
        or expired since the last event reach this share of the template size then.
    """

    min_template_segments: int = 3
    change_share: float = 0.5

    def __post_init__(self) -> None:
        if self.min_template_segments < 1:
            raise ConfigError("min_template_segments must be at least 1")
        if self.change_share <= 0.0:
            raise ConfigError("change_share must be positive")


@dataclass(frozen=True, slots=True)
class EngineParams:
    """All algorithm knobs of one detector."""

    segment: SegmentParams = field(default_factory=SegmentParams)
    table: TableParams = field(default_factory=TableParams)
    events: EventParams = field(default_factory=EventParams)
