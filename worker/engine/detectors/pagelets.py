"""Pagelets, shingles and templates (Bar-Yossef and Rajagopalan, WWW 2002).

A page is cut into pagelets by the paper's syntactic definition (Definition 2): an HTML
element is a pagelet when none of its children holds at least k links and none of its
ancestors is a pagelet (k = 3). The partition is the paper's Figure 3: start at the root;
an element with a child that holds k or more links hands the walk on to all its
children, any other element is a pagelet.

Each pagelet gets a Broder-style fingerprint: the set of its w-shingles (w consecutive
tokens; the tokens are its lower-cased words and the absolute URLs of its links, in
document order), summarised by a min-hash sketch of `sketch_size` values. The paper
associates one shingle with each template and asks s(p) = s(T) of every pagelet p in T;
we take the first min-hash as that shingle. Two pagelets share it with probability equal
to the Jaccard resemblance of their shingle sets, so a navigation bar with one changed
item (resemblance around 0.7) usually keeps its shingle, while unrelated text does not.

Two template detectors over a collection of pages (per host, as the batch command runs
them):

- local (Figure 4): drop duplicate pages (same page sketch), group the pagelets by
  shingle; a group whose pagelets lie on at least `min_pages` pages is a template.
- global (Figure 5): for each shingle that occurs at least twice, the owner pages of its
  pagelets; the undirected connected components of the link graph among those pages
  (links resolved to absolute URLs, fragments dropped) are the templates; singletons
  are not.

The same walk also yields, for every pagelet, the segment keys of the text nodes inside
it (the keys `detemplate.engine.page.guards` gives them).

In the stream (detemplate.engine.pipeline), pagelets are cut from the block tree the page-level walk
already built (`block_pagelets`, no second walk) and fingerprinted by a min-hash of their
sets of segment keys (`page_sketches`); the min-hash values are keys of the host's own
segment table, tagged (engine/keys.py TAG), so they get the same DF and expiry.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any
from urllib.parse import urldefrag, urljoin, urlsplit

import numpy as np
from selectolax.lexbor import LexborHTMLParser, LexborNode
from xxhash import xxh3_64_intdigest

from ..errors import BadInputError
from ..keys import mix64, segment_key, tag
from ..model import RawPage
from ..page import parse
from ..page.python import path_component
from ..params import PageletParams, SegmentParams

if TYPE_CHECKING:
    from ..page.tree import PageTree

_TEXT_ID = 2
_WORD = re.compile(r"\w+")
_MASK = (1 << 64) - 1
# Min-hash permutations h -> a*h + b (mod 2^64), a odd: fixed, so sketches are stable
# across processes and machines.
_PERM_A = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                    0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                   dtype=np.uint64)  # fmt: skip
_PERM_B = np.array([0x2545F4914F6CDD1D, 0x9FB21C651E98DF25, 0x60642E2A34326F15, 0x1D8E4E27C47D124F,
                    0x5851F42D4C957F2D, 0x14057B7EF767814F, 0xDA942042E4DD58B5, 0x3C6EF372FE94F82B],
                   dtype=np.uint64)  # fmt: skip
MAX_SKETCH = len(_PERM_A)
SAMPLE_CHARS = 200  # text kept of each pagelet in a batch


@dataclass(frozen=True, slots=True)
class PageletConfig:
    """Knobs of the pagelet partition and fingerprints.

    k: an element whose children all hold fewer than k links is a pagelet (paper: 3).
    w: tokens per shingle (Broder et al. use 10 words on whole documents; pagelets are
        short, so 4).
    sketch_size: min-hash values per pagelet (the first is the pagelet's shingle).
    """

    k: int = 3
    w: int = 4
    sketch_size: int = 4

    def __post_init__(self) -> None:
        if self.k < 1 or self.w < 1 or not 1 <= self.sketch_size <= MAX_SKETCH:
            raise ValueError(f"k and w must be >= 1 and sketch_size in 1..{MAX_SKETCH}")


@dataclass(slots=True)
class Pagelet:
    """One pagelet of a page.

    path: DOM path of its element (as `SegmentParams.path_mode` names elements).
    order: position among the page's pagelets, in document order.
    text: its visible text, whitespace-normalised.
    links: absolute URLs of its links (http and https), in document order.
    keys: segment keys of the text nodes inside it (as detemplate.engine.page.guards computes them).
    sketch: min-hash values of its w-shingles; empty when it has no tokens.
    """

    path: str
    order: int
    text: str
    links: list[str]
    keys: list[int]
    sketch: tuple[int, ...] = ()

    @property
    def shingle(self) -> int:
        """The paper's s(p): the first min-hash (0 for a pagelet without tokens)."""
        return self.sketch[0] if self.sketch else 0


class _El:
    __slots__ = ("href", "items", "n_links", "path")

    def __init__(self, path: str, href: str | None) -> None:
        self.path = path
        self.n_links = 1 if href is not None else 0
        # Children in document order: (segment key, text) for text, _El for elements.
        self.items: list[tuple[int, str] | _El] = []
        self.href = href


def base_url(tree: LexborHTMLParser, url: str) -> str:
    """The URL relative links resolve against: the first `<base href>` (itself resolved) or the page URL.

    Looked for among the children of the head, where the parser puts a valid one, and of
    the body, where archived pages carry one after an inserted toolbar. Measured: a CSS
    query over the whole tree costs 170 us a page, `tags("base")` 77 us, searching the
    HTML text for "<base" 50 us; these two short child lists under 10 us.
    """
    for parent in (tree.head, tree.body):
        if parent is None:
            continue
        for node in parent.iter():
            if node.tag == "base":
                href = (node.attrs.get("href") or "").strip()
                if href:
                    return urljoin(url, href)
    return url


def resolve(base: str, href: str) -> str | None:
    """Absolute http(s) URL of a link without its fragment; None for in-page, mailto:, javascript: links."""
    href = href.strip()
    if not href or href[0] == "#":
        return None
    try:
        absolute = urljoin(base, href)
    except ValueError:
        return None
    if not absolute.startswith(("http://", "https://")):
        return None
    return urldefrag(absolute)[0]


def _remove_dots(path: str) -> str:
    """RFC 3986 remove_dot_segments on an absolute path (what urljoin does to `.` and `..`)."""
    out: list[str] = []
    segs = path.split("/")
    for seg in segs:
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segs[-1] in (".", ".."):
        out.append("")
    return "/".join(out)


def absolute_links(base: str, hrefs: Iterable[str]) -> list[str]:
    """`resolve` over many hrefs, distinct, in first-seen order.

    Measured: urllib's urljoin costs about 7 us a link, over a millisecond on a
    documentation page with 180 relative links; the common shapes (absolute, root-relative,
    path-relative) are joined here directly, with urljoin's results (tests compare them).
    A host's pages repeat most of their links (the template's): results that depend only
    on the base's origin and directory are kept in a bounded cache.
    """
    parts = urlsplit(base)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return []
    origin = f"{scheme}://{parts.netloc}"
    base_path = parts.path or "/"
    base_dir = base_path[: base_path.rfind("/") + 1]
    where = origin + base_dir
    cache = _RESOLVED
    seen: set[str] = set()
    out: list[str] = []
    for href in dict.fromkeys(hrefs):  # a page repeats hrefs: each distinct one once
        # Absolute and root-relative links resolve the same from every page of the origin,
        # relative ones from every page in the same directory.
        url = cache.get((origin, href), _MISS)
        if url is _MISS:
            url = cache.get((where, href), _MISS)
        if url is _MISS:
            url, reuse = _resolve_href(href, base, scheme, origin, base_path, base_dir)
            if reuse and len(href) <= _RESOLVED_MAX_CHARS:
                if len(cache) >= _RESOLVED_MAX:
                    cache.clear()
                cache[(origin if reuse == _ORIGIN else where, href)] = url
        if url is not None and url not in seen:
            seen.add(url)
            out.append(url)
    return out


_MISS = object()
_ORIGIN, _DIRECTORY = 1, 2  # what besides the href decided a link's URL (0: the whole base)
_RESOLVED: dict[tuple[str, str], Any] = {}  # (origin + base directory, href) -> URL or None
_RESOLVED_MAX = 1 << 16
_RESOLVED_MAX_CHARS = 512


def _resolve_href(
    href: str, base: str, scheme: str, origin: str, base_path: str, base_dir: str
) -> tuple[str | None, int]:
    """One href's absolute URL (None: not a page link), and what of the base decided it:
    _ORIGIN, _DIRECTORY, or 0 (more: the page's path or the whole base)."""
    href = href.strip()
    if not href or href[0] == "#":
        return None, _ORIGIN
    if "\n" in href or "\t" in href or "\r" in href:
        href = href.replace("\n", "").replace("\t", "").replace("\r", "")  # as browsers do
    cut = href.find("#")
    if cut >= 0:
        href = href[:cut]
    reuse = _ORIGIN
    if href.startswith(("https://", "http://")):
        url = href
    else:
        colon = href.find(":")
        if colon >= 0 and not any(c in href[:colon] for c in "/?"):
            # A scheme of its own: http(s) in capitals goes through urljoin, others are no page links.
            if href[:colon].lower() not in ("http", "https"):
                return None, _ORIGIN
            try:
                url = urljoin(base, href)
            except ValueError:
                return None, 0
            reuse = 0
        elif href.startswith("//"):
            url = f"{scheme}:{href}"
        else:
            if href[0] == "/":
                path = href
            elif href[0] == "?":
                path = base_path + href
                reuse = 0
            else:
                path = base_dir + href
                reuse = _DIRECTORY
            if "." in path:
                q = path.find("?")
                head, tail = (path, "") if q < 0 else (path[:q], path[q:])
                if "/." in head or head.startswith("."):
                    path = _remove_dots(head) + tail
            url = origin + path
    if url[-1] == "?" and url.find("?") == len(url) - 1:
        url = url[:-1]  # an empty query, as urljoin drops it
    return url, reuse


def _build(tree: LexborHTMLParser, params: SegmentParams) -> _El | None:
    """The page's element tree with per-subtree link counts, text nodes keyed as in detemplate.engine.page.guards."""
    root = tree.root
    if root is None:
        return None
    skip = params.skip_tags
    mode = params.path_mode
    by_tag = mode == "tag"
    max_depth = params.max_depth

    def visit(node: LexborNode, el: _El, depth: int) -> None:
        if depth >= max_depth:
            raise BadInputError("too_deep", f"the DOM is nested deeper than {max_depth} elements")
        for child in node.iter(include_text=True, skip_empty=True):
            if child.tag_id == _TEXT_ID:
                raw = child.text_content
                if raw:
                    text = " ".join(raw.split())
                    if text:
                        el.items.append((segment_key(el.path, text), text))
                continue
            tag = child.tag
            if tag is None or tag[0] == "-" or tag in skip:
                continue
            href = child.attributes.get("href") if tag == "a" else None
            sub = _El(f"{el.path}/{tag if by_tag else path_component(child, tag, mode)}", href)
            if child.child is not None:
                visit(child, sub, depth + 1)
            el.items.append(sub)
            el.n_links += sub.n_links

    tag = root.tag or "html"
    top = _El(tag if by_tag else path_component(root, tag, mode), None)
    visit(root, top, 1)
    return top


def _partition(top: _El, k: int) -> list[_El]:
    """The paper's Figure 3, in document order."""
    out: list[_El] = []
    stack = [top]
    while stack:
        v = stack.pop()
        kids = [c for c in v.items if isinstance(c, _El)]
        if any(c.n_links >= k for c in kids):
            stack.extend(reversed(kids))
        else:
            out.append(v)
    return out


def _gather(el: _El, base: str, texts: list[str], links: list[str], keys: list[int], tokens: list[str]) -> None:
    if el.href is not None:
        url = resolve(base, el.href)
        if url is not None:
            links.append(url)
            tokens.append(url)
    for item in el.items:
        if isinstance(item, _El):
            _gather(item, base, texts, links, keys, tokens)
        else:
            keys.append(item[0])
            texts.append(item[1])
            tokens.extend(_WORD.findall(item[1].lower()))


def _shingle_hashes(tokens: Sequence[str], w: int) -> list[int]:
    if len(tokens) <= w:
        return [xxh3_64_intdigest("\x1f".join(tokens).encode())] if tokens else []
    return [xxh3_64_intdigest("\x1f".join(tokens[i : i + w]).encode()) for i in range(len(tokens) - w + 1)]


def sketches(groups: Sequence[Sequence[int]], size: int) -> list[tuple[int, ...]]:
    """Min-hash sketch of each group of shingle hashes (empty group: empty sketch)."""
    lengths = [len(g) for g in groups]
    flat = [h for g in groups for h in g]
    if not flat:
        return [() for _ in groups]
    hashes = np.array(flat, dtype=np.uint64)
    starts = np.cumsum([0, *lengths[:-1]])
    nonempty = np.array(lengths) > 0
    idx = starts[nonempty]
    cols = []
    with np.errstate(over="ignore"):
        for a, b in zip(_PERM_A[:size], _PERM_B[:size], strict=True):
            cols.append(np.minimum.reduceat(hashes * a + b, idx))
    mins = np.stack(cols, axis=1).tolist()
    out: list[tuple[int, ...]] = []
    it = iter(mins)
    for ne in nonempty:
        out.append(tuple(next(it)) if ne else ())
    return out


def page_pagelets(
    tree: LexborHTMLParser, url: str, seg: SegmentParams, config: PageletConfig = PageletConfig()
) -> list[Pagelet]:
    """The pagelets of a parsed page, with their text, links, segment keys and sketches."""
    top = _build(tree, seg)
    if top is None:
        return []
    base = base_url(tree, url)
    pagelets: list[Pagelet] = []
    token_lists: list[list[str]] = []
    for i, el in enumerate(_partition(top, config.k)):
        texts: list[str] = []
        links: list[str] = []
        keys: list[int] = []
        tokens: list[str] = []
        _gather(el, base, texts, links, keys, tokens)
        pagelets.append(Pagelet(el.path, i, " ".join(texts), links, keys))
        token_lists.append(tokens)
    sks = sketches([_shingle_hashes(t, config.w) for t in token_lists], config.sketch_size)
    for p, sk in zip(pagelets, sks, strict=True):
        p.sketch = sk
    return pagelets


def page_links(tree: LexborHTMLParser, url: str) -> list[str]:
    """Every absolute link of a page (for the link graph of the global algorithm)."""
    base = base_url(tree, url)
    out = []
    for node in tree.css("a[href]"):
        u = resolve(base, node.attributes.get("href") or "")
        if u is not None:
            out.append(u)
    return out


# -- batch detection ------------------------------------------------------------------


@dataclass(slots=True)
class PageRecord:
    """What the detectors keep of one page: its pagelets (with text) and its out-links."""

    url: str
    host: str
    pagelets: list[Pagelet]
    links: set[str]
    fingerprint: int  # hash of the page's distinct pagelet shingles: equal for near-duplicate pages


@dataclass(slots=True)
class Template:
    """One detected template: pagelets sharing a shingle on several pages.

    shingle: the shared shingle s(T), as 16 hex digits.
    pages: number of distinct pages owning its pagelets.
    urls: those pages (sorted).
    sample: the text of one of its pagelets.
    links: the links of that pagelet.
    path: that pagelet's DOM path.
    """

    host: str
    shingle: str
    pages: int
    urls: list[str]
    sample: str
    links: list[str]
    path: str
    algorithm: str

    def as_dict(self, max_urls: int = 5) -> dict[str, object]:
        return {
            "host": self.host,
            "algorithm": self.algorithm,
            "shingle": self.shingle,
            "pages": self.pages,
            "path": self.path,
            "sample": self.sample,
            "links": self.links,
            "example_urls": self.urls[:max_urls],
        }


@dataclass(slots=True)
class BatchResult:
    """Per host: the templates found, page counts, and the share of links in template pagelets."""

    templates: dict[str, list[Template]] = field(default_factory=dict)
    pages: dict[str, int] = field(default_factory=dict)
    distinct_pages: dict[str, int] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)
    template_links: dict[str, int] = field(default_factory=dict)
    dead: int = 0


def read_page(page: RawPage, seg: SegmentParams, config: PageletConfig) -> PageRecord:
    """Parse one page into what the detectors need; raises BadInputError for unusable input."""
    tree = parse(page.html, seg)
    pagelets = page_pagelets(tree, page.url, seg, config)
    for p in pagelets:
        # A batch holds every page's pagelets: keep only what a report shows, and one copy
        # of each path and URL (a host's pages repeat them).
        p.text = p.text[:SAMPLE_CHARS]
        p.keys = []
        p.path = sys.intern(p.path)
        p.links = [sys.intern(u) for u in p.links]
    links = {u for p in pagelets for u in p.links}
    # Page sketch for duplicate detection: min-hashes of all the page's pagelet shingles
    # (a page's shingle set is, up to the pagelet seams, the union of its pagelets').
    shingle_set = sorted({p.sketch[0] for p in pagelets if p.sketch})
    fingerprint = xxh3_64_intdigest(np.array(shingle_set, dtype=np.uint64).tobytes())
    return PageRecord(urldefrag(page.url)[0], page.host, pagelets, links, fingerprint)


def _groups(records: Sequence[PageRecord]) -> dict[int, list[tuple[int, Pagelet]]]:
    """shingle -> [(page index, pagelet)] over pages, pagelets without tokens left out."""
    groups: dict[int, list[tuple[int, Pagelet]]] = defaultdict(list)
    for i, rec in enumerate(records):
        for p in rec.pagelets:
            if p.sketch:
                groups[p.sketch[0]].append((i, p))
    return groups


def _template(
    host: str, shingle: int, members: list[tuple[int, Pagelet]], records: Sequence[PageRecord], algo: str
) -> Template:
    urls = sorted({records[i].url for i, _ in members})
    _, rep = members[0]
    return Template(host, f"{shingle:016x}", len(urls), urls, rep.text, rep.links, rep.path, algo)


def dedupe(records: Sequence[PageRecord]) -> list[PageRecord]:
    """Step (1) of the local algorithm: keep the first page of each fingerprint (near-duplicates dropped)."""
    seen: set[int] = set()
    out = []
    for rec in records:
        if rec.fingerprint in seen:
            continue
        seen.add(rec.fingerprint)
        out.append(rec)
    return out


def local_templates(host: str, records: Sequence[PageRecord], min_pages: int = 2) -> list[Template]:
    """The local algorithm (Figure 4): shingle groups on at least `min_pages` distinct pages."""
    records = dedupe(records)
    out = []
    for shingle, members in _groups(records).items():
        if len({i for i, _ in members}) >= min_pages:
            out.append(_template(host, shingle, members, records, "local"))
    out.sort(key=lambda t: (-t.pages, t.shingle))
    return out


def global_templates(host: str, records: Sequence[PageRecord], min_pages: int = 2) -> list[Template]:
    """The global algorithm (Figure 5): connected components of each shingle group's link graph."""
    index_of: dict[str, int] = {}
    for i, rec in enumerate(records):
        index_of.setdefault(rec.url, i)
    out = []
    for shingle, members in _groups(records).items():
        if len(members) < 2:
            continue  # step (1): shingles with at least two occurrences
        owners = sorted({i for i, _ in members})
        if len(owners) < min_pages:
            continue
        owner_set = set(owners)
        adj: dict[int, set[int]] = {i: set() for i in owners}
        for i in owners:  # steps (3)-(4): the links between pages of the group, undirected
            for u in records[i].links:
                j = index_of.get(u)
                if j is not None and j != i and j in owner_set:
                    adj[i].add(j)
                    adj[j].add(i)
        seen: set[int] = set()
        for start in owners:  # step (5): BFS components, singletons dropped
            if start in seen:
                continue
            comp = [start]
            seen.add(start)
            queue = [start]
            while queue:
                v = queue.pop()
                for x in adj[v]:
                    if x not in seen:
                        seen.add(x)
                        comp.append(x)
                        queue.append(x)
            if len(comp) >= min_pages:
                cs = set(comp)
                out.append(_template(host, shingle, [m for m in members if m[0] in cs], records, "global"))
    out.sort(key=lambda t: (-t.pages, t.shingle))
    return out


def detect(records_by_host: dict[str, list[PageRecord]], algorithm: str = "local", min_pages: int = 2) -> BatchResult:
    """Run one detector per host; count each host's links and those inside template pagelets."""
    if algorithm not in ("local", "global"):
        raise ValueError(f"algorithm must be local or global, not {algorithm!r}")
    result = BatchResult()
    find = local_templates if algorithm == "local" else global_templates
    for host, records in sorted(records_by_host.items()):
        templates = find(host, records, min_pages)
        result.templates[host] = templates
        result.pages[host] = len(records)
        result.distinct_pages[host] = len(dedupe(records))
        shingles = {int(t.shingle, 16) for t in templates}
        n = t_n = 0
        for rec in records:
            for p in rec.pagelets:
                n += len(p.links)
                if p.sketch and p.sketch[0] in shingles:
                    t_n += len(p.links)
        result.links[host] = n
        result.template_links[host] = t_n
    return result


def read_pages(
    pages: Iterable[RawPage], seg: SegmentParams, config: PageletConfig
) -> tuple[dict[str, list[PageRecord]], int]:
    """Group readable pages by host; count the unusable ones."""
    by_host: dict[str, list[PageRecord]] = defaultdict(list)
    dead = 0
    for page in pages:
        try:
            rec = read_page(page, seg, config)
        except BadInputError:
            dead += 1
            continue
        by_host[page.host].append(rec)
    return dict(by_host), dead


# -- pagelets in the stream: the host's table holds their keys ------------------------------


# Per min-hash: a salt XORed into the minimum before it becomes a table key, so equal
# minima under two permutations give two keys. The segment keys of a w-shingle (w > 1)
# are chained with detemplate.engine.keys.mix64.
_SALT = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                  0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
                 dtype=np.uint64)  # fmt: skip


@dataclass(slots=True)
class PageletSketch:
    """One pagelet of a page as the pipeline sees it: a run of the page's blocks.

    order: position among the page's pagelets (document order).
    node: its element in the page's block tree (`PageTree` of the page-level walk).
    first, end: its blocks are the page's blocks[first:end].
    links: links in it.
    keys: its min-hash values as table keys (tagged).
    """

    order: int
    node: int
    first: int
    end: int
    links: int
    keys: tuple[int, ...] = ()


def block_pagelets(page: PageTree, k: int) -> list[tuple[int, int, int]]:
    """Definition 2 over the page's layout elements: (node, end node, links) of each pagelet
    with text, in document order; its elements are nodes[node:end node].

    The tree is the page-level walk's: every layout element (text-less ones too), each
    with the `<a>` elements directly in it. An element is split (its children are pushed,
    the paper's Figure 3) when a child element holds at least k links; the text directly
    in a split element (its own block) is a pagelet of its own, standing for the inline
    elements the paper would make pagelets there. Cost: O(elements), no second walk.
    """
    end = page.end
    if not end:
        return []
    links = page.links
    chars = page.chars
    acc = list(accumulate(links, initial=0))
    # An element is split when one of its children holds k links or more.
    split = bytearray(len(end))
    if acc[-1] >= k:
        for c, (parent, e) in enumerate(zip(page.parent, end, strict=True)):
            if parent >= 0 and acc[e] - acc[c] >= k:
                split[parent] = 1
    text = list(accumulate(chars, initial=0))
    out: list[tuple[int, int, int]] = []
    # Figure 3's queue, in document order: nodes are in preorder, so after a split node
    # come its children, and after a pagelet's subtree the next child of a split node.
    v = 0
    n = len(end)
    while v < n:
        if split[v]:
            if chars[v]:
                out.append((v, v + 1, links[v]))
            v += 1
        else:
            e = end[v]
            if text[e] > text[v]:
                out.append((v, e, acc[e] - acc[v]))
            v = e
    return out


def sketch_keys(keys: Sequence[int], starts: Sequence[int], size: int, w: int = 1) -> list[list[int]]:
    """Min-hash keys of groups of segment keys: group i is keys[starts[i]:starts[i+1]] (the
    last runs to the end; none is empty), in document order.

    Per group: `size` min-hashes of its w-shingles (w consecutive keys hashed in order; a
    group of w keys or fewer is one shingle; w = 1: the set of its keys), each XORed with
    its permutation's salt (equal minima under two permutations give two keys) and
    tagged as a pagelet key of the host's table (the tag replaces the low 20 bits: 44
    bits tell pagelet keys apart, against a few thousand of them per host).
    """
    # Array arithmetic wraps modulo 2^64 silently (no errstate needed, and it costs 5 us).
    hashes = np.array(keys, dtype=np.uint64)
    offsets = np.array(starts, dtype=np.intp)
    if w > 1:
        # Shingle i of a group starts at its key i; a short group has one shingle.
        lengths = np.diff(offsets, append=len(hashes))
        counts = np.maximum(lengths - (w - 1), 1)
        group_of = np.repeat(np.arange(len(counts)), counts)
        first = np.zeros(len(counts), dtype=np.intp)
        np.cumsum(counts[:-1], out=first[1:])
        pos = offsets[group_of] + (np.arange(len(group_of)) - first[group_of])
        span = lengths[group_of]
        sh = mix64(hashes[pos].copy())
        last = len(hashes) - 1
        for j in range(1, w):
            nxt = mix64(sh ^ hashes[np.minimum(pos + j, last)])
            sh = np.where(j < span, nxt, sh)
        hashes = sh
        offsets = first
    x = np.minimum.reduceat(hashes[:, None] * _PERM_A[:size] + _PERM_B[:size], offsets, axis=0)
    x ^= _SALT[:size]
    out: list[list[int]] = tag(x).tolist()
    return out


def page_sketches(page: PageTree, params: PageletParams) -> tuple[int, list[PageletSketch]]:
    """The page's pagelets: how many there are, and those fingerprinted (at least
    `min_links` links, at least `min_anchor_share` of their text in links) with the
    min-hash keys of their segment keys in document order (the segment table's notion of
    text identity: DOM path and text)."""
    cut = block_pagelets(page, params.k)
    blocks = page.blocks
    nob = page.node_of_block
    min_links = params.min_links
    min_anchor = params.min_anchor_share
    out: list[PageletSketch] = []
    keys: list[int] = []
    starts: list[int] = []
    acc_a: list[int] = []
    acc_c: list[int] = []
    for i, (node, node_end, links) in enumerate(cut):
        if links < min_links:
            continue
        if min_anchor:
            if not acc_a:
                acc_a = list(accumulate(page.achars, initial=0))
                acc_c = list(accumulate(page.chars, initial=0))
            if acc_a[node_end] - acc_a[node] < min_anchor * (acc_c[node_end] - acc_c[node]):
                continue
        first = bisect_left(nob, node)
        end = bisect_left(nob, node_end, first)
        out.append(PageletSketch(i, node, first, end, links))
        starts.append(len(keys))
        for block in blocks[first:end]:
            keys.extend([seg[0] for seg in block[1]])
    if out:
        for p, row in zip(out, sketch_keys(keys, starts, params.sketch_size, params.w), strict=True):
            p.keys = tuple(row)
    return len(cut), out


def pagelet_path(page: PageTree, p: PageletSketch) -> str:
    """DOM path of a pagelet's element: its first block's path, cut to the element's depth
    (a path component holding a "/", as a class name may in the class path modes, would
    shift the cut; tag names never do)."""
    path = page.blocks[p.first].path
    if page.node_of_block[p.first] == p.node:
        return path
    return "/".join(path.split("/")[: page.depth[p.node] + 1])


def pagelet_df(dfs: Sequence[int], quorum: int) -> int:
    """A pagelet's DF: the `quorum`-th highest DF of its min-hash keys (0 with fewer keys)."""
    if len(dfs) < quorum:
        return 0
    return sorted(dfs, reverse=True)[quorum - 1]
