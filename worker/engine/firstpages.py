"""A host's first page decided once its second page is in the table.

On its host's first page the table has nothing to compare with, and the page-level model
decides alone: it reads a documentation home page's table of contents, a package list or
an API summary as navigation (docs/measurements.md, "A host's first page decided once its
second is in the table"). So a first page is held: decided alone on arrival, as before, its
keys in the host's table from then on (every later page sees the table it always saw), but
its output waits. When the host's second page has been decided, the first is decided again,
on a table of its own that holds the second page and then the first (`decide_held`): the
table's evidence where the layout is, and beside the content region the model at the first
page's own threshold (engine/decision.py `_warm`, `held_navigation`). Its output goes just
before the second page's. A host whose second page does not come within
`pagelevel.hold_first` positions of the stream (offline: items of the input; the stream
worker: messages of the partition) has its first page published as decided on arrival,
at that position; so do the pages still held at the end of the input, in input order.

`FirstPages` is that bookkeeping for the offline shells (`detemplate run`, `eval`, the
benchmarks); the stream worker keeps its own per partition (stream/app.py), with
`decide_held` the same decision.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .detectors.base import Ballot, WalkedPage
from .model import CONTENT, Outcome, RawPage
from .params import EngineParams
from .pipeline import TableStore, decide_with_ballot, observe_page, process_decision
from .table import HostTable


class Decided(NamedTuple):
    """A page with its outcome, ready to go out. `at`: for a first page published by the
    bound, the position it goes after (its own plus the bound); else None, at the page's
    own place. (A held page is kept as one too, `at` its own position.)"""

    page: RawPage
    outcome: Outcome
    ballot: Ballot | None
    at: int | None = None
    tag: Any = None  # what the shell handed in with the page (the stream worker: its message)


def decide_held(
    first: RawPage, alone: Outcome, second: RawPage, params: EngineParams, with_html: bool = False,
    table: HostTable | None = None, second_walked: WalkedPage | None = None, first_walked: WalkedPage | None = None,
) -> tuple[Outcome, Ballot | None]:
    """The host's first page decided on a table of its own holding the second page, then it.

    `alone` is the first page's outcome on arrival: the output keeps its page number,
    cluster, events and table keys (those the host's table has), and takes the text and
    verdicts of this decision; or is that outcome, where this decision would keep less than
    1 - `pagelevel.max_new_removed_share` of what it kept. `table`: a fresh table to decide
    on (`detemplate show` reads it after), else one made here; `second_walked`: the second
    page's walk from its own decision, else it is walked here; `first_walked`: the first
    page's walk on arrival, walked again where it is None (`pipeline.decide_page`)."""
    if table is None:
        table = HostTable(params.table)
    observe_page(second, table, params, second_walked)
    outcome, ballot = decide_with_ballot(first, table, params, with_html, held=True, walked=first_walked)
    if outcome.clean is None or alone.clean is None:  # cannot be: the same page was live on arrival
        return alone, None
    kept_alone = sum([b.chars for b in alone.clean.blocks if b.verdict == CONTENT])
    kept = sum([b.chars for b in outcome.clean.blocks if b.verdict == CONTENT])
    if kept < (1.0 - params.pagelevel.max_new_removed_share) * kept_alone:
        # Nearly all of what the page alone kept would go: the second page misled the table
        # (a home page whose content is the site's menu on the other page); as decided alone.
        return alone, None
    clean = dataclasses.replace(outcome.clean, page_no=alone.clean.page_no, cluster=alone.clean.cluster)
    return dataclasses.replace(alone, clean=clean), ballot


# The held pages that keep their walk for the decision again (FirstPages.walks), by their
# HTML's characters together: a walk holds the page's lexbor tree and block tree, 15-16 times
# its HTML's UTF-8 bytes on ../shared, so these walks take about 15 MB of memory at most (a
# stream worker: for each partition). On ../shared/crawl's order that walks 8 of its 124
# first pages again, against 0 with no bound (docs/measurements.md, "A first pass a seventh
# cheaper").
HELD_WALK_CHARS = 1_000_000


class FirstPages:
    """Each host's held first page, in the order they came, for one stream of pages."""

    __slots__ = ("bound", "held", "params", "walk_chars", "walks", "with_html")

    def __init__(self, params: EngineParams, with_html: bool = False) -> None:
        self.params = params
        self.with_html = with_html
        self.bound = params.pagelevel.hold_first
        # By host, in position order. An OrderedDict: its first entry is found at once, where a
        # dict's iteration walks over the slots of the entries deleted before it (80,000
        # positions of lone hosts, `due` at each: 0.09 s against a dict's 0.37 s). Each as
        # decided alone on arrival, `at` its position.
        self.held: OrderedDict[str, Decided] = OrderedDict()
        # Held pages' walks, by host, while their HTML is at most HELD_WALK_CHARS together: the
        # decision again uses them rather than parse and walk the page twice; the others are
        # walked again.
        self.walks: dict[str, WalkedPage] = {}
        self.walk_chars = 0

    def __len__(self) -> int:
        return len(self.held)

    def due(self, at: int) -> list[Decided]:
        """The held pages whose bound passed before position `at`, as decided alone."""
        out: list[Decided] = []
        held = self.held
        bound = self.bound
        while held:
            host, first = next(iter(held.items()))
            assert first.at is not None  # a held page's position
            if first.at + bound >= at:
                break
            del held[host]
            self._drop_walk(first.page)
            out.append(first._replace(at=first.at + bound))
        return out

    def oldest(self) -> int | None:
        """The position of the oldest page held (None: none)."""
        for first in self.held.values():
            return first.at
        return None

    def decided(
        self, page: RawPage, outcome: Outcome, ballot: Ballot | None, at: int, tag: Any = None,
        walked: WalkedPage | None = None,
    ) -> list[Decided]:
        """What goes out now that `page` (at position `at`) is decided: nothing for a first
        page (held); the held first page of its host, then it, for a second page; else it."""
        clean = outcome.clean
        if self.bound <= 0 or clean is None:
            return [Decided(page, outcome, ballot, None, tag)]
        host = page.host
        first = self.held.pop(host, None)
        first_walked = None if first is None else self._drop_walk(first.page)
        out: list[Decided] = []
        if clean.page_no == 1:  # a first page (or a host starting afresh: its old first page goes alone)
            if first is not None:
                out.append(first._replace(at=None))
            self.held[host] = Decided(page, outcome, ballot, at, tag)
            if walked is not None and self.walk_chars + len(page.html) <= HELD_WALK_CHARS:
                self.walks[host] = walked
                self.walk_chars += len(page.html)
            return out
        if first is not None:
            again, again_ballot = decide_held(
                first.page, first.outcome, page, self.params, self.with_html, second_walked=walked,
                first_walked=first_walked,
            )
            if again_ballot is None:  # the guard gave the page as decided alone: its ballot then
                again_ballot = first.ballot
            out.append(Decided(first.page, again, again_ballot, None, first.tag))
        out.append(Decided(page, outcome, ballot, None, tag))
        return out

    def _drop_walk(self, page: RawPage) -> WalkedPage | None:
        """The held `page`'s walk, no longer kept (None where it was not)."""
        walked = self.walks.pop(page.host, None)
        if walked is not None:
            self.walk_chars -= len(page.html)
        return walked

    def flush(self) -> list[Decided]:
        """Every page still held, as decided alone, in input order, each placed after its
        position plus the bound (the end of the input; the stream worker's partition that had
        no message for a while, whose outputs have no places)."""
        out = [f._replace(at=f.at + self.bound) for f in self.held.values() if f.at is not None]
        self.held.clear()
        self.walks.clear()
        self.walk_chars = 0
        return out


def process_pages(
    pages: Iterable[RawPage], store: TableStore, params: EngineParams, with_html: bool = False, ballots: bool = False
) -> Iterator[Decided]:
    """Every page decided with its host's table from `store`, in output order: `process_page`
    over a stream, with each host's first page held (`FirstPages`). `ballots`: keep each
    decision's ballot (`detemplate eval --loco`)."""
    first_pages = FirstPages(params, with_html)
    for at, page in enumerate(pages):
        yield from first_pages.due(at)
        outcome, ballot, walked = process_decision(page, store, params, with_html)
        yield from first_pages.decided(page, outcome, ballot if ballots else None, at, walked=walked)
    yield from first_pages.flush()
