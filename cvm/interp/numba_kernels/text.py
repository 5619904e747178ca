"""Kernels of the opset-2 text ops (cvm.ops.text): gather (rows of a constant table by index) and isqrt
(the exact integer square root). Both are held bit for bit to the reference (tests/cvm/test_text_ops.py)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def gather_rows(idx, table, out):
    """out[i, :] = table[idx[i], :]; idx flat (n,), table (V, D), out (n, D). The verifier proved every
    index in 0..V-1."""
    d = table.shape[1]
    for i in range(idx.shape[0]):
        row = table[np.int64(idx[i])]
        o = out[i]
        for j in range(d):
            o[j] = row[j]


@njit(cache=True, nogil=True)
def isqrt(x, out):
    """out[i] = floor(sqrt(max(x[i], 0))): a float64 square root (within one of the answer below 2^53),
    then one exact integer correction each way."""
    for i in range(x.shape[0]):
        v = max(np.int64(x[i]), 0)
        y = np.int64(np.sqrt(np.float64(v)))
        if y * y > v:
            y -= 1
        if (y + 1) * (y + 1) <= v:
            y += 1
        out[i] = y
