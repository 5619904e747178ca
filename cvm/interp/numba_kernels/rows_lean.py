"""Twins of the row kernels and small dense layers that the whole-plan runner calls on a recurrent
cell's few values: fused.mul_rows and fused.copy_rows in one pass (one row, fused.one_pass), or through a
scratch allocated once when the call is bound (more rows, fused.blocks); the small portable dense and the
one-block int16 VNNI dense with the output step inlined (step.scratch_rows).

A recurrent cell at batch 1 calls the fused row kernels on 32-128 values, where their fixed cost is
most of the call: a block loop, an int32 scratch row allocated, then the output step's second pass over
it (about 150 ns a call measured, against about 20 ns for the values' own work). The twins compute the
same values with the same output step (step.py: written once), only without the per-call allocation and
call; the loop is picked once per call from the output step's fields, so that the cases without a lut
keep a branch-free inner loop.

The whole-plan runner calls them in place of the originals (row_twins.translate_row for the fused row
kernels, row_twins.translate for the dense layers); the per-step path keeps the originals, their plain
twins. Tuning.lean off turns every twin off (the originals run in the program: in-process A/B,
scripts/perf/ab_flags.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .dense16 import _block as _block16
from .fused import blocks, one_pass
from .step import COPY, PRODUCT, scratch_rows


@njit(cache=True, nogil=True)
def mul_rows_l(x, sc, mult, mult2, ost, res, out, hw, b0, b1):
    """fused.mul_rows (same arguments, same result) in one pass."""
    one_pass(PRODUCT, x, sc, hw, mult, mult2, ost, res, out, np.int64(0), b0, b1)


@njit(cache=True, nogil=True)
def copy_rows_l(x, mult, mult2, ost, res, out, c0, b0, b1):
    """fused.copy_rows (same arguments, same result) in one pass."""
    one_pass(COPY, x, x, np.int64(1), mult, mult2, ost, res, out, c0, b0, b1)


@njit(cache=True, nogil=True)
def dense_rows_l(x, w, bias, mult, mult2, ost, res, out, s):
    """gemv_i32.dense_rows_i32 (conv.conv_i32 of a dense layer: x (rows, 1, 1, K), w (1, og, K),
    bias (1, og); s (rows, og) int32) with the sum over K outside the loop over the outputs, so that
    the loop over the outputs vectorizes (one call of conv._dot_i32 per accumulator cost more than its
    work at K = 1, an LSTM's input dense). Each accumulator is the same int32 sum: int32 adds wrap,
    so any order gives the same value modulo 2^32. Then the same output step (step.scratch_rows)."""
    rows, og, k = out.shape[0], w.shape[1], w.shape[2]
    wg, bg = w[0], bias[0]
    for p in range(rows):
        sr, xr = s[p], x[p, 0, 0]
        for n in range(og):
            sr[n] = bg[n]
        for j in range(k):
            xj = np.int32(xr[j])
            for n in range(og):
                sr[n] = np.int32(sr[n] + xj * np.int32(wg[n, j]))
    scratch_rows(s, rows, out, 0, 0, mult[0], mult2[0], ost, res)



@njit(cache=True, nogil=True)
def dense16_rows_l(x, wp, last, bias, mult, mult2, ost, res, out, geo, b0, b1, s):
    """dense16.dense_vnni16 of one block (rows <= its BLOCK_ROWS, b0, b1 = 0, 1) with its int32
    scratch s (rows, padded og) passed in and step.scratch_rows as the output step: the same accumulators
    (dense16._block), the same output step; the allocation and step.out_rows were a good part of a
    call on one row of a recurrent cell (32 x 128)."""
    _block16(x, 0, out.shape[0], wp, last, bias, s)
    scratch_rows(s, out.shape[0], out, 0, 0, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def mul_rows_f(x, sc, mult, mult2, ost, res, out, hw, b0, b1, s):
    """fused.mul_rows with its scratch s passed in (allocated once, when the call is bound)."""
    blocks(PRODUCT, x, sc, hw, mult, mult2, ost, res, out, np.int64(0), b0, b1, s)


@njit(cache=True, nogil=True)
def copy_rows_f(x, mult, mult2, ost, res, out, c0, b0, b1, s):
    """fused.copy_rows with its scratch s passed in."""
    blocks(COPY, x, x, np.int64(1), mult, mult2, ost, res, out, c0, b0, b1, s)
