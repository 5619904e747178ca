"""Value bits: a tensor of bits p holds integers in [-(2^(p-1)-1), 2^(p-1)-1] (docs/spec.md, "Values")."""
from __future__ import annotations

import numpy as np

from .limits import MAX_BITS

STORAGE_DTYPES = {8: np.dtype("<i1"), 16: np.dtype("<i2"), 32: np.dtype("<i4")}
DTYPE_NAMES = {"int8": np.dtype("<i1"), "int16": np.dtype("<i2"), "int32": np.dtype("<i4")}


def bits_max(bits: int) -> int:
    """Largest value a tensor of `bits` may hold (the range is symmetric)."""
    return (1 << (bits - 1)) - 1


def bits_for(lo: int, hi: int) -> int:
    """Smallest p such that [lo, hi] lies in the p-bit symmetric range."""
    return max(abs(int(lo)), abs(int(hi))).bit_length() + 1


def storage_dtype(bits: int) -> np.dtype:
    """int8 / int16 / int32 by bits; every value of `bits` fits its storage type."""
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits must be in 1..{MAX_BITS}, got {bits}")
    for width, dtype in STORAGE_DTYPES.items():
        if bits <= width:
            return dtype
    raise AssertionError("unreachable")


_NAME_OF = {v: k for k, v in DTYPE_NAMES.items()}


def dtype_name(dtype: np.dtype) -> str:
    return _NAME_OF[np.dtype(dtype).newbyteorder("<")]
