"""Where per-host segment tables live: one small interface, several backends."""

from worker.state.base import SegmentStore
from worker.state.memory import MemoryStore

__all__ = ["MemoryStore", "SegmentStore"]
