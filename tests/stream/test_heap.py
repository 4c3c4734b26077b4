"""detemplate.stream.heap: large blocks stay in mappings of their own, given back when freed."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

# Allocates 8 MB (a memtable block), frees it, allocates 8 MB again, and prints whether each
# came in a mapping of its own (mallinfo2's hblkhd: bytes in mmapped blocks).
PROBE = """
import ctypes, sys
from detemplate.stream.heap import bound_large_blocks
FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in FIELDS.split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
if sys.argv[1] == "bound":
    assert bound_large_blocks()
mapped = []
for _ in range(2):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(8 << 20)
    mapped.append(libc.mallinfo2().hblkhd - before >= 8 << 20)
    libc.free(block)
print(*mapped)
"""


def _probe(mode: str) -> str:
    env = {"PATH": "/usr/bin:/bin"}  # no GLIBC_TUNABLES or MALLOC_* of the caller's
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def test_a_freed_large_block_raises_glibcs_threshold_unless_it_is_fixed() -> None:
    # glibc as it comes: the second 8 MB block comes from the heap (the threshold rose to
    # the first one's size when it was freed), where it cannot be given back.
    assert _probe("plain") == "True False"
    # Fixed: both in mappings of their own.
    assert _probe("bound") == "True True"


def test_an_operators_setting_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    from detemplate.stream.heap import bound_large_blocks

    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4194304")
    assert not bound_large_blocks()
