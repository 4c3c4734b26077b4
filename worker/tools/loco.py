"""Leave-one-corpus-out figures: every measured choice made on the other corpora.

The engine's decision (engine/decision.py) weighs each page's ballot with a handful of
parameters: thresholds and shares that were chosen by measurement. A figure measured on
the corpus its parameters were chosen on is optimistic; `detemplate eval --loco` reports,
for each corpus, the F1 it gets with the parameters chosen on all the *other* corpora.

How (docs/measurements.md says the same, with the figures):

1. The engine runs over every corpus once for each value of the parameters that change
   what the host's table learns (`EVIDENCE`: the content region's share, which decides
   which containers the table counts). Each page's ballot is kept with the tokens of its
   blocks and of its gold.
2. The decision is replayed over the kept ballots for every combination of the decision's
   parameters (`COLD_GRID` for a host's first page, `WARM_GRID` for the others): a pure
   function of the ballot, so no page is parsed twice.
3. A corpus's F1 is the mean over its gold pages; cold and warm pages are decided by
   disjoint parameters, so each part is chosen on its own: for each held-out corpus, the
   cold parameters and the (evidence, warm) parameters that maximise the mean F1 of the
   other corpora. The held-out corpus is then scored with them.
4. A host's first page is decided from the page alone (the page-level model and the page's
   own text), so every gold page is a sample of that decision: each is recorded once more as
   its host's first page (a fresh table), and the cold parameters are chosen on those. A
   corpus's cold part of the mean F1 is its share of first pages times the mean F1 of a first
   page; the share is the corpus's own, the mean is taken over all its pages rather than over
   its few real first pages (one per site on a documentation site). Without it, a fold that
   holds out chaos (nearly all first pages) chose the cold parameters on 26 pages. A host's
   first page held for its second (engine/firstpages.py) is decided with the table, so its
   record is a warm one, replayed under the warm grid; it reads the model at the first page's
   threshold, so it counts in its corpus's share of first pages. (The replay decides it with
   the cold parameters given, not each cold setting's: the cold choice is made on the pages
   decided alone.)

The shipped defaults are the choice made on all corpora: `detemplate eval --loco` prints
it last ("Chosen on all N corpora"), and engine/params.py holds those values.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..engine.decision import decide_blocks, decided_cold, headline_blocks
from ..engine.detectors.base import Ballot
from ..engine.firstpages import process_pages
from ..engine.model import Block, Segment
from ..engine.params import EngineParams, with_overrides
from ..engine.pipeline import decide_with_ballot
from ..engine.table import HostTable
from ..state.memory import MemoryStore

# What the host's table learns differs with these: one engine run per value.
EVIDENCE: dict[str, tuple[float, ...]] = {"region.share": (0.5,)}
# A host's first page: the page-level model alone, its threshold relative to the page's text.
COLD_GRID: dict[str, tuple[float, ...]] = {
    "pagelevel.threshold": (0.005, 0.01, 0.02, 0.05, 0.1),
    "pagelevel.cold_max_removed_share": (0.8, 0.95),
    "pagelevel.cold_ratio": (0.0, 3.0, 10.0, 30.0),
    "pagelevel.cold_quantile": (0.2, 0.3, 0.5),
}
# The other pages. Values no fold chose in two runs over the wider grid of November 26th
# were dropped (docs/measurements.md): region.share 0.6 and 0.7, layout_novelty 0.1 and 0.3,
# container_share 0.3 and 0.7, outer_threshold 0.15 and 0.3, max_removed_share 0.8,
# inner_threshold 1.0, inner_ratio 0 and 100, region_quantile 0.9.
WARM_GRID: dict[str, tuple[float, ...]] = {
    "region.layout_novelty": (0.5,),
    "region.layout_presence": (0.5, 0.7),
    "region.container_share": (0.5,),
    "pagelevel.inner_threshold": (0.01, 0.03, 0.1),
    "pagelevel.inner_ratio": (300.0, 1000.0),
    "pagelevel.region_quantile": (0.7, 0.8),
    "pagelevel.outer_threshold": (0.1,),
    # Chosen on ../shared/crawl, not here: the corpora are within 0.002 of each other for 0
    # and 10, and at 0 the crawl loses content beside narrow regions (docs/measurements.md,
    # "The page's headline").
    "pagelevel.outer_ratio": (10.0,),
    "pagelevel.max_removed_share": (0.5,),  # read by a first page's index guard too: `cold_params`
    "region.link_column_score": (0.8, 0.9, 0.95, 2.0),  # 2: off
}

_TOKEN = re.compile(r"\w+")

Setting = tuple[tuple[str, float], ...]  # parameter name -> value, sorted


def settings(grid: dict[str, tuple[float, ...]]) -> list[Setting]:
    """Every combination of a grid's values."""
    names = sorted(grid)
    return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]


def apply(params: EngineParams, setting: Setting) -> EngineParams:
    """`params` with a setting's values."""
    return with_overrides(params, [f"{name}={value!r}" for name, value in setting])


@dataclass(slots=True)
class PageRecord:
    """One gold page as the replay needs it: its ballot, each block's tokens (as ids into the
    page's own vocabulary: `ids` with the blocks' runs at `starts`), and the gold's counts."""

    ballot: Ballot
    ids: NDArray[np.intp]
    counts: NDArray[np.float64]
    starts: NDArray[np.intp]
    gold: NDArray[np.float64]

    def prf(self, template: list[bool]) -> tuple[float, float, float]:
        """Precision, recall and F1 of the page when the blocks marked template are removed."""
        keep = np.repeat(~np.asarray(template, dtype=bool), np.diff(self.starts))
        kept = np.bincount(self.ids[keep], weights=self.counts[keep], minlength=len(self.gold))
        n_kept = kept.sum()
        n_gold = self.gold.sum()
        shared = np.minimum(kept, self.gold).sum()
        p = shared / n_kept if n_kept else (1.0 if not n_gold else 0.0)
        r = shared / n_gold if n_gold else 1.0
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def page_record(ballot: Ballot, texts: Sequence[str], gold: str) -> PageRecord:
    """A gold page's record; the ballot is slimmed to what the decision reads."""
    vocab: dict[str, int] = {}
    ids: list[int] = []
    counts: list[float] = []
    starts = [0]
    for text in texts:
        block: dict[int, int] = {}
        for token in _TOKEN.findall(text):
            i = vocab.setdefault(token.lower(), len(vocab))
            block[i] = block.get(i, 0) + 1
        ids.extend(block)
        counts.extend(block.values())
        starts.append(len(ids))
    gold_counts = np.zeros(len(vocab) + 1)
    other = len(vocab)  # gold tokens that no block has: they only count in the gold's size
    for token in _TOKEN.findall(gold):
        gold_counts[vocab.get(token.lower(), other)] += 1
    ballot.tally()  # made now, from the blocks, whose texts the record then drops
    headline_blocks(ballot)  # likewise, from the blocks' texts
    ballot.blocks = [
        Block(block[0], [Segment(key, "", length) for key, _text, length in block[1]], block[2])
        for block in ballot.blocks
    ]
    if ballot.cues is not None:
        ballot.cues = dataclasses.replace(ballot.cues, blocks=[], text=[], stats=None, columns=None)
    return PageRecord(
        ballot, np.asarray(ids, dtype=np.intp), np.asarray(counts, dtype=np.float64),
        np.asarray(starts, dtype=np.intp), gold_counts,
    )


@dataclass(slots=True)
class CorpusRecords:
    """A corpus's gold pages, recorded under one evidence setting."""

    name: str
    cold: list[PageRecord] = field(default_factory=list)
    warm: list[PageRecord] = field(default_factory=list)
    first: list[PageRecord] = field(default_factory=list)  # every gold page as its host's first
    # The gold pages decided with the first page's threshold: the cold ones, and a host's
    # first page held for its second (engine/firstpages.py), which is in `warm`.
    first_pages: int = 0

    @property
    def pages(self) -> int:
        return len(self.cold) + len(self.warm)


def record_corpus(
    name: str, pages: Iterable[Any], gold: dict[str, str], params: EngineParams, first: bool = False
) -> CorpusRecords:
    """Run the engine over a corpus (fresh tables, stream order) and keep each gold page's
    record; with `first`, also each gold page decided as its host's first (a table of its own)."""
    out = CorpusRecords(name)
    # In output order, as `detemplate run` decides them: a host's first page once its second
    # is in the table (engine/firstpages.py), its ballot then, which the replay decides again.
    for item in process_pages(pages, MemoryStore(), params, ballots=True):
        page, outcome, ballot = item.page, item.outcome, item.ballot
        content = gold.get(page.url)
        if ballot is None or content is None or outcome.clean is None:
            continue
        record = page_record(ballot, [b.text for b in outcome.clean.blocks], content)
        cold = decided_cold(ballot, params)
        (out.cold if cold else out.warm).append(record)
        out.first_pages += cold or ballot.held
        if first and cold and outcome.clean.page_no == 1:
            out.first.append(record)  # already decided with a table of its own
        elif first:
            alone, ballot = decide_with_ballot(page, HostTable(params.table), params)
            if ballot is not None and alone.clean is not None:
                out.first.append(page_record(ballot, [b.text for b in alone.clean.blocks], content))
    return out


# Sums of P, R and F1 over a corpus's pages of one kind, for each setting.
Sums = dict[Setting, NDArray[np.float64]]


def replay(records: Sequence[PageRecord], params: EngineParams, grid: list[Setting]) -> Sums:
    """For each setting, the sums of P, R and F1 over the pages with the decision so set."""
    out: Sums = {}
    for setting in grid:
        variant = apply(params, setting)
        total = np.zeros(3)
        for record in records:
            total += record.prf(decide_blocks(record.ballot, variant, roles=False).template)
        out[setting] = total
    return out


def flat_parameters(evidence: Setting, cold: Setting, warm: Setting) -> dict[str, float]:
    """Every replayed parameter's value in a setting (as `Replays.choose` gives it), by name."""
    return dict((*evidence, *cold, *warm))


def describe_parameters(parameters: dict[str, float]) -> str:
    return " ".join(f"{n}={v:g}" for n, v in parameters.items())


@dataclass(slots=True)
class Choice:
    """A setting of every replayed parameter, and what it scores on one corpus."""

    evidence: Setting
    cold: Setting
    warm: Setting
    precision: float
    recall: float
    f1: float

    def parameters(self) -> dict[str, float]:
        """Every replayed parameter's value in this setting, by name."""
        return flat_parameters(self.evidence, self.cold, self.warm)

    def describe(self) -> str:
        return describe_parameters(self.parameters())


@dataclass(slots=True)
class Replays:
    """The replayed sums of every corpus: cold ones (one set: the evidence does not change
    a host's first page), warm ones per evidence setting, each corpus's gold pages, and the
    sums of its gold pages each decided as its host's first (`first`), on which the cold
    parameters are chosen, with the number of its real first pages (`cold_pages`)."""

    cold: dict[str, Sums]
    warm: dict[Setting, dict[str, Sums]]
    pages: dict[str, int]
    first: dict[str, Sums]
    cold_pages: dict[str, int]

    def score(self, corpus: str, evidence: Setting, cold: Setting, warm: Setting) -> NDArray[np.float64]:
        """Mean P, R, F1 of a corpus under one setting."""
        n = self.pages[corpus]
        total = self.cold[corpus].get(cold, np.zeros(3)) + self.warm[evidence][corpus].get(warm, np.zeros(3))
        return total / n if n else np.zeros(3)

    def choose(self, corpora: Sequence[str]) -> tuple[Setting, Setting, Setting]:
        """The settings that maximise the mean F1 of `corpora` (cold and warm parts apart;
        the cold part estimated over every page as a first page)."""
        cold_grid = next(iter(self.cold.values())).keys()
        cold = max(cold_grid, key=lambda c: sum(self._first(c, n) for n in corpora))
        best: tuple[float, Setting, Setting] | None = None
        for evidence, by_corpus in self.warm.items():
            for warm in next(iter(by_corpus.values())):
                value = sum(self._part(by_corpus[n], warm, n) for n in corpora)
                if best is None or value > best[0]:
                    best = (value, evidence, warm)
        assert best is not None
        return best[1], cold, best[2]

    def _part(self, sums: Sums, setting: Setting, corpus: str) -> float:
        n = self.pages[corpus]
        return float(sums[setting][2]) / n if n else 0.0

    def _first(self, setting: Setting, corpus: str) -> float:
        """A corpus's cold part of its mean F1: its share of first pages times a first page's
        mean F1, taken over all its pages decided as first pages (the same gold pages)."""
        n = self.pages[corpus]
        return self.cold_pages[corpus] / n * float(self.first[corpus][setting][2]) / n if n else 0.0

    def held_out(self, corpora: Sequence[str]) -> dict[str, Choice]:
        """Each corpus scored with the settings chosen on the others."""
        out = {}
        for name in corpora:
            evidence, cold, warm = self.choose([n for n in corpora if n != name])
            p, r, f = self.score(name, evidence, cold, warm)
            out[name] = Choice(evidence, cold, warm, float(p), float(r), float(f))
        return out


def cold_params(params: EngineParams) -> EngineParams:
    """The parameters a host's first pages are replayed under: `params`, with `WARM_GRID`'s
    value of `pagelevel.max_removed_share` where it sets one. A first page's index guard reads
    that share too (engine/decision.py `keep_an_index`), so the two parts, chosen apart, must
    agree on it: the warm grid may hold one value of it only."""
    shared = WARM_GRID.get("pagelevel.max_removed_share")
    if shared is None:
        return params
    if len(shared) != 1:
        raise ValueError("WARM_GRID may hold one value of pagelevel.max_removed_share: a host's first page reads it "
                         "too, and the first pages are replayed apart from the others")
    return apply(params, (("pagelevel.max_removed_share", shared[0]),))


def run_loco(
    corpora: Sequence[tuple[str, Sequence[Any], dict[str, str]]], params: EngineParams, progress: Any = None
) -> Replays:
    """Record every corpus under each evidence setting and replay the decision grids."""
    cold_grid = settings(COLD_GRID)
    warm_grid = settings(WARM_GRID)
    cold: dict[str, Sums] = {}
    warm: dict[Setting, dict[str, Sums]] = {}
    pages: dict[str, int] = {}
    first: dict[str, Sums] = {}
    cold_pages: dict[str, int] = {}
    first_params = cold_params(params)
    for evidence in settings(EVIDENCE):
        variant = apply(params, evidence)
        warm[evidence] = {}
        for name, corpus_pages, gold in corpora:
            records = record_corpus(name, corpus_pages, gold, variant, first=name not in cold)
            pages[name] = records.pages
            if name not in cold:
                cold[name] = replay(records.cold, first_params, cold_grid)
                cold_pages[name] = records.first_pages
                first[name] = replay(records.first, first_params, cold_grid)
            warm[evidence][name] = replay(records.warm, params, warm_grid)
            if progress is not None:
                progress(name, evidence)
    return Replays(cold, warm, pages, first, cold_pages)
