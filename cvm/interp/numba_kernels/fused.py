"""Element-wise kernels that end in the fused output step (step.py): a product of two channels-last
activations, one of them possibly one value per (sample, channel) (squeeze-excite's scale), or one input of
a channels-last concat written into its channel slice, followed by whatever requant / relu / clip / lut /
residual add the planner absorbed.

The product is the mul node's exact value: the verifier proved it fits the mul's output (at most 32
bits), so it is computed in int32 without wrapping; the output step then works in int64 as it does
after a convolution. Each kernel has two forms of the same values: by blocks through an int32 scratch
(the requant loop vectorizes; `blocks`, whose scratch the whole-plan runner allocates once) and in one
pass (step.rows: no scratch, for a recurrent cell's single rows).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .step import COPY, PRODUCT, rows, scratch_rows, value

BLOCK_ROWS = 64  # pixels per block (the unit split between threads)


@njit(cache=True, nogil=True, inline="always")
def blocks(kind, x, sc, hw, mult, mult2, ost, res, out, c0, b0, b1, s):
    """Pixel blocks b0..b1 of out[p, c0 + c] = step(value c of row p) (step.value: the copy of x, or its
    product with sc), through the int32 scratch s (at least min(BLOCK_ROWS, rows) x C)."""
    c = x.shape[1]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            p = r0 + r
            xr, sr, acc = x[p], sc[p // hw], s[r]
            for ch in range(c):
                acc[ch] = value(kind, xr, sr, ch)
        scratch_rows(s, nrows, out, r0, c0, mult, mult2, ost, res)


@njit(cache=True, nogil=True, inline="always")
def one_pass(kind, x, sc, hw, mult, mult2, ost, res, out, c0, b0, b1):
    """blocks' values without a scratch: rows b0*BLOCK_ROWS .. min(b1*BLOCK_ROWS, rows) in one pass."""
    r0 = b0 * BLOCK_ROWS
    rows(kind, x, sc, hw, r0, min(b1 * BLOCK_ROWS, x.shape[0]) - r0, out, r0, c0, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def mul_rows(x, sc, mult, mult2, ost, res, out, hw, b0, b1):
    """Pixel blocks b0..b1 of out[p, c] = step(x[p, c] * sc[p // hw, c]). x, out: (N*H*W, C);
    sc: (N*H*W / hw, C) (hw = H*W: one scale per sample and channel; hw = 1: same shape as x);
    mult, mult2, ost, res: the output step (step.py)."""
    s = np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32)
    blocks(PRODUCT, x, sc, hw, mult, mult2, ost, res, out, np.int64(0), b0, b1, s)


@njit(cache=True, nogil=True)
def copy_rows(x, mult, mult2, ost, res, out, c0, b0, b1):
    """Pixel blocks b0..b1 of out[p, c0 + c] = step(x[p, c]): one input of a channels-last concat
    written into its channel slice through its fused requant (or an identity output step).
    x: (N*H*W, C_i) of at most 32-bit values; out: (N*H*W, C)."""
    s = np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32)
    blocks(COPY, x, x, np.int64(1), mult, mult2, ost, res, out, c0, b0, b1, s)
