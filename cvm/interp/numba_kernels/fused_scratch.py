"""fused.mul_rows and fused.copy_rows with their int32 scratch passed in, for the whole-plan runner.

The fused kernels allocate their scratch on every call; a recurrent cell at batch 1 calls them on
32-96 values, where the allocation and its release are a good part of the call. These twins run the
same loops and the same output step (conv.out_rows) on a scratch that `translate` allocates once,
when the call is bound, so they write what the originals write.

numba's cache keys a kernel by its own file only: after a change to conv.out_rows (or to the loops
of fused.py, which these repeat), touch this file.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import out_rows
from .fused import BLOCK_ROWS, copy_rows, mul_rows


@njit(cache=True, nogil=True)
def mul_rows_s(x, sc, mult, mult2, ost, res, out, hw, b0, b1, s):
    """fused.mul_rows with s: (min(BLOCK_ROWS, rows), C) int32."""
    c = x.shape[1]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            p = r0 + r
            xr, sr, acc = x[p], sc[p // hw], s[r]
            for ch in range(c):
                acc[ch] = np.int32(xr[ch]) * np.int32(sr[ch])
        out_rows(s, nrows, out, r0, np.int64(0), mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def copy_rows_s(x, mult, mult2, ost, res, out, c0, b0, b1, s):
    """fused.copy_rows with s: (min(BLOCK_ROWS, rows), C_i) int32."""
    c = x.shape[1]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            xr, acc = x[r0 + r], s[r]
            for ch in range(c):
                acc[ch] = xr[ch]
        out_rows(s, nrows, out, r0, c0, mult, mult2, ost, res)


LEAN = True  # the one-pass twins (rows_lean.py); False: the scratch twins (kept for A/B)
LEAN_MAX_ROWS = 1  # the one-pass twins up to this many rows


def translate(fn, args) -> tuple | None:
    """The twin call for a mul_rows / copy_rows call, else None: the one-pass kernel of rows_lean
    (measured faster on the small calls the whole-plan runner makes), or with LEAN off the same
    loops with their scratch allocated here."""
    if fn is not mul_rows and fn is not copy_rows:
        return None
    if LEAN and args[0].shape[0] <= LEAN_MAX_ROWS:
        from .rows_lean import copy_rows_l, mul_rows_l
        return (mul_rows_l if fn is mul_rows else copy_rows_l), args
    x = args[0]
    s = np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32)
    return (mul_rows_s if fn is mul_rows else copy_rows_s), (*args, s)
