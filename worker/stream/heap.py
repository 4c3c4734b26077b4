"""The worker's malloc heap: large blocks go back to the system when they are freed.

Each partition's RocksDB store fills a memtable (64 MB, Faust's write buffer) in arena
blocks of an eighth of it, flushes it to disk, frees it and starts the next. glibc serves
an allocation of at least its mmap threshold (128 KB at first) with its own mapping, given
back on free; but when such a block is freed it raises the threshold to that block's size
(its "dynamic" threshold, up to 32 MB), so every later memtable block comes from the heap,
among the small allocations made meanwhile, which keep the freed space from going back.
The worker's resident memory then grew with the pages it decided while its state, block
cache and memtables stayed bounded: 84 MB to 1,112 MB over 1.64 million pages in the
million-host benchmark (docs/scale.md). A fixed threshold (which also turns the raising
off) keeps every block of a MB or more in a mapping of its own.

glibc only: elsewhere (musl, macOS) `bound_large_blocks` does nothing. An operator's own
setting (`GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...` or `MALLOC_MMAP_THRESHOLD_`)
is left as it is.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks of this size or more get a mapping of their own


def operator_set() -> bool:
    """Whether the environment sets glibc's mmap threshold already."""
    return "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", "") or "MALLOC_MMAP_THRESHOLD_" in os.environ


def bound_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process; whether it was set
    (False: not glibc, or the operator's setting stands)."""
    if operator_set() or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
