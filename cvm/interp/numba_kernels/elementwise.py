"""Elementwise kernels on flat arrays: requant, clamp (relu, clip), lut (div and the binary ops use numpy).

Requant: y = clip(floor((x*m + r) / 2^s), lo, hi) with r = 2^(s-1) (0 when s = 0), in int64 (the
verifier proved |x|*max(m) + r fits int64); `>>` on signed ints is floor division by 2^s.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def requant(x, mult, inner, rnd, shift, lo, hi, out):
    """x, out: flat views of (outer, C, inner) arrays; mult: int64[C] (C = 1 for per tensor)."""
    c = mult.shape[0]
    outer = x.shape[0] // (c * inner)
    i = 0
    for _ in range(outer):
        for ch in range(c):
            m = mult[ch]
            for _ in range(inner):
                v = (np.int64(x[i]) * m + rnd) >> shift
                out[i] = min(max(v, lo), hi)
                i += 1


@njit(cache=True)
def clamp(x, lo, hi, out):
    for i in range(x.shape[0]):
        out[i] = min(max(np.int64(x[i]), lo), hi)


@njit(cache=True)
def lut(x, table, offset, out):
    for i in range(x.shape[0]):
        out[i] = table[np.int64(x[i]) - offset]

