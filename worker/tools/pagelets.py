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

In the engine (detemplate.engine.detectors.pagelets), pagelets are cut from the block tree the page walk
already built (`block_pagelets`, no second walk) and fingerprinted by a min-hash of their
sets of segment keys (`page_sketches`); the min-hash values are keys of the host's own
segment table, tagged (engine/keys.py TAG), so they get the same DF and expiry.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urldefrag

import numpy as np
from selectolax.lexbor import LexborHTMLParser, LexborNode
from xxhash import xxh3_64_intdigest

from ..engine.detectors.pagelets import MAX_SKETCH, PERM_A, PERM_B
from ..engine.errors import BadInputError
from ..engine.links import base_url, resolve
from ..engine.model import RawPage
from ..engine.page import parse
from ..engine.page.python import path_component
from ..engine.params import SegmentParams

_TEXT_ID = 2
_WORD = re.compile(r"\w+")
_MASK = (1 << 64) - 1
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
    sketch: min-hash values of its w-shingles; empty when it has no tokens.
    """

    path: str
    order: int
    text: str
    links: list[str]
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
        # Children in document order: text, or _El for elements.
        self.items: list[str | _El] = []
        self.href = href


def _build(tree: LexborHTMLParser, params: SegmentParams) -> _El | None:
    """The page's element tree with per-subtree link counts and its text nodes' texts."""
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
                        el.items.append(text)
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


def _gather(el: _El, base: str, texts: list[str], links: list[str], tokens: list[str]) -> None:
    if el.href is not None:
        url = resolve(base, el.href)
        if url is not None:
            links.append(url)
            tokens.append(url)
    for item in el.items:
        if isinstance(item, _El):
            _gather(item, base, texts, links, tokens)
        else:
            texts.append(item)
            tokens.extend(_WORD.findall(item.lower()))


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
        for a, b in zip(PERM_A[:size], PERM_B[:size], strict=True):
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
    """The pagelets of a parsed page, with their text, links and sketches."""
    top = _build(tree, seg)
    if top is None:
        return []
    base = base_url(tree, url)
    pagelets: list[Pagelet] = []
    token_lists: list[list[str]] = []
    for i, el in enumerate(_partition(top, config.k)):
        texts: list[str] = []
        links: list[str] = []
        tokens: list[str] = []
        _gather(el, base, texts, links, tokens)
        pagelets.append(Pagelet(el.path, i, " ".join(texts), links))
        token_lists.append(tokens)
    sks = sketches([_shingle_hashes(t, config.w) for t in token_lists], config.sketch_size)
    for p, sk in zip(pagelets, sks, strict=True):
        p.sketch = sk
    return pagelets


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
