"""Twins of the row kernels and small dense layers that the whole-plan runner calls on a recurrent
cell's few values: fused.mul_rows and fused.copy_rows in one pass (one row), or with the output step
below (more rows); the small portable dense and the one-block int16 VNNI dense with that output step.

A recurrent cell at batch 1 calls the fused row kernels on 32-128 values, where their fixed cost is
most of the call: a block loop, an int32 scratch row, then conv.out_rows' second pass over it (about
150 ns a call measured, against about 20 ns for the values' own work). These twins compute each
value's product (or copy) and its output step (plan.OutputStep: requant and clamp, a lut, a residual
add with its requant and clamp, a second lut) in one pass with no scratch, with the exact arithmetic
of fused.py and conv.out_rows: the product is an int32 (the mul node's exact value, which the
verifier proved fits it), then every stage is int64, and each lut reads the table in `ost` at the
value minus the table's offset. The loop is picked once per call from the output step's fields, so
that the cases without a lut keep a branch-free inner loop.

The whole-plan runner calls them in place of the originals (row_twins.translate_row for the fused row
kernels, row_twins.translate for the dense layers); the per-step path keeps the originals, their plain twins. Tuning.lean
off turns every twin off (the originals run in the program: in-process A/B, scripts/perf/ab_flags.py).
After a change to the output step's layout (kargs.OST) or its arithmetic (conv.out_rows, which
finish_rows repeats), change this file to match.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .dense16 import _block as _block16
from .fused import BLOCK_ROWS
from .kargs import HAS_RESIDUAL, HI, HI2, LO, LO2, LUT1, LUT1_OFF, LUT2, LUT2_OFF, RND, RND2, SHIFT, SHIFT2


@njit(cache=True, nogil=True, inline="always")
def _value(xr, sr, is_mul, ch):
    """The accumulator of fused.py: xr[ch] (copy), or np.int32(xr[ch]) * np.int32(sr[ch]) stored
    to int32 (mul_rows' scratch), as int64."""
    if is_mul:
        return np.int64(np.int32(np.int32(xr[ch]) * np.int32(sr[ch])))
    return np.int64(np.int32(xr[ch]))


@njit(cache=True, nogil=True, inline="always")
def _rows(x, sc, hw, is_mul, mult, mult2, ost, res, out, c0, b0, b1):
    """Rows b0*BLOCK_ROWS .. min(b1*BLOCK_ROWS, rows) of out[p, c0 + ch] = step(value(p, ch)), on
    row views (measured faster than 2-D indexing in the inner loop)."""
    c = x.shape[1]
    r0, r1 = b0 * BLOCK_ROWS, min(b1 * BLOCK_ROWS, x.shape[0])
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    lut1 = ost[LUT1]
    t1 = lut1 - ost[LUT1_OFF]
    if ost[HAS_RESIDUAL] == 0:
        if lut1 == 0:
            for p in range(r0, r1):
                xr, sr, orow = x[p], sc[p // hw], out[p, c0:c0 + c]
                for ch in range(c):
                    orow[ch] = min(max((_value(xr, sr, is_mul, ch) * mult[ch] + rnd) >> shift, lo), hi)
            return
        for p in range(r0, r1):
            xr, sr, orow = x[p], sc[p // hw], out[p, c0:c0 + c]
            for ch in range(c):
                v = min(max((_value(xr, sr, is_mul, ch) * mult[ch] + rnd) >> shift, lo), hi)
                orow[ch] = ost[t1 + np.int64(np.int32(v))]
        return
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    lut2 = ost[LUT2]
    t2 = lut2 - ost[LUT2_OFF]
    last = res.shape[0] - 1
    for p in range(r0, r1):
        xr, sr, orow, rrow = x[p], sc[p // hw], out[p, c0:c0 + c], res[min(p, last), c0:c0 + c]
        if lut1 == 0 and lut2 == 0:
            for ch in range(c):
                v = min(max((_value(xr, sr, is_mul, ch) * mult[ch] + rnd) >> shift, lo), hi) + rrow[ch]
                orow[ch] = min(max((v * mult2[ch] + rnd2) >> shift2, lo2), hi2)
            continue
        for ch in range(c):
            v = min(max((_value(xr, sr, is_mul, ch) * mult[ch] + rnd) >> shift, lo), hi)
            if lut1 != 0:
                v = ost[t1 + v]
            v = min(max(((v + rrow[ch]) * mult2[ch] + rnd2) >> shift2, lo2), hi2)
            if lut2 != 0:
                v = ost[t2 + v]
            orow[ch] = v


@njit(cache=True, nogil=True)
def mul_rows_l(x, sc, mult, mult2, ost, res, out, hw, b0, b1):
    """fused.mul_rows (same arguments, same result) in one pass."""
    _rows(x, sc, hw, True, mult, mult2, ost, res, out, np.int64(0), b0, b1)


@njit(cache=True, nogil=True)
def copy_rows_l(x, mult, mult2, ost, res, out, c0, b0, b1):
    """fused.copy_rows (same arguments, same result) in one pass."""
    _rows(x, x, np.int64(1), False, mult, mult2, ost, res, out, c0, b0, b1)


@njit(cache=True, nogil=True, inline="always")
def finish_rows(s, nrows, out, r0, c0, mult, mult2, ost, res):
    """conv.out_rows(s, nrows, out, r0, c0, mult, mult2, ost, res) on row views with the output
    step's fields read once: the same arithmetic (stage 1 requant and clamp in int64, its lut at the
    value stored to int32, the residual add, stage 2, its lut), measured about 5x faster on one row
    of 128 values with a residual."""
    og = mult.shape[0]
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    lut1 = ost[LUT1]
    t1 = lut1 - ost[LUT1_OFF]
    if ost[HAS_RESIDUAL] == 0:
        if lut1 == 0:
            for r in range(nrows):
                srow, orow = s[r], out[r0 + r, c0:c0 + og]
                for n in range(og):
                    orow[n] = min(max((np.int64(srow[n]) * mult[n] + rnd) >> shift, lo), hi)
            return
        for r in range(nrows):  # two passes, as out_rows: the requant vectorizes, the lookups do not
            srow, orow = s[r], out[r0 + r, c0:c0 + og]
            for n in range(og):
                srow[n] = min(max((np.int64(srow[n]) * mult[n] + rnd) >> shift, lo), hi)
            for n in range(og):
                orow[n] = ost[t1 + srow[n]]
        return
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    lut2 = ost[LUT2]
    t2 = lut2 - ost[LUT2_OFF]
    last = res.shape[0] - 1
    for r in range(nrows):
        srow, orow, rrow = s[r], out[r0 + r, c0:c0 + og], res[min(r0 + r, last), c0:c0 + og]
        if lut1 == 0 and lut2 == 0:
            for n in range(og):
                v = min(max((np.int64(srow[n]) * mult[n] + rnd) >> shift, lo), hi) + rrow[n]
                orow[n] = min(max((v * mult2[n] + rnd2) >> shift2, lo2), hi2)
            continue
        for n in range(og):
            v = min(max((np.int64(srow[n]) * mult[n] + rnd) >> shift, lo), hi)
            if lut1 != 0:
                v = ost[t1 + v]
            v = min(max(((v + rrow[n]) * mult2[n] + rnd2) >> shift2, lo2), hi2)
            if lut2 != 0:
                v = ost[t2 + v]
            orow[n] = v


@njit(cache=True, nogil=True)
def dense_rows_l(x, w, bias, mult, mult2, ost, res, out, s):
    """gemv_i32.dense_rows_i32 (conv.conv_i32 of a dense layer: x (rows, 1, 1, K), w (1, og, K),
    bias (1, og); s (rows, og) int32) with the sum over K outside the loop over the outputs, so that
    the loop over the outputs vectorizes (one call of conv._dot_i32 per accumulator cost more than its
    work at K = 1, an LSTM's input dense). Each accumulator is the same int32 sum: int32 adds wrap,
    so any order gives the same value modulo 2^32. Then the same output step (finish_rows)."""
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
    finish_rows(s, rows, out, 0, 0, mult[0], mult2[0], ost, res)



@njit(cache=True, nogil=True)
def dense16_rows_l(x, wp, last, bias, mult, mult2, ost, res, out, geo, b0, b1, s):
    """dense16.dense_vnni16 of one block (rows <= its BLOCK_ROWS, b0, b1 = 0, 1) with its int32
    scratch s (rows, padded og) passed in and finish_rows as the output step: the same accumulators
    (dense16._block), the same output step; the allocation and conv.out_rows were a good part of a
    call on one row of a recurrent cell (32 x 128)."""
    _block16(x, 0, out.shape[0], wp, last, bias, s)
    finish_rows(s, out.shape[0], out, 0, 0, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def mul_rows_f(x, sc, mult, mult2, ost, res, out, hw, b0, b1, s):
    """fused.mul_rows with its scratch passed in (allocated once, when the call is bound) and finish_rows
    as the output step: the products into the scratch (a loop that vectorizes), then the output step."""
    c = x.shape[1]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            p = r0 + r
            xr, sr, acc = x[p], sc[p // hw], s[r]
            for ch in range(c):
                acc[ch] = np.int32(xr[ch]) * np.int32(sr[ch])
        finish_rows(s, nrows, out, r0, np.int64(0), mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def copy_rows_f(x, mult, mult2, ost, res, out, c0, b0, b1, s):
    """fused.copy_rows with its scratch passed in and finish_rows as the output step."""
    c = x.shape[1]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            xr, acc = x[r0 + r], s[r]
            for ch in range(c):
                acc[ch] = xr[ch]
        finish_rows(s, nrows, out, r0, c0, mult, mult2, ost, res)
