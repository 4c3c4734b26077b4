"""The one interface every detector implements, and what the pipeline's stages hand each other.

`pipeline.decide` takes a page through its stages in order: walk -> keys -> table update ->
votes -> combine -> outputs. A detector (one module of this folder each) takes part twice:

- before the table update, `prepare`: its per-page state, a `Contribution` whose `keys`
  are what the page adds to the host's table (empty for a detector that keeps nothing
  there). The pipeline puts every detector's keys into the one update, in detector order;
- after the update, `vote`: given the DFs of its own keys (this page included), it marks
  its evidence on the page's `Ballot`: segment keys it finds template (they count towards
  each block's template share), blocks that are template outright, each block's new text
  and its layout path's novelty, or each block's page-level templateness.

The decision (engine/decision.py) then weighs the ballot, one verdict per block.

`needs_cues` says whether the detector wants the page walk's block tree with its cues
(`page.PageTree`) on this page; the walk builds it when any detector does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..model import Block
from ..page import compiled
from ..page.tree import PageTree
from ..params import EngineParams
from ..table import HostTable


class WalkedPage(NamedTuple):
    """The walk stage's result: the parsed page and its blocks."""

    tree: LexborHTMLParser
    blocks: list[Block]
    texts: list[str]  # each block's text: its segments' texts joined by spaces
    cues: PageTree | None  # the block tree with its cues, when a detector asked for it
    text_nodes: list[tuple[LexborNode, int]] | None  # each segment's text node and key (only for --html)
    runs: Sequence[int] = ()  # the segments' document order: (block, count) pairs (page.walk's `runs`)


class SegmentKeys(NamedTuple):
    """The page's distinct segment keys: sorted (the order they go into the table) and as a set."""

    keys: list[int]
    distinct: set[int]


class Contribution(Protocol):
    """A detector's per-page state: at least the keys the page adds to the host's table."""

    @property
    def keys(self) -> Sequence[int]: ...


class Tally(NamedTuple):
    """The key votes counted per block: its text length, and the part of it in template segments."""

    chars: list[int]
    template_chars: list[int]


@dataclass(slots=True)
class Ballot:
    """The votes on one page's blocks, cast after the table update, in detector order.

    Key votes (`vote_keys`) come first: the tally (each block's template share) is made
    from them on its first use, after which a key vote is an error.
    """

    params: EngineParams
    blocks: list[Block]
    pages: int  # the host's pages, this one included
    cues: PageTree | None = None  # the block tree with its cues, when the walk made it
    warm: bool = False  # the table has seen enough pages to judge (method "table"); else "cold"
    template_keys: set[int] = field(default_factory=set)  # segment keys voted template
    outright: bytearray | None = None  # 1 for each block voted template outright
    novel: list[int] | None = None  # per block: characters in segments new to the host's table
    novelty: list[float] | None = None  # per block: its layout path's novelty (detectors/layout.py)
    presence: list[float] | None = None  # per block: the share of the host's pages its layout path is on
    layout_pages: int = 0  # the host's pages the layout counted: a path is on presence * this of them
    # The page's distinct segment keys (sorted) and each one's DF after this page (detectors/segments.py).
    segment_dfs: tuple[list[int], list[int]] | None = None
    # The page's content region and its enclosing elements (nodes, deepest first), each with
    # the share of the host's pages on which it enclosed the region (detectors/layout.py).
    region: tuple[list[int], list[float]] | None = None
    scores: Any = None  # per block: the page-level model's templateness (a float array), or None
    title: str | None = None  # the page's <title> (page/meta.py page_title): the clean record's, and the headline's
    headlines: list[int] | None = None  # engine/decision.py headline_blocks, once made
    held: bool = False  # a host's first page decided once its second was in the table (engine/firstpages.py)
    _tally: Tally | None = None

    def vote_keys(self, keys: set[int]) -> None:
        """Vote these segment keys template."""
        if self._tally is not None:
            raise RuntimeError("a key vote after the tally: detectors that vote on keys come first")
        if self.template_keys:
            self.template_keys |= keys
        else:  # the first key vote: the ballot takes the set itself (no copy)
            self.template_keys = keys

    def vote_outright(self, first: int, end: int) -> None:
        """Vote the blocks [first, end) template, whatever their template share."""
        if self.outright is None:
            self.outright = bytearray(len(self.blocks))
        self.outright[first:end] = b"\x01" * (end - first)

    def tally(self) -> Tally:
        """Each block's chars and template chars (those of its segments among the template keys); made once."""
        tally = self._tally
        if tally is None:
            template_keys = self.template_keys
            if template_keys:
                chars_of, tchars_of = count_chars(self.blocks, template_keys)
            else:  # no segment of this page is template (always so on a cold host)
                chars_of = [sum([seg[2] for seg in block[1]]) for block in self.blocks]
                tchars_of = [0] * len(chars_of)
            tally = self._tally = Tally(chars_of, tchars_of)
        return tally


def count_chars(blocks: list[Block], keys: set[int]) -> tuple[list[int], list[int]]:
    """Each block's chars, and the part of them in segments whose key is among `keys`
    (compiled where the page walk is: page/_walk.pyx `tally`)."""
    kernel = compiled.kernel("tally")
    if kernel is None:
        return tally_python(blocks, keys)
    return kernel(blocks, keys)  # type: ignore[no-any-return]


def tally_python(blocks: list[Block], template_keys: set[int]) -> tuple[list[int], list[int]]:
    """Each block's chars, and the part of them in segments whose key is among
    `template_keys` (the reference for page/_walk.pyx `tally`)."""
    chars_of: list[int] = []
    tchars_of: list[int] = []
    for block in blocks:
        chars = 0
        tchars = 0
        for key, _text, length in block[1]:
            chars += length
            if key in template_keys:
                tchars += length
        chars_of.append(chars)
        tchars_of.append(tchars)
    return chars_of, tchars_of


C = TypeVar("C", bound=Contribution)


class Detector(Protocol[C]):
    """A detector of the engine: its part in one page's decision."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        """Whether the walk must build the block tree with its cues for this detector on this page."""
        ...

    def prepare(self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams) -> C | None:
        """Before the table update: this page's state and the keys it adds (None: it sits the page out)."""
        ...

    def vote(self, mine: C, dfs: list[int], ballot: Ballot) -> None:
        """After the update: `dfs` are the DFs of `mine.keys`, this page included; mark the vote on `ballot`."""
        ...
