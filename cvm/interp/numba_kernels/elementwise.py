"""Elementwise kernels on flat arrays: requant, clamp (relu, clip), lut (div and the binary ops use numpy).

Requant: y = clip(floor((x*m + r) / 2^s), lo, hi) with r = 2^(s-1) (0 when s = 0), in int64 (the
verifier proved |x|*max(m) + r fits int64): step.requant, the output step's own stage.
Loops index views with their own loop counter only, so that LLVM vectorizes them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .step import requant as step_requant


@njit(cache=True, nogil=True)
def requant(x, mult, inner, rnd, shift, lo, hi, out):
    """x, out: flat views of (outer, C, inner) arrays; mult: int64[C] (C = 1 for per tensor)."""
    c = mult.shape[0]
    if c == 1:
        m = mult[0]
        for i in range(x.shape[0]):
            out[i] = step_requant(x[i], m, rnd, shift, lo, hi)
        return
    outer = x.shape[0] // (c * inner)
    if inner == 1:
        for r in range(outer):
            xr, orow = x[r * c:(r + 1) * c], out[r * c:(r + 1) * c]
            for j in range(c):
                orow[j] = step_requant(xr[j], mult[j], rnd, shift, lo, hi)
        return
    for r in range(outer * c):
        m = mult[r % c]
        xr, orow = x[r * inner:(r + 1) * inner], out[r * inner:(r + 1) * inner]
        for j in range(inner):
            orow[j] = step_requant(xr[j], m, rnd, shift, lo, hi)


@njit(cache=True, nogil=True)
def clamp(x, lo, hi, out):
    for i in range(x.shape[0]):
        out[i] = min(max(np.int64(x[i]), lo), hi)


@njit(cache=True, nogil=True)
def div_const(x, d, out):
    """div by one constant d >= 1: floor((2x + d) / 2d), as numba's // on int64 floors (as Python's)."""
    d2 = 2 * d
    for i in range(x.shape[0]):
        out[i] = (2 * np.int64(x[i]) + d) // d2


@njit(cache=True, nogil=True)
def lut(x, table, offset, out):
    for i in range(x.shape[0]):
        out[i] = table[np.int64(x[i]) - offset]


@njit(cache=True, nogil=True)
def reduce_mid(x, is_max, out):
    """out[o, i] = sum (or max) over m of x[o, m, i], in int64. x: (outer, mid, inner); out: (outer, inner)."""
    outer, mid, inner = x.shape
    acc = np.empty(inner, np.int64)
    for o in range(outer):
        first = x[o, 0]
        for i in range(inner):
            acc[i] = first[i]
        for m in range(1, mid):
            row = x[o, m]
            if is_max:
                for i in range(inner):
                    acc[i] = max(acc[i], np.int64(row[i]))
            else:
                for i in range(inner):
                    acc[i] += row[i]
        orow = out[o]
        for i in range(inner):
            orow[i] = acc[i]


@njit(cache=True, nogil=True)
def take_axis(x, start, step, out):
    """out[o, i, j] = x[o, start + i*step, j]: a slice along one axis of an (outer, n, inner) view
    (the other axes whole). One compiled call instead of numpy's strided copy (a recurrent model
    slices every gate and every time step: hundreds of small slices a run)."""
    outer, m, inner = out.shape
    for o in range(outer):
        for i in range(m):
            src, dst = x[o, start + i * step], out[o, i]
            for j in range(inner):
                dst[j] = src[j]


@njit(cache=True, nogil=True)
def to_channels_last(x, out, r0, r1):
    """out[n, y, z, c] = x[n, c, y, z] for image rows r0..r1 (row = n * H + y): the "c" -> "nhwc"
    conversion before a model's first conv (numpy's strided copy of a 3x224x224 input took 0.12 ms,
    six times this loop). x: (N, C, H, W); out: (N, H, W, C)."""
    _, c, h, w = x.shape
    for r in range(r0, r1):
        n, y = r // h, r % h
        orow = out[n, y]
        for ch in range(c):
            xr = x[n, ch, y]
            for z in range(w):
                orow[z, ch] = xr[z]


def byte_table(table: np.ndarray, offset: int, lo: int, hi: int) -> np.ndarray:
    """A lut's table (entries for the values offset..offset + len - 1) as 256 bytes indexed by an
    int8 value's bit pattern: t[v & 0xFF] = table[v - offset] for v in lo..hi, the input's proven
    range (whose entries the verifier proved inside the int8 output), 0 elsewhere (never read)."""
    t = np.zeros(256, np.int8)
    for v in range(max(lo, -128), min(hi, 127) + 1):
        t[v & 0xFF] = table[v - offset]
    return t.view(np.uint8)
