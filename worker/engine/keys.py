"""64-bit key arithmetic the detectors share, over numpy uint64 arrays (wrapping modulo 2^64).

`mix64` is SplitMix64's finaliser, a bijection of 64-bit values: MinHash functions,
w-shingles and per-cluster keys are built on it. `tag` turns values into tagged keys of
the host's table (detemplate.engine.table: the low TAG_BITS bits replaced by TAG), so they share the
segments' DF and expiry without ever counting as segments.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .table import TAG, TAG_MASK

U64 = np.uint64
_M1 = U64(0xBF58476D1CE4E5B9)
_M2 = U64(0x94D049BB133111EB)
_KEEP = U64(((1 << 64) - 1) ^ TAG_MASK)
_TAG = U64(TAG)


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
