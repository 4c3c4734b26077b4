"""The threads of the OpenBLAS that numpy loaded in this process: read and set.

numpy's OpenBLAS starts a thread a core when it loads. Set from the command line
(settings.tune_blas) and in each job of `run --jobs` (parallel.py), which takes its parent's
count. Linux only (the library is found in /proc/self/maps); elsewhere, or with another BLAS,
nothing is found and nothing changes.

An idle OpenBLAS thread is not free: it spins for about 0.1 s of CPU after it starts (and
after each call it served) before it sleeps, and setting the count starts the threads again
in a forked process (OpenBLAS stops them before a fork). So `set_threads` sets only a count
that differs, and at one thread stops the library's threads (they serve no call then; a
later count above one starts them again). In `run --jobs 2` on ../shared/crawl, `perf`
counted 0.07 s of CPU in the two jobs' BLAS threads before, none after: taken from the jobs
while they keep both cores busy (docs/parallel.md). The parent's own thread still spins
for its first 0.1 s, from numpy's import to the command's `tune_blas`, before any job starts.
"""

from __future__ import annotations

import ctypes
from typing import Any

# The thread-count functions, by the names the builds of OpenBLAS export.
_FUNCTIONS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),  # numpy 2 wheels
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),  # numpy 1.2x wheels
    ("openblas_set_num_threads", "openblas_get_num_threads"),  # a system OpenBLAS
)


def _functions() -> tuple[Any, Any, Any] | None:
    """The set and get functions of the loaded OpenBLAS, and its function that stops its
    threads (None where the build has none), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        if not path.startswith("/"):
            continue
        try:
            lib = ctypes.CDLL(path)  # the library already loaded: the same handle
        except OSError:
            continue
        for set_name, get_name in _FUNCTIONS:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                shutdown = getattr(lib, "blas_thread_shutdown_", None)
                if shutdown is not None:
                    shutdown.argtypes, shutdown.restype = [], ctypes.c_int
                return setter, getter, shutdown
    return None


def threads() -> int | None:
    """The threads the loaded OpenBLAS uses, or None where none is found."""
    found = _functions()
    return None if found is None else int(found[1]())


def set_threads(n: int) -> int | None:
    """Set the loaded OpenBLAS to `n` threads; the count read back, or None where none is found.
    At one thread, the library's idle threads are stopped (see the module's docstring)."""
    found = _functions()
    if found is None:
        return None
    setter, getter, shutdown = found
    if getter() != n:
        setter(n)
    if n == 1 and shutdown is not None:
        shutdown()
    return int(getter())
