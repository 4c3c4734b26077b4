"""Where per-host segment tables live: one small interface, several backends."""

from .base import SegmentStore
from .memory import MemoryStore

__all__ = ["MemoryStore", "SegmentStore"]
