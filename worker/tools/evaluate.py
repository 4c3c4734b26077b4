"""`detemplate eval`: how much content the detector keeps and how much template it removes.

A corpus folder (the format of ../shared/corpora) holds `pages.jsonl.gz` (raw pages in
crawl order), `gold.jsonl.gz` (each page's gold main content) and, for generated sites,
`meta.json`. The detector runs over the pages in stream order with a fresh in-memory
store, through `detemplate.engine.firstpages.process_pages` exactly as `detemplate run` does, and the
kept text of each page is scored against its gold.

The metric is the one of the reference scorer (../shared/tools/score.py), reimplemented
here and checked against it by tests/tools/test_evaluate.py:

- tokens are the lower-cased ``\\w+`` runs of a text (Unicode word characters);
- per page, P = shared tokens / output tokens and R = shared tokens / gold tokens, where
  "shared" is the multiset intersection; F1 = 2PR / (P + R), 0 when P + R = 0;
- an empty output scores P = 1 when the gold is empty too, else P = 0; an empty gold
  scores R = 1; a page absent from the output counts as empty output (and as missing);
- P, R and F1 are the means over the gold lines (a gold line with `must_keep` instead
  scores the share of its values whose tokens all survive, `keep_recall`).

On top of that, `removal`: of the tokens of a page's full text (the fulltext baseline
below) that are not gold content, the share the detector removed. Per page, with F the
full-text token multiset, G the gold and K the kept text, noise N = F - G and
removal = 1 - |(K - G) & N| / |N| (multiset difference and intersection); the mean over
the scored pages with |N| > 0. The fulltext baseline is all body text with script,
style and noscript elements dropped (selectolax lexbor, text nodes joined by spaces),
which reproduces the fulltext rows of ../shared/corpora/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from selectolax.lexbor import LexborHTMLParser
from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type information

from ..engine.errors import ConfigError
from ..engine.firstpages import process_pages
from ..engine.model import RawPage
from ..engine.params import EngineParams, add_param_argument, with_overrides
from ..io.codec import encode_clean, encode_dead
from ..state import MemoryStore

logger = logging.getLogger(__name__)

# str patterns are Unicode-aware: \w matches letters and digits of every script and "_".
_TOKEN = re.compile(r"\w+")

# A corpus counts as multi-page (the host's template can be learned at all) when it has
# at least this many pages per host; "chaos" (mostly one page per host) does not.
MULTI_PAGE_MIN_PAGES_PER_HOST = 5

FULLTEXT_DROP_TAGS = ["script", "style", "noscript"]


# -- the metric ----------------------------------------------------------------------


def tokens(text: str | None) -> Counter[str]:
    """Multiset of lower-cased \\w+ runs."""
    if not text:
        return Counter()
    return Counter(tok.lower() for tok in _TOKEN.findall(text))


def page_prf(kept: Counter[str], gold: Counter[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of one page's kept tokens against its gold tokens."""
    n_kept = kept.total()
    n_gold = gold.total()
    shared = (kept & gold).total()
    # An empty output is right (P = 1) only when there was nothing to keep.
    precision = shared / n_kept if n_kept else (0.0 if n_gold else 1.0)
    recall = shared / n_gold if n_gold else 1.0
    total = precision + recall
    f1 = 2.0 * precision * recall / total if total else 0.0
    return precision, recall, f1


def page_removal(full: Counter[str], gold: Counter[str], kept: Counter[str]) -> float | None:
    """Share of the page's non-gold full-text tokens that the kept text no longer has.

    None when the page has no non-gold tokens (nothing to remove).
    """
    noise = full - gold
    n_noise = noise.total()
    if not n_noise:
        return None
    kept_noise = ((kept - gold) & noise).total()
    return 1.0 - kept_noise / n_noise


def fulltext(html: str) -> str:
    """The fulltext baseline: all body text, scripts, styles and noscript dropped."""
    tree = LexborHTMLParser(html)
    tree.strip_tags(FULLTEXT_DROP_TAGS)
    body = tree.body
    if body is None:
        return ""
    return body.text(separator=" ")


@dataclass(frozen=True, slots=True)
class GoldPage:
    """One gold line: the page's main content, or the values that must survive."""

    url: str
    content: str
    must_keep: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class TextScores:
    """Scores of one output against one corpus's gold (the fields of score.py)."""

    pages: int  # gold lines scored by P/R/F1
    missing: int  # gold lines whose URL the output lacks
    precision: float | None
    recall: float | None
    f1: float | None
    keep_recall: float | None = None  # share of must_keep values whose tokens all survive
    keep_values: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The keys and value conventions of score.py's result."""
        out: dict[str, Any] = {"pages": self.pages, "missing": self.missing}
        if self.pages:
            out.update(P=self.precision, R=self.recall, F1=self.f1)
        if self.keep_values:
            out.update(keep_recall=self.keep_recall, values=self.keep_values)
        return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_texts(gold: Iterable[GoldPage], kept: Mapping[str, str]) -> TextScores:
    """Score kept text per URL against the gold lines."""
    ps: list[float] = []
    rs: list[float] = []
    fs: list[float] = []
    missing = 0
    keep_hits = 0
    keep_values = 0
    for g in gold:
        text = kept.get(g.url)
        if text is None:
            missing += 1
        out = tokens(text)
        if g.must_keep is not None:
            have = set(out)
            for value in g.must_keep:
                need = set(tokens(value))
                if need:
                    keep_values += 1
                    keep_hits += need <= have
            continue
        p, r, f = page_prf(out, tokens(g.content))
        ps.append(p)
        rs.append(r)
        fs.append(f)
    return TextScores(
        pages=len(fs),
        missing=missing,
        precision=_mean(ps),
        recall=_mean(rs),
        f1=_mean(fs),
        keep_recall=keep_hits / keep_values if keep_values else None,
        keep_values=keep_values,
    )


# -- files ---------------------------------------------------------------------------


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """JSON objects of a .jsonl or .jsonl.gz file, blank lines skipped."""
    with _open_text(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ConfigError(f"{path}: a line is not a JSON object")
                yield record


def load_output(path: Path) -> dict[str, str]:
    """URL -> kept text of an output file (`text`, else `content_text`); the last line of a URL wins."""
    out: dict[str, str] = {}
    for record in read_jsonl(path):
        text = record["text"] if "text" in record else record.get("content_text", "")
        out[record["url"]] = text or ""
    return out


def load_gold(path: Path) -> list[GoldPage]:
    gold = []
    for record in read_jsonl(path):
        must_keep = record.get("must_keep")
        gold.append(
            GoldPage(
                url=record["url"],
                content=record.get("content") or "",
                must_keep=tuple(must_keep) if must_keep is not None else None,
            )
        )
    return gold


@dataclass(frozen=True, slots=True)
class Corpus:
    """A corpus folder loaded into memory."""

    name: str
    path: Path
    pages: tuple[RawPage, ...]  # in stream order
    gold: tuple[GoldPage, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def hosts(self) -> int:
        return len({p.host for p in self.pages})


def load_pages(path: Path) -> list[RawPage]:
    """Raw pages of a pages.jsonl(.gz) file, in file order."""
    from urllib.parse import urlsplit

    pages = []
    for n, record in enumerate(read_jsonl(path), 1):
        url = record["url"]
        host = record.get("host") or urlsplit(url).hostname or ""
        pages.append(RawPage(url=url, html=record.get("html") or "", host=host, source=f"{path.name}:{n}"))
    return pages


# The orders `eval --order` decides a corpus's pages in, each with how the output names it:
# the folder's own (a crawl's), by URL (a sorted dump, a sitemap's), or shuffled.
ORDER_NOTES = {"input": "", "url": "sorted by URL", "shuffled": "shuffled (seed {seed})"}
ORDERS = tuple(ORDER_NOTES)


class _Addressed(Protocol):
    @property
    def url(self) -> str: ...


P = TypeVar("P", bound=_Addressed)


def reorder(pages: Sequence[P], order: str, seed: int = 0) -> tuple[P, ...]:
    """`pages` in `order` (ORDERS): as given, sorted by URL (a stable sort), or shuffled by
    `seed`. Each host's pages keep whatever order that gives them; the engine decides them so.
    Anything with a `url` is ordered alike (scripts/reorder_pages.py orders a crawl's lines)."""
    if order == "input":
        return tuple(pages)
    if order == "url":
        return tuple(sorted(pages, key=lambda page: page.url))
    if order == "shuffled":
        shuffled = list(pages)
        random.Random(seed).shuffle(shuffled)
        return tuple(shuffled)
    raise ConfigError(f"unknown page order {order!r}; choose one of {', '.join(ORDERS)}")


def load_corpus(path: str | Path, gold: bool = True, order: str = "input", seed: int = 0) -> Corpus:
    """Read a corpus folder: pages.jsonl.gz, gold.jsonl.gz, optional meta.json, its pages in
    `order` (`reorder`). With `gold` False (what `bench` times needs no gold), a folder without
    gold.jsonl.gz reads as a corpus with no gold pages, such as a crawl."""
    folder = Path(path)
    pages_path = folder / "pages.jsonl.gz"
    gold_path = folder / "gold.jsonl.gz"
    for needed in (pages_path, gold_path) if gold else (pages_path,):
        if not needed.is_file():
            raise ConfigError(f"{folder} is not a corpus folder: {needed.name} is missing")
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    return Corpus(
        name=folder.resolve().name,
        path=folder,
        pages=reorder(load_pages(pages_path), order, seed),
        gold=tuple(load_gold(gold_path)) if gold_path.is_file() else (),
        meta=meta,
    )


# -- the eval engine -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorpusResult:
    """Everything `eval` measured on one corpus."""

    name: str
    pages: int  # pages in the stream
    hosts: int
    dead: int  # pages the detector rejected as bad input
    scores: TextScores  # the detector's kept text
    fulltext: TextScores  # the fulltext baseline
    removal: float | None  # mean share of non-content tokens removed
    removal_pages: int  # pages behind `removal`
    seconds: float  # time spent in process_pages only
    first_pages: int = 0  # a page is one of its host's first pages when page_no <= this
    first: TextScores | None = None  # scores of the gold pages among their host's first pages
    later: TextScores | None = None  # scores of the other gold pages
    by_host: dict[str, TextScores] = field(default_factory=dict)  # scores of each host's gold pages
    # Every block kept, whatever its verdict: the text the walk gives the decision. Its recall
    # under the fulltext baseline's is text lost before any decision (docs/evaluation.md).
    blocks: TextScores | None = None

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else math.inf

    @property
    def multi_page(self) -> bool:
        return self.pages >= MULTI_PAGE_MIN_PAGES_PER_HOST * max(1, self.hosts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "corpus": self.name,
            "pages": self.pages,
            "hosts": self.hosts,
            "dead": self.dead,
            "multi_page": self.multi_page,
            "scores": self.scores.as_dict(),
            "fulltext": self.fulltext.as_dict(),
            "removal": self.removal,
            "removal_pages": self.removal_pages,
            "seconds": self.seconds,
            "pages_per_s": self.pages_per_s,
            "first_pages": self.first_pages,
            "first": self.first.as_dict() if self.first is not None else None,
            "later": self.later.as_dict() if self.later is not None else None,
            "by_host": {host: s.as_dict() for host, s in self.by_host.items()},
            "blocks": self.blocks.as_dict() if self.blocks is not None else None,
        }

    def walk_loss(self) -> float | None:
        """How much lower the recall of all blocks is than the fulltext baseline's (0 or less:
        the walk loses no gold text that the page's text has)."""
        if self.blocks is None or self.blocks.recall is None or self.fulltext.recall is None:
            return None
        return self.fulltext.recall - self.blocks.recall


def evaluate_corpus(
    corpus: Corpus,
    params: EngineParams | None = None,
    output: IO[bytes] | None = None,
    progress: bool = False,
) -> CorpusResult:
    """Run the detector over a corpus in stream order and score it.

    When `output` is given, every page's record (clean page or error record, encoded by
    detemplate.io.codec exactly as `detemplate run` writes it) goes there, one per line.
    """
    params = params or EngineParams()
    store = MemoryStore()
    kept: dict[str, str] = {}
    every_block: dict[str, str] = {}
    html_of: dict[str, str] = {}
    host_of: dict[str, str] = {}
    page_no: dict[str, int] = {}
    dead = 0
    seconds = 0.0
    clock = time.perf_counter
    pages: Iterable[RawPage] = corpus.pages
    if progress:
        pages = tqdm(pages, desc=corpus.name, unit="page", leave=False)
    decided = process_pages(pages, store, params)
    while True:
        start = clock()
        item = next(decided, None)
        seconds += clock() - start
        if item is None:
            break
        page, outcome = item.page, item.outcome
        html_of[page.url] = page.html
        host_of[page.url] = page.host
        if outcome.clean is not None:
            kept[page.url] = outcome.clean.text
            every_block[page.url] = "\n".join([b.text for b in outcome.clean.blocks])
            page_no[page.url] = outcome.clean.page_no
            record = encode_clean(outcome.clean) if output is not None else b""
        else:
            assert outcome.dead is not None
            dead += 1
            kept[page.url] = ""  # an error record has a url and no text
            record = encode_dead(outcome.dead) if output is not None else b""
        if output is not None:
            output.write(record + b"\n")

    full: dict[str, str] = {}
    removals: list[float] = []
    for g in corpus.gold:
        if g.url not in html_of:
            continue
        text = full.get(g.url)
        if text is None:
            text = full[g.url] = fulltext(html_of[g.url])
        if g.must_keep is None:
            r = page_removal(tokens(text), tokens(g.content), tokens(kept.get(g.url)))
            if r is not None:
                removals.append(r)
    # The host's first pages are the weak spot of a per-host table: split the scores there.
    first_pages = params.table.template_df
    is_first = [0 < page_no.get(g.url, 0) <= first_pages for g in corpus.gold]
    gold_by_host: dict[str, list[GoldPage]] = {}
    for g in corpus.gold:
        gold_by_host.setdefault(host_of.get(g.url, ""), []).append(g)
    return CorpusResult(
        name=corpus.name,
        pages=len(corpus.pages),
        hosts=corpus.hosts,
        dead=dead,
        scores=score_texts(corpus.gold, kept),
        fulltext=score_texts(corpus.gold, full),
        removal=_mean(removals),
        removal_pages=len(removals),
        seconds=seconds,
        first_pages=first_pages,
        first=score_texts([g for g, f in zip(corpus.gold, is_first, strict=True) if f], kept),
        later=score_texts([g for g, f in zip(corpus.gold, is_first, strict=True) if not f], kept),
        by_host={host: score_texts(gold, kept) for host, gold in sorted(gold_by_host.items())},
        blocks=score_texts(corpus.gold, every_block),
    )


@dataclass(frozen=True, slots=True)
class Summary:
    """Macro means over corpora (each corpus weighs the same)."""

    label: str
    corpora: int
    precision: float | None
    recall: float | None
    f1: float | None
    removal: float | None
    fulltext_f1: float | None
    pages: int
    seconds: float
    first_f1: float | None = None  # macro F1 over the host's first pages
    later_f1: float | None = None

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else math.inf

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "corpora": self.corpora,
            "P": self.precision,
            "R": self.recall,
            "F1": self.f1,
            "removal": self.removal,
            "fulltext_F1": self.fulltext_f1,
            "first_F1": self.first_f1,
            "later_F1": self.later_f1,
            "pages": self.pages,
            "pages_per_s": self.pages_per_s,
        }


def summarise(label: str, results: Sequence[CorpusResult]) -> Summary:
    def macro(values: Iterable[float | None]) -> float | None:
        return _mean([v for v in values if v is not None])

    return Summary(
        label=label,
        corpora=len(results),
        precision=macro(r.scores.precision for r in results),
        recall=macro(r.scores.recall for r in results),
        f1=macro(r.scores.f1 for r in results),
        removal=macro(r.removal for r in results),
        fulltext_f1=macro(r.fulltext.f1 for r in results),
        pages=sum(r.pages for r in results),
        seconds=sum(r.seconds for r in results),
        first_f1=macro(r.first.f1 if r.first else None for r in results),
        later_f1=macro(r.later.f1 if r.later else None for r in results),
    )


def summaries(results: Sequence[CorpusResult]) -> list[Summary]:
    """Macro over all corpora, and over the multi-page ones when that is a different set."""
    out = [summarise(f"macro, all {len(results)} corpora", results)]
    multi = [r for r in results if r.multi_page]
    if multi and len(multi) != len(results):
        out.append(summarise(f"macro, {len(multi)} multi-page corpora", multi))
    return out


# -- anchors from the corpora README ---------------------------------------------------


Anchors = dict[str, dict[str, tuple[float, float, float]]]  # corpus -> system -> (P, R, F1)


def parse_anchors(markdown: str) -> Anchors:
    """The `| corpus | system | P | R | F1 |` rows of the corpora README."""
    anchors: Anchors = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            continue
        try:
            p, r, f = (float(c) for c in cells[2:])
        except ValueError:
            continue
        anchors.setdefault(cells[0], {})[cells[1]] = (p, r, f)
    return anchors


def find_anchors(corpus_dirs: Iterable[Path]) -> Anchors:
    """Anchor figures from the README.md next to the corpus folders, where there is one."""
    anchors: Anchors = {}
    seen: set[Path] = set()
    for folder in corpus_dirs:
        readme = folder.resolve().parent / "README.md"
        if readme in seen or not readme.is_file():
            continue
        seen.add(readme)
        for corpus, systems in parse_anchors(readme.read_text(encoding="utf-8")).items():
            anchors.setdefault(corpus, {}).update(systems)
    return anchors


# -- presentation ----------------------------------------------------------------------


# `eval` flags a corpus whose blocks, all kept, recall this much less than the page's text.
WALK_LOSS_FLAG = 0.005


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(results: Sequence[CorpusResult]) -> str:
    header = (
        f"{'corpus':<28} {'pages':>5} {'gold':>4} {'hosts':>5} {'dead':>4} "
        f"{'P':>6} {'R':>6} {'F1':>6} {'removed':>7} {'fullF1':>6} {'F1first':>7} {'F1later':>7} {'pages/s':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.name:<28} {r.pages:>5} {r.scores.pages:>4} {r.hosts:>5} {r.dead:>4} "
            f"{_f(r.scores.precision):>6} {_f(r.scores.recall):>6} {_f(r.scores.f1):>6} "
            f"{_f(r.removal):>7} {_f(r.fulltext.f1):>6} {_f(r.first.f1 if r.first else None):>7} "
            f"{_f(r.later.f1 if r.later else None):>7} {r.pages_per_s:>8.0f}"
        )
        if r.scores.f1 is not None and r.fulltext.f1 is not None and r.scores.f1 < r.fulltext.f1:
            lines.append(f"  ^ BELOW FULLTEXT: keeping all body text scores {r.fulltext.f1:.3f} on this corpus")
        loss = r.walk_loss()
        if loss is not None and loss > WALK_LOSS_FLAG:
            assert r.blocks is not None
            lines.append(
                f"  ^ TEXT LOST BY THE WALK: all blocks recall {_f(r.blocks.recall)}, "
                f"the page's text {_f(r.fulltext.recall)}"
            )
        if r.scores.missing:
            lines.append(f"  ({r.scores.missing} gold pages missing from the stream)")
        if r.scores.keep_values:
            lines.append(f"  (must_keep recall {_f(r.scores.keep_recall)} over {r.scores.keep_values} values)")
    lines.append("-" * len(header))
    for s in summaries(results):
        lines.append(
            f"{s.label:<28} {s.pages:>5} {'':>4} {'':>5} {'':>4} "
            f"{_f(s.precision):>6} {_f(s.recall):>6} {_f(s.f1):>6} "
            f"{_f(s.removal):>7} {_f(s.fulltext_f1):>6} {_f(s.first_f1):>7} {_f(s.later_f1):>7} "
            f"{s.pages_per_s:>8.0f}"
        )
    return "\n".join(lines)


def format_hosts(results: Sequence[CorpusResult]) -> str:
    """Per-host scores of the corpora with more than one host."""
    header = f"{'corpus':<28} {'host':<36} {'gold':>4} {'P':>6} {'R':>6} {'F1':>6}"
    lines = [header, "-" * len(header)]
    for r in results:
        if len(r.by_host) < 2:
            continue
        for host, s in r.by_host.items():
            lines.append(
                f"{r.name:<28} {host[:36]:<36} {s.pages:>4} {_f(s.precision):>6} {_f(s.recall):>6} {_f(s.f1):>6}"
            )
    return "\n".join(lines)


def write_report(
    results: Sequence[CorpusResult], anchors: Anchors, folder: Path, params_note: str = "defaults"
) -> list[Path]:
    """report.md and f1_per_corpus.png in `folder`; returns the written paths."""
    folder.mkdir(parents=True, exist_ok=True)
    chart = folder / "f1_per_corpus.png"
    systems = sorted({s for r in results for s in anchors.get(r.name, {})})
    _write_chart(results, anchors, systems, chart)

    lines = [
        "# detemplate eval report",
        "",
        f"Engine parameters: {params_note}; {len(results)} corpora.",
        "P, R, F1: token-level scores of the kept text against the gold (as ../shared/tools/score.py);",
        "removed: mean share of non-content tokens removed; fulltext: all body text (computed here);",
        f"F1 first pages: pages among their host's first {results[0].first_pages if results else 0} "
        "(the table is still learning), F1 later: the others.",
        "`README ...` columns: the anchor F1 figures of the corpora README, read at run time.",
        "",
    ]
    head = [
        "corpus",
        "pages",
        "gold",
        "hosts",
        "P",
        "R",
        "F1",
        "removed",
        "fulltext F1",
        "F1 first pages",
        "F1 later",
        *(f"README {s}" for s in systems),
    ]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in results:
        row = [
            r.name,
            str(r.pages),
            str(r.scores.pages),
            str(r.hosts),
            _f(r.scores.precision),
            _f(r.scores.recall),
            f"**{_f(r.scores.f1)}**",
            _f(r.removal),
            _f(r.fulltext.f1),
            _f(r.first.f1 if r.first else None),
            _f(r.later.f1 if r.later else None),
        ]
        row += [_f(anchors.get(r.name, {}).get(s, (None, None, None))[2]) for s in systems]
        lines.append("| " + " | ".join(row) + " |")
    for s in summaries(results):
        names = [r.name for r in results if s.corpora == len(results) or r.multi_page]
        anchor_macro = []
        for system in systems:
            vals = [anchors.get(n, {}).get(system) for n in names]
            have = [v[2] for v in vals if v is not None]
            anchor_macro.append(_f(sum(have) / len(have)) + ("" if len(have) == len(names) else "*") if have else "-")
        row = [
            s.label,
            str(s.pages),
            "",
            "",
            _f(s.precision),
            _f(s.recall),
            f"**{_f(s.f1)}**",
            _f(s.removal),
            _f(s.fulltext_f1),
            _f(s.first_f1),
            _f(s.later_f1),
            *anchor_macro,
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "\\* anchor macro over fewer corpora (the README gives no figure for some).",
        "",
        f"Detector speed (process_pages over an in-memory store, this run): "
        f"{sum(r.pages for r in results) / max(sum(r.seconds for r in results), 1e-9):.0f} pages/s "
        "(noisy on a shared machine; `detemplate bench` measures speed properly).",
        "",
        f"![F1 per corpus]({chart.name})",
        "",
    ]
    report = folder / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    return [report, chart]


def _write_chart(results: Sequence[CorpusResult], anchors: Anchors, systems: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.name for r in results]
    ours = [r.scores.f1 or 0.0 for r in results]
    full = [r.fulltext.f1 or 0.0 for r in results]
    anchor_rows = [[anchors.get(n, {}).get(system, (0.0, 0.0, math.nan))[2] for n in names] for system in systems]
    # A last group: the macro mean over the multi-page corpora (over all when none is).
    multi = [i for i, r in enumerate(results) if r.multi_page] or list(range(len(results)))
    names.append(f"macro ({len(multi)} multi-page)")

    def macro(values: list[float]) -> float:
        picked = [values[i] for i in multi]
        return math.nan if any(math.isnan(v) for v in picked) else sum(picked) / len(picked)

    series: list[tuple[str, list[float]]] = [
        ("detemplate", [*ours, macro(ours)]),
        ("fulltext (this run)", [*full, macro(full)]),
    ]
    for system, row in zip(systems, anchor_rows, strict=True):
        series.append((f"{system} (README)", [*row, macro(row)]))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(names) + 2), 4.5))
    for i, (label, values) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(names))]
        ax.bar(xs, values, width=width, label=label, hatch="" if i < 2 else "//", alpha=1.0 if i < 2 else 0.6)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("F1 (token level, mean over pages)")
    ax.set_title("F1 per corpus: detemplate against baselines")
    ax.axvline(len(names) - 1.5, color="grey", linewidth=0.8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the command -----------------------------------------------------------------------


def run_eval(
    corpus_dirs: Sequence[Path],
    params: EngineParams | None = None,
    output_dir: Path | None = None,
    progress: bool = False,
    order: str = "input",
    seed: int = 0,
) -> list[CorpusResult]:
    """Evaluate each corpus folder in turn, each with a fresh store, its pages in `order`."""
    results = []
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
    for folder in corpus_dirs:
        corpus = load_corpus(folder, order=order, seed=seed)
        if output_dir is not None:
            with open(output_dir / f"{corpus.name}.jsonl", "wb") as out:
                result = evaluate_corpus(corpus, params, out, progress)
        else:
            result = evaluate_corpus(corpus, params, None, progress)
        logger.debug("evaluated corpus=%s pages=%d f1=%s", corpus.name, result.pages, result.scores.f1)
        results.append(result)
    return results


def loco_corpora(
    folders: Iterable[Path], order: str = "input", seed: int = 0
) -> list[tuple[str, Sequence[RawPage], dict[str, str]]]:
    """What `loco.run_loco` replays: each corpus's name, pages (in `order`) and scored gold
    (`must_keep` pages are checked for their values, not scored on text)."""
    out: list[tuple[str, Sequence[RawPage], dict[str, str]]] = []
    for folder in folders:
        corpus = load_corpus(folder, order=order, seed=seed)
        out.append((corpus.name, corpus.pages, {g.url: g.content for g in corpus.gold if g.must_keep is None}))
    return out


def _loco_macros(
    results: Sequence[CorpusResult], held: dict[str, Any]
) -> list[tuple[str, list[CorpusResult], tuple[float, float, float]]]:
    """The macro groups of the held-out figures (all corpora; the multi-page ones), each with
    its label, its corpora and its mean held-out P, R and F1."""
    out = []
    for label, group in (
        (f"macro, all {len(results)} corpora", list(results)),
        (f"macro, {sum(r.multi_page for r in results)} multi-page corpora", [r for r in results if r.multi_page]),
    ):
        if group:
            k = len(group)
            means = tuple(sum(getattr(held[r.name], f) for r in group) / k for f in ("precision", "recall", "f1"))
            out.append((label, group, (means[0], means[1], means[2])))
    return out


def loco_dict(results: Sequence[CorpusResult], replays: Any) -> dict[str, Any]:
    """The leave-one-corpus-out figures as `eval --json --loco` writes them: each corpus's
    held-out P, R, F1 and the parameters chosen on the other corpora, the macros, and the
    parameters chosen on all of them (the shipped defaults should be these)."""
    from .loco import flat_parameters

    names = [r.name for r in results]
    held = replays.held_out(names)
    return {
        "held_out": {
            name: {"P": c.precision, "R": c.recall, "F1": c.f1, "parameters": c.parameters()}
            for name, c in held.items()
        },
        "summary": [
            {"label": label, "corpora": len(group), "P": p, "R": r, "F1": f}
            for label, group, (p, r, f) in _loco_macros(results, held)
        ],
        "chosen": flat_parameters(*replays.choose(names)),
    }


def format_loco(results: Sequence[CorpusResult], replays: Any, anchors: Anchors) -> str:
    """The leave-one-corpus-out table (tools/loco.py) beside this run's figures and the baselines."""
    names = [r.name for r in results]
    held = replays.held_out(names)
    header = (
        f"{'corpus':<28} {'F1':>6} {'LOCO P':>6} {'R':>6} {'F1':>6} {'fullF1':>6} {'trafF1':>6}  "
        "note (LOCO: parameters chosen on the other corpora)"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        c = held[r.name]
        traf = anchors.get(r.name, {}).get("trafilatura", (None, None, None))[2]
        notes = []
        if r.fulltext.f1 is not None and c.f1 < r.fulltext.f1:
            notes.append("BELOW FULLTEXT")
        if traf is not None and c.f1 < traf - 0.01:
            notes.append("below trafilatura - 0.01")
        lines.append(
            f"{r.name:<28} {_f(r.scores.f1):>6} {c.precision:>6.3f} {c.recall:>6.3f} {c.f1:>6.3f} "
            f"{_f(r.fulltext.f1):>6} {_f(traf):>6}  {', '.join(notes)}"
        )
    lines.append("-" * len(header))
    for label, group, (loco_p, loco_r, loco_f) in _loco_macros(results, held):
        k = len(group)
        f1 = sum(r.scores.f1 or 0.0 for r in group) / k
        full = sum(r.fulltext.f1 or 0.0 for r in group) / k
        lines.append(f"{label:<28} {f1:>6.3f} {loco_p:>6.3f} {loco_r:>6.3f} {loco_f:>6.3f} {full:>6.3f}")
    lines.append("")
    lines.append("Parameters chosen with each corpus held out:")
    for r in results:
        lines.append(f"  {r.name:<28} {held[r.name].describe()}")
    from .loco import describe_parameters, flat_parameters

    lines.append(f"Chosen on all {len(names)} corpora (the shipped defaults should be these):")
    lines.append("  " + describe_parameters(flat_parameters(*replays.choose(names))))
    return "\n".join(lines)


def _handle(args: argparse.Namespace) -> int:
    folders = [Path(p) for p in args.corpus_dirs]
    try:
        params = with_overrides(EngineParams(), args.param or [])
        results = run_eval(folders, params, args.output_dir, sys.stderr.isatty(), args.order, args.seed)
    except ConfigError as exc:
        print(f"detemplate eval: {exc}", file=sys.stderr)
        return 2
    anchors = find_anchors(folders)
    # how the pages were ordered, when not in each corpus's own order
    order_note = ORDER_NOTES[args.order].format(seed=args.seed)
    replays = None
    if args.loco:
        from .loco import run_loco

        def tick(name: str, evidence: Any) -> None:
            logger.info("loco: %s recorded and replayed under %s", name, evidence)

        replays = run_loco(loco_corpora(folders, args.order, args.seed), params, tick)
    if args.json:
        doc = {
            "corpora": [r.as_dict() for r in results],
            "summary": [s.as_dict() for s in summaries(results)],
            "order": args.order,
            "seed": args.seed if args.order == "shuffled" else None,
        }
        if replays is not None:
            doc["loco"] = loco_dict(results, replays)
        print(json.dumps(doc, indent=1))
    else:
        print(format_table(results))
        if args.by_host:
            print()
            print(format_hosts(results))
        first = results[0].first_pages if results else 0
        print("(P/R/F1: mean over gold pages; removed: share of non-content tokens removed; fullF1: fulltext baseline;")
        print(f" F1first / F1later: F1 of the pages that are among their host's first {first} / the others;")
        print(" pages/s: time in process_pages only, on a shared machine: noisy)")
        if order_note:
            print(f"(each corpus's pages {order_note}, not in its own order)")
    if replays is not None and not args.json:
        print()
        print(format_loco(results, replays, anchors))
    if args.report is not None:
        note = "defaults with " + ", ".join(args.param) if args.param else "defaults"
        if order_note:
            note += f"; pages {order_note}"
        written = write_report(results, anchors, args.report, note)
        print(f"report: {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure kept content and removed template against gold corpora",
        description=(
            "Run the detector over each corpus folder (pages.jsonl.gz in stream order, gold.jsonl.gz, "
            "optional meta.json) with a fresh in-memory store, and print per corpus and overall the "
            "token-level precision, recall and F1 of the kept text against the gold (as "
            "../shared/tools/score.py computes them), the share of non-content text removed, the "
            "fulltext baseline and the detector's pages/s."
        ),
    )
    parser.add_argument("corpus_dirs", nargs="+", metavar="CORPUS_DIR", help="a corpus folder")
    parser.add_argument("--report", type=Path, metavar="DIR", help="write report.md and an F1 chart (PNG) here")
    parser.add_argument(
        "--json", action="store_true",
        help="print the results as JSON instead of a table (with --loco, the held-out figures too, under \"loco\")",
    )
    parser.add_argument("--by-host", action="store_true", help="also print the scores of each host")
    parser.add_argument(
        "--loco",
        action="store_true",
        help=(
            "also report each corpus's leave-one-corpus-out F1: the decision's measured parameters "
            "chosen on the other corpora (tools/loco.py; replays a grid over recorded ballots, about half a minute)"
        ),
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="input",
        help=(
            "the order each corpus's pages are decided in: the folder's own (default), sorted by URL, or "
            "shuffled (--seed); a crawl that comes in another order than the corpus's is decided so"
        ),
    )
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed with --order shuffled (default 0)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="write each corpus's output records (as `detemplate run` writes them) to DIR/CORPUS.jsonl",
    )
    add_param_argument(
        parser,
        "override an engine parameter, e.g. table.tb=50 or segment.path_mode=tag (repeatable)",
    )
    parser.set_defaults(func=_handle)
