"""Element-wise kernels that end in the fused output step (conv.out_rows): a product of two
channels-last activations, one of them possibly one value per (sample, channel) (squeeze-excite's
scale), followed by whatever requant / relu / clip / lut / residual add the planner absorbed.

The product is the mul node's exact value: the verifier proved it fits the mul's output (at most 32
bits), so it is computed in int32 without wrapping; the output step then works in int64 as it does
after a convolution.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import out_rows

BLOCK_ROWS = 64  # pixels per block (the unit split between threads)


@njit(cache=True, nogil=True)
def mul_rows(x, sc, mult, mult2, ost, res, out, hw, b0, b1):
    """Pixel blocks b0..b1 of out[p, c] = step(x[p, c] * sc[p // hw, c]). x, out: (N*H*W, C);
    sc: (N*H*W / hw, C) (hw = H*W: one scale per sample and channel; hw = 1: same shape as x);
    mult, mult2, ost, res: the output step (conv.out_rows)."""
    rows, c = x.shape
    s = np.empty((min(BLOCK_ROWS, rows), c), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        for r in range(nrows):
            p = r0 + r
            xr, sr, acc = x[p], sc[p // hw], s[r]
            for ch in range(c):
                acc[ch] = np.int32(xr[ch]) * np.int32(sr[ch])
        out_rows(s, nrows, out, r0, np.int64(0), mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def copy_rows(x, mult, mult2, ost, res, out, c0, b0, b1):
    """Pixel blocks b0..b1 of out[p, c0 + c] = step(x[p, c]): one input of a channels-last concat
    written into its channel slice through its fused requant (or an identity output step).
    x: (N*H*W, C_i) of at most 32-bit values; out: (N*H*W, C)."""
    rows, c = x.shape
    s = np.empty((min(BLOCK_ROWS, rows), c), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        for r in range(nrows):
            xr, acc = x[r0 + r], s[r]
            for ch in range(c):
                acc[ch] = xr[ch]
        out_rows(s, nrows, out, r0, c0, mult, mult2, ost, res)
