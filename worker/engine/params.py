"""Algorithm knobs as frozen dataclasses, with the reason for each default.

Defaults marked "measured" were chosen with `detemplate eval` on the development
corpora; docs/measurements.md records the runs behind them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from functools import cache

from .errors import ConfigError

# Layout tags that cut a page into blocks. The paper names "html tags that usually
# determine the page layout" without listing them. Measured on the seven multi-page
# development corpora (docs/measurements.md): cutting at containers, tables and list
# items (macro F1 0.915) beats cutting at every block-level element, paragraphs and
# headings included (0.909): a fine cut isolates repeated in-content headings and code
# lines ("Arguments", "Examples"), which then reach DF 5 and are dropped as template,
# while in a container block they sit beside page-specific text and stay.
BLOCK_TAGS = frozenset(
    """html body div section article main header footer nav aside form fieldset
    table thead tbody tfoot tr td th caption ul ol li menu figure center details
    address dialog search hgroup""".split()
)

# Elements whose text is never visible as page text. `noembed` and `noframes` are fallback
# content for browsers without plugins or frames: HTML's rendering rules hide them
# (display: none in every browser's style sheet) and its parser reads their content as raw
# text, so markup inside them (an ad's `<a href=...><img ...>`) would otherwise be page text.
# What `video` and `audio` hold is fallback for browsers without media support, which the
# standard says user agents should not show ("Your browser does not support the video tag").
SKIP_TAGS = frozenset(
    """head script style noscript template svg math iframe object embed canvas
    select option datalist textarea title meta link base noembed noframes video audio""".split()
)

PATH_MODES = ("tag", "tag_class", "tag_id_class")

# What describes a page for template clusters (detemplate.engine.detectors.clusters.page_paths).
PAGE_FEATURES = ("blocks", "segments", "both")


@dataclass(frozen=True, slots=True)
class SegmentParams:
    """How a page is cut into blocks and text segments.

    block_tags: elements that start a new block.
    skip_tags: elements whose whole subtree is not visible text.
    path_mode: how a DOM path names each element on it: ``tag`` (tag names only),
        ``tag_class`` (tag plus sorted class names) or ``tag_id_class`` (plus the id).
        Measured (docs/measurements.md): tag names alone score best (macro F1 0.915
        against 0.906 with classes and 0.899 with ids): sites vary class names on
        template elements from page to page ("active", "current", per-section
        classes), which splits one template segment into several rare ones.
    max_page_bytes: larger pages are rejected as ``too_large`` before parsing.
    max_nodes: pages with more elements and text nodes are rejected as ``too_many_nodes``.
    max_depth: pages nested deeper are rejected as ``too_deep``.
    """

    block_tags: frozenset[str] = BLOCK_TAGS
    skip_tags: frozenset[str] = SKIP_TAGS
    path_mode: str = "tag"
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
    early_df: while the host has shown fewer than template_df pages, a segment seen on
        every one of them (and on at least early_df) already counts as template: the
        threshold is min(template_df, max(early_df, pages)). 0 turns this off (the
        paper). Measured: 2 raises macro F1 by 0.008 and precision by 0.011, since the
        paper's rule leaves a host's first four pages uncleaned.
    tb: pages a segment seen once survives without being seen again (the paper's Tb).
    n: the lifetime of a frequent segment tends to tb * n pages (the paper's N).
        The paper gives no values. Measured (docs/measurements.md): F1 barely moves
        between tb=10 and tb=200 (0.918 to 0.915), the table shrinks 5x from tb=100
        to tb=20; tb=20 keeps a section template alive when the section holds 5% of a
        host's pages, and n=25 lets a frequent segment outlive 500 unseen pages.
    """

    template_df: int = 5
    early_df: int = 2
    template_ratio: float = 0.7
    tb: int = 20
    n: float = 25.0

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
        return logistic_lifetime(self.tb, self.n, df)

    def lifetimes(self) -> list[int]:
        """`lifetime(df)` for df < LIFETIMES (the same beyond), shared by every table (see
        `logistic_lifetimes`)."""
        return logistic_lifetimes(self.tb, self.n)

    def threshold(self, pages: int, template_df: int = 0) -> int:
        """The DF that makes a key template in a table of `pages` pages: `template_df` (this
        table's when 0), lowered by the early rule while the table is young."""
        df = template_df or self.template_df
        if self.early_df and pages < df:
            return max(self.early_df, pages)
        return df


def logistic_lifetime(tb: int, n: float, count: int) -> int:
    """Tb*N / (1 + (N-1) e^-(count-1)), at least 1: the paper's lifetime of a segment seen on
    `count` pages (and of a template cluster that took `count` pages)."""
    return max(1, round(tb * n / (1.0 + (n - 1.0) * math.exp(-(count - 1)))))


LIFETIMES = 64  # exp(-(64-1)) is 0 in double precision: lifetimes are flat beyond


@cache
def logistic_lifetimes(tb: int, n: float) -> list[int]:
    """`logistic_lifetime(tb, n, count)` for count < LIFETIMES, computed once per (tb, n):
    a crawl makes or loads a segment table and a cluster assigner for every host it meets,
    and the 64 exp() calls cost 23 us each time. The list is shared; nothing changes it."""
    return [logistic_lifetime(tb, n, count) for count in range(LIFETIMES)]


@dataclass(frozen=True, slots=True)
class EventParams:
    """When the detector tells consumers about a host's template.

    min_template_segments: the template counts as learned once the host has this
        many template segments.
    change_share: a ``template.changed`` event fires when the template segments added
        or expired since the last event reach this share of the template size then.
        A redesign replaces the template: the new one's segments all reach the DF
        threshold within a few pages, so the added share approaches 1.
    settle_pages: for this many pages after template.learned the template is still
        being learned (more segments reach the threshold): no change event then.
    """

    min_template_segments: int = 3
    change_share: float = 0.8
    settle_pages: int = 20

    def __post_init__(self) -> None:
        if self.min_template_segments < 1:
            raise ConfigError("min_template_segments must be at least 1")
        if self.change_share <= 0.0:
            raise ConfigError("change_share must be positive")


@dataclass(frozen=True, slots=True)
class RegionParams:
    """The host's layout and each page's content region: where repetition is evidence of
    template (engine/decision.py, engine/detectors/layout.py, docs/region.md).

    enabled: learn layout paths and find content regions; off, the table's repetition
        is template evidence everywhere (Wang et al.'s rule alone).
    share: a page's content region is the deepest layout element that holds at least this
        share of the page's new plain text (characters of segments new to the host's
        table, outside links). Inside it, repeated text is content unless its layout path
        belongs to the host's layout.
    layout_novelty: a layout path belongs to the host's layout when it had new text on
        fewer than this share of the host's pages that had it (a menu: none; a paragraph
        or a member list: most),
    layout_presence: and when it is on at least this share of the host's pages (the
        layout is on every page of a site; a class page's inherited methods are not).
    container_share: the region widens to its deepest enclosing element that enclosed the
        host's regions on at least this share of its pages (the host's content container).
    wide_share: where that element enclosed them on fewer than this share of the pages (the
        host's pages put their regions in different parts of one container: a class page's
        method details on some, its description on others), the region widens further, to
        the nearest element around it, below the body, that enclosed them on at least this
        share, when what that element holds beside the region names no template or
        navigation and is at most half links (engine/decision.py `_whole_container`). 0
        turns it off. Chosen by reading what it keeps on ../shared/crawl, whose hosts are in
        no corpus (docs/region.md, "A container split between page types").
    slot_constant: beside the region (in the nearest element around it that holds other
        blocks, never the body), a block at a content slot (a layout path with new text on
        most pages that have it, on most of the host's pages: a product's title, price,
        attribute values) is content unless its text is the slot's constant text: at least
        half of it in template segments on at least this share of the pages that have the
        slot (a label, a notice), and none of it new to the host.
        0 turns the slots off. Chosen on generated shops: the corpora score within 0.001 for
        any value from 0.5 to 0.95 (docs/region.md, "Content slots beside the region").
    slot_link_chars: such a block with half of its text in two or more links is a link list
        (no slot's content) when its links average at least this many characters: titles of
        other pages (teasers, related stories, a menu's items), not names inside a line (the
        types of an API signature, a heading's module path). 0: every such block is a link
        list. Chosen by reading what it keeps on ../shared/crawl (the corpora score the same
        from 0 to 20: docs/region.md, "Link lists beside the region").
    link_column_score: the region does not widen over a part beside the page's own element
        that is more than half links and whose characters the page-level model scores above
        this templateness on average (a column of the site's other headlines beside an
        article on a page of a type new to its host), where the page's own element holds at
        least `link_column_plain` characters of plain text (an article, not an index whose
        content is the links beside it): it widens only as far as the part beside stays
        mostly text (engine/decision.py `_regions`). Above 1 turns it off. Chosen
        leave-one-corpus-out.
    link_column_plain: that least plain text, in characters. Chosen on ../shared/crawl, where
        no host is lower at 1,000 (at 500 two are; at 2,000 less is gained: docs/measurements.md,
        "A news page of a type new to its host").

    The others chosen by measurement, leave-one-corpus-out (docs/measurements.md).
    """

    enabled: bool = True
    share: float = 0.5
    layout_novelty: float = 0.5
    layout_presence: float = 0.7
    container_share: float = 0.5
    wide_share: float = 0.9
    slot_constant: float = 0.9
    slot_link_chars: float = 12.0
    link_column_score: float = 0.8
    link_column_plain: int = 1000

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ConfigError("region.share must be in (0, 1]")
        for name in ("layout_novelty", "layout_presence", "container_share", "wide_share", "slot_constant"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"region.{name} must be in [0, 1]")
        if not self.slot_link_chars >= 0.0:
            raise ConfigError("region.slot_link_chars must be >= 0")
        if not self.link_column_score >= 0.0:
            raise ConfigError("region.link_column_score must be >= 0")
        if self.link_column_plain < 0:
            raise ConfigError("region.link_column_plain must be >= 0")


@dataclass(frozen=True, slots=True)
class PageLevelParams:
    """The page-level templateness model (Chakrabarti, Kumar, Punera, WWW 2007): see docs/pagelevel.md.

    enabled: use it at all (False: the table alone).
    max_host_pages: the model runs on a host's pages up to this page number; later pages
        are decided without it. 0 runs it on every page.
    threshold: on a host's first page (nothing learned yet), a block is template when its
        templateness is above this (with `cold_ratio`: at most this).
    cold_ratio, cold_quantile, cold_floor: on a host's first page, the threshold relative to
        the page's own text: `cold_ratio` times the page's text level, the templateness
        under which `cold_quantile` of the page's text lies (by characters), kept between
        `cold_floor` and `threshold`. 0 for `cold_ratio`: `threshold` alone. `cold_floor` is
        not in the held-out grid: it is the fixed threshold of before (0.02), so the relative
        threshold only ever raises a first page's threshold; chosen on ../shared/crawl's
        first pages, where 0.01 removed their README prose (docs/measurements.md).
    inner_threshold: later, inside the page's content region, the model turns a block the
        table keeps into template (a page-specific box: related links, comments) when its
        templateness is above this, and above `inner_ratio` times the region's text level
        (the templateness under which `region_quantile` of the region's kept text lies, by
        characters): only a block the model finds far more template-like than the region's
        own text. 0 for `inner_ratio`: `inner_threshold` alone.
    outer_threshold: the same outside the content region; there, with `outer_ratio`, a block
        of new prose (at least half of its characters new to the host, less than half of its
        text in links) scoring no more than `outer_ratio` times the region's text level stays:
        page-specific text the model finds as content-like as the region's own (a section, a
        class's description beside a narrow region). 0 for `outer_ratio`: none stays.
    region_quantile: the region's text level is the templateness under which this share of
        its kept text lies (for `inner_ratio` and `outer_ratio`).
    max_removed_share: the model is ignored inside the content region of a page where it
        would remove more than this share of the region's text (a page whose content is
        links, such as an index); so are the table's removals there, of blocks no template
        word or navigation element names, where they would (a host whose pages so far are
        mostly of one type, its repeated content at paths that look like layout).
    cold_max_removed_share: the same on a host's first page, over all its text, with the
        model read at its lowest threshold (`cold_floor` with a ratio, else `threshold`).
    max_new_removed_share: on a later page, the model's removals of new text (text the
        host's table did not hold) are ignored where the page's verdicts would remove more
        than this share of all its new text: the page says nearly nothing of its own outside
        links, so its region is a sliver, and its content is the links the model removes
        beside it (an index, a listing of posts on a young host). Not in the held-out grid:
        on the corpora in their crawl order no page reaches it (the highest share, on a news
        page, is 0.84); chosen on ../shared/crawl's pages over 0.8 (docs/measurements.md, "A
        later page's new text nearly all removed").
    cold_min_kept: and the first page stays whole when the model, read there, would keep
        fewer than this many characters of it (a table of contents whose every line is a
        link, leaving the copyright line: not a page's content). 0: no such guard. Chosen on
        ../shared/crawl's first pages (the corpora score the same from 100 to 300:
        docs/measurements.md, "A first page the model would leave a line of").
    hold_first: a host's first page is decided once its second page is in the table
        (engine/firstpages.py), its output held for at most this many positions of the
        stream (offline: items of the input; the stream worker: messages of the partition);
        a host whose second page comes later has its first page as decided alone. 0: every
        first page decided alone, at once. 2000: in ../shared/crawl's order a host's second
        page comes up to 1,543 pages after its first; a held page costs about 115 KB of memory
        there (its HTML and its outcome alone), so at most this bound times the share of first
        pages in the stream (docs/measurements.md).
    smoothing: the isotonic regression's price c of one more section (0: no smoothing).
    weighting: each block's weight in the smoothing loss: ``unit`` (the paper), ``log``
        (log(1 + chars)), ``sqrt`` or ``chars``; text-less blocks weigh nothing.
    max_values: candidate values of the smoothing (beyond: a quantile grid).
    max_smooth_nodes: pages with more blocks are not smoothed (the cost is O(blocks x values)).
    model: a model file written by ``detemplate train-pagelevel``; empty: the shipped one.

    The thresholds and shares are chosen by measurement, leave-one-corpus-out
    (docs/measurements.md).
    """

    enabled: bool = True
    max_host_pages: int = 0
    threshold: float = 0.05
    cold_ratio: float = 30.0
    cold_quantile: float = 0.2
    cold_floor: float = 0.02
    inner_threshold: float = 0.1
    inner_ratio: float = 1000.0
    region_quantile: float = 0.7
    outer_threshold: float = 0.1
    outer_ratio: float = 10.0
    max_removed_share: float = 0.5
    cold_max_removed_share: float = 0.95
    max_new_removed_share: float = 0.9
    cold_min_kept: int = 200
    hold_first: int = 2000
    smoothing: float = 0.0
    weighting: str = "log"
    max_values: int = 64
    max_smooth_nodes: int = 5000
    model: str = ""

    def __post_init__(self) -> None:
        if self.weighting not in ("unit", "log", "sqrt", "chars"):
            raise ConfigError(f"weighting must be unit, log, sqrt or chars, not {self.weighting!r}")
        for name in (
            "threshold", "cold_quantile", "cold_floor", "inner_threshold", "region_quantile", "outer_threshold",
            "max_removed_share", "cold_max_removed_share", "max_new_removed_share",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"pagelevel.{name} must be in [0, 1]")
        for name in ("cold_ratio", "inner_ratio", "outer_ratio"):
            if not 0.0 <= getattr(self, name) < float("inf"):
                raise ConfigError(f"pagelevel.{name} must be a finite number >= 0")
        if self.smoothing < 0.0:
            raise ConfigError("smoothing must not be negative")
        if self.cold_min_kept < 0:
            raise ConfigError("pagelevel.cold_min_kept must be >= 0")
        if self.hold_first < 0:
            raise ConfigError("pagelevel.hold_first must be >= 0")
        if self.max_host_pages < 0 or self.max_values < 2 or self.max_smooth_nodes < 1:
            raise ConfigError("max_host_pages must be >= 0, max_values >= 2, max_smooth_nodes >= 1")


@dataclass(frozen=True, slots=True)
class PageletParams:
    """Pagelets (Bar-Yossef and Rajagopalan, WWW 2002) in the host's table: see docs/pagelets.md.

    A page's layout elements (the block tree of the page-level walk) are cut into
    pagelets by the paper's Definition 2: an element is a pagelet when none of its child
    elements holds k or more links and no ancestor is one; the text directly in an
    element that is cut further is a pagelet of its own. Each pagelet with at least
    `min_links` links is fingerprinted by `sketch_size` min-hash values of its set of
    segment keys; each value is a key in the host's table (tagged, so it never counts as a
    segment), with the segments' DF and logistic expiry. A pagelet's DF is the
    `quorum`-th highest DF of its values; it is a template pagelet when that reaches the
    segment threshold (template_df, or the early threshold on a young host).

    enabled: a block inside a template pagelet is template (method ``pagelet``) even when
        the table alone keeps it (a menu with one new item).
    events: template events list the template pagelets of the page that caused them.
    Either one makes every page's pagelet keys go into the host's table.
    k: links in a child element that cut an element further (paper: 3).
    sketch_size: min-hash values per pagelet, 1 to 8 (1: the paper's one shingle).
    quorum: values at the threshold that make a template pagelet, 1 to sketch_size.
    min_links: only pagelets with at least this many links are fingerprinted.
    max_listed: template pagelets listed in an event at most (the first, in page order).
    """

    enabled: bool = True
    events: bool = True
    k: int = 3
    w: int = 1
    sketch_size: int = 2
    quorum: int = 1
    template_df: int = 0
    min_links: int = 3
    min_anchor_share: float = 0.5
    max_listed: int = 32

    def __post_init__(self) -> None:
        if self.k < 1 or self.w < 1 or self.min_links < 0 or self.max_listed < 0:
            raise ConfigError("k must be at least 1, min_links and max_listed at least 0")
        if not 1 <= self.sketch_size <= 8:
            raise ConfigError("sketch_size must be in 1..8")
        if not 1 <= self.quorum <= self.sketch_size:
            raise ConfigError("quorum must be in 1..sketch_size")
        if self.template_df < 0 or not 0.0 <= self.min_anchor_share <= 1.0:
            raise ConfigError("template_df must be at least 0 and min_anchor_share in [0, 1]")

    @property
    def tracked(self) -> bool:
        """Whether pages put their pagelet keys in the host's table."""
        return self.enabled or self.events


@dataclass(frozen=True, slots=True)
class ClusterParams:
    """Several templates per host: each page is put in one of its host's template clusters.

    See docs/clusters.md. A page is described by the set of its blocks' DOM paths
    (`features`: ``blocks``; ``segments`` or ``both`` add its segment keys, the paper's
    text paths). Its MinHash signature (`num_perm` uint32 slots) is compared with the
    representative of each cluster sharing one of `bands` LSH bands with it; it joins the
    most similar when their estimated Jaccard coefficient is at least `threshold`,
    otherwise it opens a new cluster (a ``template.cluster_new`` event). The cluster id
    goes into the clean page. Clusters expire like segments: a cluster that took p pages
    expires when unseen for t(p) = tb*n / (1 + (n-1) e^-(p-1)) of the host's pages (the
    segment table's logistic lifetime, with its defaults: 20 pages for a one-page
    cluster, 51 for two, about 500 from ten on). A host keeps at most `max_clusters`; a
    new cluster evicts the least recently seen when full (``template.cluster_dropped``
    events). The assigner's state lives with the
    host's table (at most 24 + max_clusters x (20 + 4 num_perm) bytes).

    enabled: assign clusters (cluster ids, cluster events). Measured cost: docs/clusters.md.
    threshold: 0.6, measured: the best mean F of purity and inverse purity against URL
        page types on three sites (0.871; 0.4 and 0.5: 0.861, 0.7: 0.858, 0.8: 0.742),
        docs/clusters.md.
    statistics: keep segment statistics per cluster as well as per host (each segment key
        is also counted under a tagged key of the page's cluster, with the same DF and
        expiry), and call a segment template when either the host's table or its
        cluster's says so (the cluster's threshold counts the cluster's pages). Off:
        measured, it lowers F1 (docs/clusters.md).
    follow: the representative is the latest member's signature (True) or the first
        member's (False). False keeps the stream's per-page delta small: a signature is
        logged only when a cluster opens. Measured: following splits page types more
        (mean F of purity and inverse purity 0.863 against 0.871 at threshold 0.6).
    events: emit ``template.cluster_new`` (not for the host's first cluster) and
        ``template.cluster_dropped``.
    """

    enabled: bool = True
    statistics: bool = False
    events: bool = True
    features: str = "blocks"
    num_perm: int = 64
    bands: int = 16
    threshold: float = 0.6
    max_clusters: int = 8
    tb: int = 20
    n: float = 25.0
    follow: bool = False
    seed: int = 1

    def __post_init__(self) -> None:
        if self.features not in PAGE_FEATURES:
            raise ConfigError(f"clusters.features must be one of {PAGE_FEATURES}, not {self.features!r}")
        if not 1 <= self.num_perm <= 1024 or not 1 <= self.bands <= self.num_perm:
            raise ConfigError("clusters: need 1 <= num_perm <= 1024 and 1 <= bands <= num_perm")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError("clusters.threshold must be in (0, 1]")
        if self.max_clusters < 1 or self.tb < 1 or self.n < 1.0:
            raise ConfigError("clusters.max_clusters and clusters.tb must be at least 1, clusters.n at least 1.0")

    def lifetime(self, pages: int) -> int:
        """Host pages a cluster that took `pages` pages lives unseen."""
        return logistic_lifetime(self.tb, self.n, pages)

    def lifetimes(self) -> list[int]:
        """`lifetime(pages)` for pages < LIFETIMES (the same beyond), shared by every host's
        clusters (see `logistic_lifetimes`)."""
        return logistic_lifetimes(self.tb, self.n)


@dataclass(frozen=True, slots=True)
class EngineParams:
    """All algorithm knobs of one detector."""

    segment: SegmentParams = field(default_factory=SegmentParams)
    table: TableParams = field(default_factory=TableParams)
    events: EventParams = field(default_factory=EventParams)
    region: RegionParams = field(default_factory=RegionParams)
    pagelevel: PageLevelParams = field(default_factory=PageLevelParams)
    pagelets: PageletParams = field(default_factory=PageletParams)
    clusters: ClusterParams = field(default_factory=ClusterParams)


def add_param_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """The `--param SECTION.FIELD=VALUE` option every command that runs the engine takes."""
    parser.add_argument("--param", action="append", default=[], metavar="SECTION.FIELD=VALUE", help=help_text)


def with_overrides(params: EngineParams, overrides: list[str]) -> EngineParams:
    """Apply ``section.field=value`` overrides (e.g. ``table.tb=10``) to a copy of `params`.

    Values are parsed by the field's current type; sets of tags take a comma-separated list.
    """
    import dataclasses

    sections = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    for item in overrides:
        name, sep, raw = item.partition("=")
        section, dot, fname = name.strip().partition(".")
        if not sep or not dot or section not in sections:
            raise ConfigError(f"--param wants SECTION.FIELD=VALUE with SECTION in {sorted(sections)}, not {item!r}")
        current = sections[section]
        names = {f.name for f in dataclasses.fields(current)}
        if fname not in names:
            raise ConfigError(f"{section} has no parameter {fname!r}; it has {sorted(names)}")
        old = getattr(current, fname)
        value: object
        try:
            if isinstance(old, bool):
                value = raw.lower() in ("1", "true", "yes", "on")
            elif isinstance(old, int):
                value = int(raw)
            elif isinstance(old, float):
                value = float(raw)
            elif isinstance(old, frozenset):
                value = frozenset(t.strip() for t in raw.split(",") if t.strip())
            else:
                value = raw
        except ValueError as exc:
            raise ConfigError(f"bad value for {name}: {raw!r} ({exc})") from exc
        sections[section] = dataclasses.replace(current, **{fname: value})
    return dataclasses.replace(params, **sections)
