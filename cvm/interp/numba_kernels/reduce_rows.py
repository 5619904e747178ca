"""sum / max of each contiguous row: a reduction over the last stored axes (a softmax's sum and max over
the keys, a LayerNorm's sums over the features).

elementwise.reduce_mid reduces the middle axis of (outer, mid, inner) with an accumulator row of `inner`
values; over the last axis inner is 1 and every element costs a scalar load, add and store of that
one-element row (ViT-B/16: 12% of its run in 74 such reductions). Here a row's values go into one int64
accumulator in a plain loop, which LLVM vectorizes. Same values as reduce_mid (int64 sums are exact for
any row the verifier admits; max is exact), its plain twin in tests/numba/test_numba_reduce_rows.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def reduce_rows(x, is_max, out):
    """out[o] = sum (or max) of x[o, :], in int64. x: (outer, n) with n >= 1; out: (outer,)."""
    outer, n = x.shape
    for o in range(outer):
        row = x[o]
        if is_max:
            acc = np.int64(row[0])
            for i in range(1, n):
                acc = max(acc, np.int64(row[i]))
        else:
            acc = np.int64(0)
            for i in range(n):
                acc += np.int64(row[i])
        out[o] = acc
