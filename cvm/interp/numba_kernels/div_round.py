"""The tensor division (spec: div, `div_round`: floor((2x + d) / (2d)), halves toward +inf) as one compiled
kernel with broadcasting, for the whole-plan runner in place of arith.div_round_into's three numpy calls (a
numpy call splits the program, and numpy's int64 floor_divide runs a hardware division per element).

Exactness: every CVM tensor fits int32 (the verifier's MAX_BITS), so t = 2x + d and e = 2d fit 34 bits and
are exact in float64. For e > 0, q = floor(t / e) computed in float64 is off by at most one (the quotient's
rounding error is below 2^-18 < 1), and one integer correction against the remainder t - q e makes it exact.
A non-positive divisor (not admitted by the verifier for div, but cheap to handle) takes integer floor
division. A row with one divisor (a softmax's or a norm's sum broadcast along the last axis) multiplies by
1 / (2d) instead: also off by at most one, and the branch-free correction lets the loop vectorize. The operands are seen as 4-d with element strides (0 along a broadcast axis), as
wholeplan_ops.binary sees add / sub / mul.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit



@njit(cache=True, inline="always")
def _div_round(x, d):
    t, e = 2 * np.int64(x) + np.int64(d), 2 * np.int64(d)
    if e <= 0:
        return t // e
    q = np.int64(math.floor(np.float64(t) / np.float64(e)))
    r = t - q * e
    if r < 0:
        q -= 1
    elif r >= e:
        q += 1
    return q


@njit(cache=True, inline="always")
def at(s, i0, i1, i2):
    """The flat offset of row (i0, i1, i2) of a 4-d index space, s: the operand's element strides."""
    return i0 * s[0] + i1 * s[1] + i2 * s[2]


@njit(cache=True, nogil=True)
def div_round4(x, d, sx, sd, out):
    """out[i] = div_round(x[i . sx], d[i . sd]) over the 4-d index i of out; x, d flat."""
    d0, d1, d2, d3 = out.shape
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                px, pd, row = at(sx, i0, i1, i2), at(sd, i0, i1, i2), out[i0, i1, i2]
                if sd[3] == 0 and d[pd] > 0:  # one divisor along the row (a softmax's or a norm's sum)
                    if sx[3] == 1:  # a contiguous row, as a slice: the loop vectorizes
                        _row_by_one(x[px:px + d3], 0, 1, np.int64(d[pd]), row)
                    else:
                        _row_by_one(x, px, sx[3], np.int64(d[pd]), row)
                    continue
                for i3 in range(d3):
                    row[i3] = _div_round(x[px + i3 * sx[3]], d[pd + i3 * sd[3]])


@njit(cache=True, inline="always")
def _row_by_one(x, px, step, d, row):
    """row[i] = div_round(x[px + i step], d), d >= 1: the quotient from a multiplication by 1 / (2d) (off by
    at most one: |t / e| < 2^34, relative error below 2^-51), corrected without branches, so it vectorizes."""
    e = 2 * d
    inv = 1.0 / np.float64(e)
    for i in range(row.shape[0]):
        t = 2 * np.int64(x[px + i * step]) + d
        q = np.int64(math.floor(np.float64(t) * inv))
        r = t - q * e
        q = q - np.int64(r < 0) + np.int64(r >= e)
        row[i] = q
