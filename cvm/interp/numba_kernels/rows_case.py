"""Row kernels of the whole-plan program specialized at bind time by the shape of their output step,
on flat operands: case "p" (requant and clamp only) or "r" (that, then a residual tensor added and a
second requant and clamp); no lut, the residual as it is.

rows_lean's twins and step.out_rows choose the output step's case inside the kernel among loops for
every case, and run them row by row. On a recurrent cell's batch-8 calls (8 rows of 32 values) that
measured 235 ns for a gate product where 23 ns do (compiled loop, one thread, thread CPU): LLVM
vectorized the int32-output loop four wide, so a row of 32 values took its scalar remainder, and each
row paid the vectorized loop's alias checks. Here the output step is picked when the call is bound
(it is known then) and a call of one block runs as one loop over rows x channels, the per-channel
multipliers tiled to every row at bind time (row_twins' `mul_rows`, `dense_rows`, `dense16_rows`
choose them: the call, or None where another kernel serves it; the whole-plan runner asks only with
Tuning.special on). The arithmetic is step.out_rows', value for value: the
accumulator (the int32 product, or the int32 sum) widened to int64, stage 1, the residual added in
int64, stage 2. The plain twins are the kernels they replace (tests/numba/test_numba_rows_case.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .dense16 import _block as _block16
from .kargs import HI, HI2, LO, LO2, RND, RND2, SHIFT, SHIFT2
from .step import PRODUCT, cols, requant, value


@njit(cache=True, nogil=True)
def mul_flat_p(x, sc, mult, ost, out):
    """fused.mul_rows of case "p" on flat operands: out[i] = stage 1 of the int32 product x[i] sc[i]."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for i in range(x.shape[0]):
        out[i] = requant(value(PRODUCT, x, sc, i), mult[i], rnd, shift, lo, hi)


@njit(cache=True, nogil=True)
def mul_flat_r(x, sc, mult, mult2, ost, res, out):
    """fused.mul_rows of case "r" on flat operands."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    for i in range(x.shape[0]):
        v = requant(value(PRODUCT, x, sc, i), mult[i], rnd, shift, lo, hi) + res[i]
        out[i] = requant(v, mult2[i], rnd2, shift2, lo2, hi2)


@njit(cache=True, nogil=True)
def mul_flat_p1(x, sc, m, ost, out):
    """mul_flat_p with one multiplier m for every channel (a per-tensor requant: no tiled array to read)."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for i in range(x.shape[0]):
        out[i] = requant(value(PRODUCT, x, sc, i), m, rnd, shift, lo, hi)


@njit(cache=True, nogil=True)
def mul_flat_r1(x, sc, m, m2, ost, res, out):
    """mul_flat_r with one multiplier per stage (m, m2) for every channel."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    for i in range(x.shape[0]):
        v = requant(value(PRODUCT, x, sc, i), m, rnd, shift, lo, hi) + res[i]
        out[i] = requant(v, m2, rnd2, shift2, lo2, hi2)


@njit(cache=True, nogil=True)
def mul_cols_p1(x, c0, sc, m, ost, out):
    """mul_flat_p1 with x the columns c0:c0 + w of a (rows, W) array (a gate's slice read in place:
    wholeplan_fuse); sc and out flat, rows * w values."""
    cols(PRODUCT, x, c0, sc, m, ost, out)


@njit(cache=True, nogil=True)
def mul_cols_r1(x, c0, sc, m, m2, ost, res, out):
    """mul_flat_r1 with x the columns c0:c0 + w of a (rows, W) array (mul_cols_p1)."""
    rows = x.shape[0]
    w = out.shape[0] // rows
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    for r in range(rows):
        xr, base = x[r, c0:c0 + w], r * w
        for j in range(w):
            i = base + j
            v = requant(np.int32(np.int32(xr[j]) * np.int32(sc[i])), m, rnd, shift, lo, hi) + res[i]
            out[i] = requant(v, m2, rnd2, shift2, lo2, hi2)


@njit(cache=True, nogil=True, inline="always")
def _finish_p(s, mult, ost, out):
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for i in range(s.shape[0]):
        out[i] = requant(s[i], mult[i], rnd, shift, lo, hi)


@njit(cache=True, nogil=True, inline="always")
def _finish_r(s, mult, mult2, ost, res, out):
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    for i in range(s.shape[0]):
        v = requant(s[i], mult[i], rnd, shift, lo, hi) + res[i]
        out[i] = requant(v, mult2[i], rnd2, shift2, lo2, hi2)


@njit(cache=True, nogil=True, inline="always")
def _dense_sums(x, wt, bias, s):
    """gemv_i32.dense_rows_i32's int32 sums into s (rows, og), from the weights transposed, wt (K, og):
    the bias, then each input's products added in turn (int32 adds wrap, so any order gives the same
    values; the loops over the outputs read contiguous weights and vectorize)."""
    rows, k, og = s.shape[0], wt.shape[0], wt.shape[1]
    bg = bias[0]
    for p in range(rows):
        sr, xr = s[p], x[p, 0, 0]
        for n in range(og):
            sr[n] = bg[n]
        for j in range(k):
            xj, wr = np.int32(xr[j]), wt[j]
            for n in range(og):
                sr[n] = np.int32(sr[n] + xj * np.int32(wr[n]))


@njit(cache=True, nogil=True, inline="always")
def _finish_rows_p(s, out, mult, ost):
    """_finish_p row by row, mult (og,) read untiled (rows of 64 or more values vectorize whole)."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    og = out.shape[1]
    for r in range(out.shape[0]):
        srow, orow = s[r], out[r]
        for n in range(og):
            orow[n] = requant(srow[n], mult[n], rnd, shift, lo, hi)


@njit(cache=True, nogil=True, inline="always")
def _finish_rows_r(s, out, mult, mult2, ost, res):
    """_finish_r row by row (res shaped like out)."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    og = out.shape[1]
    for r in range(out.shape[0]):
        srow, orow, rrow = s[r], out[r], res[r]
        for n in range(og):
            v = requant(srow[n], mult[n], rnd, shift, lo, hi) + rrow[n]
            orow[n] = requant(v, mult2[n], rnd2, shift2, lo2, hi2)


@njit(cache=True, nogil=True)
def dense_row_p(x, wt, bias, mult, ost, out, s):
    """dense_flat_p with the output step row by row, mult (og,) untiled."""
    _dense_sums(x, wt, bias, s)
    _finish_rows_p(s, out, mult, ost)


@njit(cache=True, nogil=True)
def dense_row_r(x, wt, bias, mult, mult2, ost, res, out, s):
    """dense_flat_r with the output step row by row, mult and mult2 (og,) untiled."""
    _dense_sums(x, wt, bias, s)
    _finish_rows_r(s, out, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def dense16_row_p(x, wp, last, bias, mult, ost, out, s):
    """dense16_flat_p with the output step row by row."""
    _block16(x, 0, s.shape[0], wp, last, bias, s)
    _finish_rows_p(s, out, mult, ost)


@njit(cache=True, nogil=True)
def dense16_row_r(x, wp, last, bias, mult, mult2, ost, res, out, s):
    """dense16_flat_r with the output step row by row."""
    _block16(x, 0, s.shape[0], wp, last, bias, s)
    _finish_rows_r(s, out, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def dense_flat_p(x, wt, bias, mult, ost, out, s, sf):
    """gemv_i32.dense_rows_i32 of case "p" (wt: its weights transposed): the sums into s (rows, og),
    then the output step over sf (s flat) into out (flat), mult tiled to every row."""
    _dense_sums(x, wt, bias, s)
    _finish_p(sf, mult, ost, out)


@njit(cache=True, nogil=True)
def dense_flat_r(x, wt, bias, mult, mult2, ost, res, out, s, sf):
    """gemv_i32.dense_rows_i32 of case "r" (res flat, like out)."""
    _dense_sums(x, wt, bias, s)
    _finish_r(sf, mult, mult2, ost, res, out)


@njit(cache=True, nogil=True)
def dense16_flat_p(x, wp, last, bias, mult, ost, out, s, sf):
    """rows_lean.dense16_rows_l of case "p" (its scratch s unpadded: sf is s flat)."""
    _block16(x, 0, s.shape[0], wp, last, bias, s)
    _finish_p(sf, mult, ost, out)


@njit(cache=True, nogil=True)
def dense16_flat_r(x, wp, last, bias, mult, mult2, ost, res, out, s, sf):
    """rows_lean.dense16_rows_l of case "r"."""
    _block16(x, 0, s.shape[0], wp, last, bias, s)
    _finish_r(sf, mult, mult2, ost, res, out)
