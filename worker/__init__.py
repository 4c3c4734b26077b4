"""detemplate: per-host web page template removal for crawl pipelines.

The public API, for crawl pipelines that call the engine themselves rather than run
`detemplate run` or the stream worker (both of which decide as `process_pages` does):

    from detemplate import EngineParams, MemoryStore, RawPage, process_pages

    store = MemoryStore()                      # or RocksStore("state/", params.table)
    params = EngineParams()                    # every knob, with the reason for its default
    for decided in process_pages(pages, store, params):  # pages: RawPages in crawl order
        outcome = decided.outcome              # of decided.page
        if outcome.clean is not None:          # else outcome.dead says why (bad input)
            print(outcome.clean.text)          # the page's content, its template removed
        for event in outcome.events:           # what the host's template did
            print(encode_event(event).decode())

- `process_pages` holds each host's first page until its second is decided, and hands it
  out just before it (engine/firstpages.py); `process_page(page, store, params)` decides
  one page at once (a host's first page alone, from the page itself).
- `decide(page, table, params)` is the core, for a caller that keeps each host's
  `HostTable` itself; `process_page` gets and puts it in a store.
- Pages come from `iter_inputs` (JSONL, WARC, folders of HTML: RawPage or DeadPage per
  record) or are made as `RawPage`s; records go out as JSON with `encode_clean`,
  `encode_event` and `encode_dead`, byte for byte what `detemplate run` writes.
- Errors: `DetemplateError` is the base; `BadInputError` (a page that cannot be used)
  becomes a DeadPage, never an exception, in `decide`; `ConfigError` and `StateError`
  are raised.

Importing it loads the engine and its stores, never Faust or matplotlib. Everything
else is internal and may change between versions.
"""

from .engine.errors import BadInputError, ConfigError, DetemplateError, StateError
from .engine.firstpages import process_pages
from .engine.model import CleanPage, DeadPage, Outcome, RawPage, TemplateEvent
from .engine.params import (
    ClusterParams,
    EngineParams,
    EventParams,
    PageletParams,
    PageLevelParams,
    SegmentParams,
    TableParams,
    with_overrides,
)
from .engine.pipeline import decide, process_page
from .engine.table import HostTable
from .io.codec import encode_clean, encode_dead, encode_event
from .io.sources import iter_inputs
from .state.base import SegmentStore
from .state.memory import MemoryStore
from .state.rocks import RocksStore

__version__ = "0.1.0"

__all__ = [
    "BadInputError",
    "CleanPage",
    "ClusterParams",
    "ConfigError",
    "DeadPage",
    "DetemplateError",
    "EngineParams",
    "EventParams",
    "HostTable",
    "MemoryStore",
    "Outcome",
    "PageLevelParams",
    "PageletParams",
    "RawPage",
    "RocksStore",
    "SegmentParams",
    "SegmentStore",
    "StateError",
    "TableParams",
    "TemplateEvent",
    "__version__",
    "decide",
    "encode_clean",
    "encode_dead",
    "encode_event",
    "iter_inputs",
    "process_page",
    "process_pages",
    "with_overrides",
]
