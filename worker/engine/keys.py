"""The 64-bit keys of a host's table: segment keys, tagged keys (pagelets, clusters), their arithmetic.

A segment's key is XXH3-64 of the UTF-8 of its DOM path, NUL, its whitespace-normalised
text (`segment_key`): stable across processes and machines, unlike Python's `hash`;
measured 5x faster than BLAKE2b on segment-sized strings, and collisions are as rare (a
host table holds thousands of keys, so a 64-bit collision has odds near 1e-12). Every walk
keys segments with it; the compiled walk (page/_walk.pyx) hashes the same bytes in C, and
its probe and the tests hold it to this.

Tagged keys share the host's table with the segment keys: the pagelets' min-hash values
and, with clusters.statistics, each segment key counted again under the page's cluster.
Their low TAG_BITS bits are TAG, so they share the DF, the expiry, the serialisation and
the stream's per-page deltas, while `template_count` and the template events count
segment keys only (a segment key ends in the tag with odds of 2^-20; such a key would be
left out of those counts). Over numpy uint64 arrays (wrapping modulo 2^64), `mix64` is
SplitMix64's finaliser, a bijection of 64-bit values that MinHash functions, w-shingles
and per-cluster keys are built on, and `tag` turns values into tagged keys.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from xxhash import xxh3_64_intdigest

TAG_BITS = 20
TAG_MASK = (1 << TAG_BITS) - 1
TAG = 0x9E1A5

U64 = np.uint64
_M1 = U64(0xBF58476D1CE4E5B9)
_M2 = U64(0x94D049BB133111EB)
_KEEP = U64(((1 << 64) - 1) ^ TAG_MASK)
_TAG = U64(TAG)


def segment_key(path: str, text: str) -> int:
    """Stable 64-bit key of a segment: XXH3-64 of the UTF-8 of path, NUL, text."""
    return xxh3_64_intdigest(f"{path}\x00{text}".encode())


def layout_key(path: str) -> int:
    """Stable 64-bit key of a layout path (tags and classes of the layout elements to an
    element): XXH3-64 of its UTF-8 after a \\x01 byte, so it never equals a segment key."""
    return xxh3_64_intdigest(f"\x01{path}".encode())


def is_tagged_key(key: int) -> bool:
    """Whether a table key is a tagged (pagelet or cluster) key, not a segment key."""
    return key & TAG_MASK == TAG


def mix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser, in place; returns `x`."""
    x ^= x >> U64(30)
    x *= _M1
    x ^= x >> U64(27)
    x *= _M2
    x ^= x >> U64(31)
    return x


def tag(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The values as tagged table keys, in place; returns `x`."""
    x &= _KEEP
    x |= _TAG
    return x
