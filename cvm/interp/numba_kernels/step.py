"""The output step (plan.OutputStep), written once: every kernel that ends a multiply-accumulate, a fused
product or a fused copy stores its values through `rows` (or `out_rows`, its compiled entry); its 16-lane
SIMD form, for accumulators held in registers, is simd_step.py beside it.

For each value v (an accumulator, an int32 product, or a copied value) of output channel n:

    y = clip(floor((v * mult[n] + rnd) / 2^shift), lo, hi)                          stage 1 (requant)
    y = table[y - offset]                                                            lut 1, if any
    r' = clip(floor((r * rmul + rrnd) / 2^rshift), rlo, rhi)                          the residual's requant
    y = clip(floor(((y + r') * mult2[n] + rnd2) / 2^shift2), lo2, hi2)               stage 2, with a residual
    y = table2[y - offset2]                                                          lut 2, if any

all in int64, where v and every tensor value fit int32 (the verifier's proof), so nothing wraps. `ost` is
the kargs.OST layout, then the tables (a stage's table starts at its lutK field; 0 when it has none).

`rows` reads its values from one of two sources, a compile-time constant of each caller: COPY, values of
at most 32 bits read in place (an int32 scratch of accumulators, or a concat's input); PRODUCT, the int32
product x * sc of a fused mul (the mul node's exact value, proven to fit int32), sc read at row p // hw
(hw = H*W: one scale per sample and channel; 1: the shape of x). `scratch_rows` (`out_rows` compiled on
its own) reads an int32 scratch it may overwrite: a lut then runs in two passes (the requant loop
vectorizes, the lookups do not). The loop for a case is picked once per call from the step's fields, so
the cases without a lut keep a branch-free inner loop that vectorizes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kargs import HAS_RESIDUAL, HI, HI2, LO, LO2, LUT1, LUT1_OFF, LUT2, LUT2_OFF, RHI, RLO, RMUL, RND, RND2, RRND, \
    RSHIFT, SHIFT, SHIFT2

COPY, PRODUCT = 0, 1  # where `rows` reads its values (the module docstring)
OPEN_LO, OPEN_HI = -(1 << 31), (1 << 31) - 1  # a clamp that never acts on a tensor value (plan.OPEN_LO, OPEN_HI)


@njit(cache=True, nogil=True, inline="always")
def requant(v, m, rnd, shift, lo, hi):
    """clip(floor((v * m + rnd) / 2^shift), lo, hi) in int64: the rounding shift of every scalar kernel."""
    return min(max((np.int64(v) * m + rnd) >> shift, lo), hi)


@njit(cache=True, nogil=True, inline="always")
def value(kind, xr, sr, n):
    """Value n of a row from `kind`'s source (xr: the row; sr: its scale row, PRODUCT only), as int64."""
    if kind == PRODUCT:
        return np.int64(np.int32(np.int32(xr[n]) * np.int32(sr[n])))
    return np.int64(np.int32(xr[n]))


@njit(cache=True, nogil=True, inline="always")
def cols(kind, x, c0, sc, m, ost, dst):
    """dst[r * w + j] = stage 1 (one multiplier m) of value j of the row x[r, c0:c0 + w], w = len(dst) / rows:
    a slice of columns read in place (wholeplan_fuse), the scale flat like dst (PRODUCT)."""
    rows = x.shape[0]
    w = dst.shape[0] // rows
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for r in range(rows):
        base = r * w
        xr, sr = x[r, c0:c0 + w], sc[base:base + w]
        for j in range(w):
            dst[base + j] = requant(value(kind, xr, sr, j), m, rnd, shift, lo, hi)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def out_rows(s, nrows, out, r0, c0, mult, mult2, ost, res):
    """scratch_rows as a function of its own (the MAC kernels call it once a block)."""
    scratch_rows(s, nrows, out, r0, c0, mult, mult2, ost, res)


@njit(cache=True, nogil=True, inline="always")
def scratch_rows(s, nrows, out, r0, c0, mult, mult2, ost, res):
    """out[r0 + r, c0 + n] = the output step of the int32 scratch s[r, n], r < nrows, n < len(mult); res
    (the residual) has the rows of out, or one row (a constant per channel) that every row adds, or is a
    dummy without a residual. s is overwritten where a lut follows (two passes)."""
    if ost[HAS_RESIDUAL] == 0 and ost[LUT1] != 0:
        og = mult.shape[0]
        rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
        t1 = ost[LUT1] - ost[LUT1_OFF]
        for r in range(nrows):
            srow, orow = s[r], out[r0 + r, c0:c0 + og]
            for n in range(og):
                srow[n] = requant(srow[n], mult[n], rnd, shift, lo, hi)
            for n in range(og):
                orow[n] = ost[t1 + srow[n]]
    else:
        rows(COPY, s, s, 1, 0, nrows, out, r0, c0, mult, mult2, ost, res)


@njit(cache=True, nogil=True, inline="always")
def rows(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, mult2, ost, res):
    """out[r0 + r, c0 + n] = the output step of value n of source row p0 + r (`kind`: module docstring),
    r < nrows, n < len(mult)."""
    if ost[HAS_RESIDUAL] == 0 and ost[LUT1] == 0:
        _plain(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, ost)
    elif ost[HAS_RESIDUAL] == 0:
        _lut(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, ost)
    else:
        _residual(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, mult2, ost, res)


@njit(cache=True, nogil=True, inline="always")
def _plain(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, ost):
    og = mult.shape[0]
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for r in range(nrows):
        p = p0 + r
        xr, sr, orow = x[p], sc[p // hw], out[r0 + r, c0:c0 + og]
        for n in range(og):
            orow[n] = requant(value(kind, xr, sr, n), mult[n], rnd, shift, lo, hi)


@njit(cache=True, nogil=True, inline="always")
def _lut(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, ost):
    og = mult.shape[0]
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    t1 = ost[LUT1] - ost[LUT1_OFF]
    for r in range(nrows):
        p = p0 + r
        xr, sr, orow = x[p], sc[p // hw], out[r0 + r, c0:c0 + og]
        for n in range(og):
            orow[n] = ost[t1 + requant(value(kind, xr, sr, n), mult[n], rnd, shift, lo, hi)]


@njit(cache=True, nogil=True, inline="always")
def _residual(kind, x, sc, hw, p0, nrows, out, r0, c0, mult, mult2, ost, res):
    """The step with a residual add (and any lookup tables). OST's rmul..rhi requantize the residual first:
    the identity unless the planner absorbed a requant of it (lower_mac's VNNI path); its clamp is open
    where the planner proved it inactive."""
    og = mult.shape[0]
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    rnd2, shift2, lo2, hi2 = ost[RND2], ost[SHIFT2], ost[LO2], ost[HI2]
    lut1, lut2 = ost[LUT1], ost[LUT2]
    t1, t2 = lut1 - ost[LUT1_OFF], lut2 - ost[LUT2_OFF]
    rmul, rrnd, rshift, rlo, rhi = ost[RMUL], ost[RRND], ost[RSHIFT], ost[RLO], ost[RHI]
    unclamped = rlo <= OPEN_LO and rhi >= OPEN_HI
    identity = rmul == 1 and rshift == 0 and unclamped  # the residual as it is
    last = res.shape[0] - 1
    for r in range(nrows):
        p = p0 + r
        xr, sr, orow, rrow = x[p], sc[p // hw], out[r0 + r, c0:c0 + og], res[min(r0 + r, last), c0:c0 + og]
        if lut1 == 0 and lut2 == 0 and identity:  # no branch in the loops: they vectorize
            for n in range(og):
                v = requant(value(kind, xr, sr, n), mult[n], rnd, shift, lo, hi) + rrow[n]
                orow[n] = requant(v, mult2[n], rnd2, shift2, lo2, hi2)
        elif lut1 == 0 and lut2 == 0 and unclamped:  # the residual requantized first, without its clamp
            for n in range(og):
                v = requant(value(kind, xr, sr, n), mult[n], rnd, shift, lo, hi) + \
                    ((np.int64(rrow[n]) * rmul + rrnd) >> rshift)
                orow[n] = requant(v, mult2[n], rnd2, shift2, lo2, hi2)
        else:
            for n in range(og):
                v = requant(value(kind, xr, sr, n), mult[n], rnd, shift, lo, hi)
                if lut1 != 0:
                    v = ost[t1 + v]
                v = requant(v + requant(rrow[n], rmul, rrnd, rshift, rlo, rhi), mult2[n], rnd2, shift2, lo2, hi2)
                if lut2 != 0:
                    v = ost[t2 + v]
                orow[n] = v
