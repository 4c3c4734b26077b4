"""The worker's malloc heap: large blocks reused from the heap, free pages given back on a timer.

glibc serves an allocation of at least its mmap threshold (128 KB at first) with a mapping
of its own, unmapped when it is freed, and raises the threshold to a freed mapped block's
size (its "dynamic" threshold, up to 32 MB). Two things of the worker's pull against each
other here:

- Each partition's RocksDB store fills a memtable in arena blocks, flushes it, frees it and
  starts the next. Once the threshold had risen, every later memtable block came from the
  heap, among the small allocations made meanwhile, which kept the freed space from going
  back: the worker's resident memory grew with the pages it decided while its state, block
  cache and memtables stayed bounded (84 MB to 1,112 MB over 1.64 million pages in the
  million-host benchmark, docs/scale.md). A threshold fixed at 1 MB (November 27th) kept
  every memtable block in a mapping of its own, and stopped that.
- But the Kafka client's blocks of a MB and more (each fetch response, of up to
  `max_fetch_bytes` a partition; the produce requests) were then mapped and unmapped every
  time: the kernel mapped and zeroed about 40 fresh memory pages for every page the worker
  decided on ../shared/crawl, 0.06 ms of CPU a page there and 0.03 ms on the small pages of
  site-antsr-pkgdown (medians of alternated `bench-stream` runs; docs/measurements.md, "The
  worker's heap and its page faults").

So the threshold is fixed at glibc's largest (`tune_heap`: blocks under 32 MB come from the
heap, freed ones are reused, and the heap keeps up to 64 MB free at its top, glibc's own
ratio of the two), and what the first point kept is done by `trim_heap` instead, every
`TRIM_EVERY_S` seconds: `malloc_trim(0)` gives back every whole free page anywhere in the
heap (not only its top), so the space a flushed memtable leaves among small allocations
goes back within seconds rather than never. A trim holds the event loop for its walk of the
heap and the pages it gives back: 1.5 ms on a heap of 400 MB with nothing to give back, 6 ms
after a churn of small blocks, 16 ms when half of it was free (a synthetic heap; the worker
gives back what 10 s freed).

glibc only: elsewhere (musl, macOS) both do nothing. An operator's own setting
(`GLIBC_TUNABLES=glibc.malloc...` or `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_`)
is left as it is, and then the heap is not trimmed either.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from typing import Any

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit): blocks under it from the heap
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # free space at the heap's top kept for the next blocks
TRIM_EVERY_S = 10.0  # how often the worker gives the heap's free pages back (trim_heap)


def operator_set() -> bool:
    """Whether the environment sets glibc malloc's thresholds already."""
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "") or any(
        name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    )


@functools.cache
def _glibc() -> Any:
    """This process' glibc with mallopt and malloc_trim declared (looked up once), or None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def _libc() -> Any:
    """glibc, or None (another C library, or the operator's own setting)."""
    return None if operator_set() else _glibc()


def tune_heap(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Fix glibc's mmap and trim thresholds for this process; whether they were set (False:
    not glibc, or the operator's setting stands, and `trim_heap` then does nothing)."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))


def trim_heap() -> bool:
    """Give every whole free page of malloc's heap back to the system (`malloc_trim(0)`);
    whether any was (False also where `tune_heap` sets nothing)."""
    libc = _libc()
    return libc is not None and bool(libc.malloc_trim(0))
