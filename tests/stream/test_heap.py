"""detemplate.stream.heap: large blocks reused from the heap, its free pages given back by a trim."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

# Each probe runs in a fresh interpreter (malloc's thresholds are per process), with
# mallinfo2's hblkhd (bytes in blocks mapped on their own) and /proc's VmRSS to tell where
# a block came from and what is resident.
PRELUDE = """
import ctypes, sys
from detemplate.stream import heap
FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in FIELDS.split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
def rss_kb():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))
if sys.argv[1] == "tuned":
    assert heap.tune_heap()
"""

# An 8 MB block (a fetch response, a memtable block) allocated, freed and allocated again:
# whether each came in a mapping of its own.
REUSE = PRELUDE + """
mapped = []
for _ in range(2):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(8 << 20)
    mapped.append(libc.mallinfo2().hblkhd - before >= 8 << 20)
    libc.free(block)
print(*mapped)
"""

# An 8 MB block written (resident), a small block after it (so it is not the heap's top),
# the large one freed: the resident KB it leaves behind, then after a trim.
TRIM = PRELUDE + """
block = libc.malloc(8 << 20)
libc.memset(block, 1, 8 << 20)
pin = libc.malloc(64)
before = rss_kb()
libc.free(block)
freed = before - rss_kb()
trimmed = heap.trim_heap()
print(freed, before - rss_kb(), int(trimmed))
"""


def _probe(script: str, mode: str, **env: str) -> list[str]:
    env = {"PATH": "/usr/bin:/bin", **env}  # no GLIBC_TUNABLES or MALLOC_* of the caller's
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, env=env, check=True)
    return out.stdout.split()


def test_a_large_block_comes_from_the_heap_and_is_reused_once_tuned() -> None:
    # glibc as it comes: the first 8 MB block is mapped on its own (and unmapped when freed:
    # its pages mapped and zeroed again by the kernel); the threshold then rises to its size.
    assert _probe(REUSE, "plain") == ["True", "False"]
    # Tuned: both from the heap, the second in the first one's space.
    assert _probe(REUSE, "tuned") == ["False", "False"]


def test_a_trim_gives_back_the_free_pages_a_large_block_left_inside_the_heap() -> None:
    freed_kb, after_trim_kb, trimmed = map(int, _probe(TRIM, "tuned"))
    # Freeing it alone gave back nothing (kept for the next large block)...
    assert freed_kb < 1024
    # ...the trim gave back (nearly) all of its 8 MB, from the middle of the heap.
    assert trimmed == 1
    assert after_trim_kb >= 7 * 1024


def test_an_operators_setting_stands() -> None:
    for env in ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=4194304"}, {"MALLOC_TRIM_THRESHOLD_": "1048576"}):
        script = "from detemplate.stream import heap; print(heap.tune_heap(), heap.trim_heap())"
        assert _probe(script, "plain", **env) == ["False", "False"]
