"""The segment table's detector (Wang et al., WWW 2008): a segment on enough of the host's pages is template.

Its keys are the page's distinct segment keys (DOM path plus text, engine/keys.py),
sorted; the table (engine/table.py) counts each key's DF over the host's pages. Its vote:
the keys whose DF reaches the threshold (`TableParams.threshold`: template_df, lowered
on a young host) are template, and a block whose template segments make up more than
`template_ratio` of its text is a template block (method ``table``). Before the host
has shown `threshold` pages no segment can be template yet, and its blocks say so
(method ``cold``) rather than claim the table found them to be content.
"""

from __future__ import annotations

from ..params import EngineParams
from ..table import HostTable
from .base import Ballot, SegmentKeys, WalkedPage


class SegmentTable:
    """The segment table's part in a page's decision."""

    def needs_cues(self, table: HostTable, params: EngineParams) -> bool:
        return False

    def prepare(self, page: WalkedPage, segments: SegmentKeys, table: HostTable, params: EngineParams) -> SegmentKeys:
        return segments

    def vote(self, mine: SegmentKeys, dfs: list[int], ballot: Ballot) -> None:
        ballot.segment_dfs = (mine.keys, dfs)
        threshold = ballot.params.table.threshold(ballot.pages)
        if ballot.pages >= threshold:
            ballot.warm = True
            ballot.vote_keys({key for key, df in zip(mine.keys, dfs, strict=True) if df >= threshold})


SEGMENT_TABLE = SegmentTable()
