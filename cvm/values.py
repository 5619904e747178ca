"""Value bits and storage: a tensor of bits p holds integers in [-(2^(p-1)-1), 2^(p-1)-1] (docs/spec.md,
"Values"), stored in the narrowest dtype of the one dtype table. Widths are cvm.arith facts."""
from __future__ import annotations

import numpy as np

from .limits import MAX_BITS

_STORAGE = ((8, "int8"), (16, "int16"), (32, "int32"))  # the one dtype table: width in bits, name
DTYPE_NAMES = {name: np.dtype(f"<i{width // 8}") for width, name in _STORAGE}  # name -> little-endian dtype
STORAGE_DTYPES = {width: DTYPE_NAMES[name] for width, name in _STORAGE}  # width -> the same dtypes

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
