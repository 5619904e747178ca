"""The register tiles of the AVX-512 GEMMs, each written once and parameterised by what differs between
its users, as onnxruntime's MLAS parameterises its kernels: the inner product (`dot`: vpdpbusd for uint8 x
int8, dense16.dpwssd for int16 pairs), the store (`store`: into an int32 scratch, or through the output step
on the registers, vnni_direct), and where the operands lie (element steps, runs of the summed axis).

A tile holds R output rows x P panels of 16 output channels as R x P accumulators in zmm registers; per 4
bytes of the summed axis it loads P weight vectors and broadcasts R input words, for R x P inner products.
The summed axis is read as runs: useg x vseg runs of seg4 words, ustride and vstride elements apart
(vnni.runs: one run per kernel row of a convolution, or a single run for a dense layer); the weights follow
it, one 64-byte vector per panel and word, panels ldw elements apart. Row r of the tile starts at element
a[m + r] of x. After the loop, `ready(sargs)` gives the store its arguments (vnni_direct makes its output
step's scalars opaque there, so that LLVM does not hoist their splats above the loop into the registers the
accumulators need) and `store(sargs, r, row)` stores row r's P accumulators (a tuple); sargs begins with
the store's target, the tile's first row and its first output channel.

`dot`, `ready` and `store` are compiled functions passed as arguments, and every tile is inlined into its
caller: numba compiles one specialisation per combination, with the calls inlined, so each tile's code is
the hand-written one's. (A compiled function passed to a function that is not inlined makes its caller
uncacheable: numba embeds the function object's address, a "dynamic global".)
"""
from __future__ import annotations

from numba import njit
from numba.extending import overload

from .simd import dpbusd, vbroadcast4, vload, vstore


@njit(cache=True, inline="always")
def dot_u8s8(acc, a, b):
    """vpdpbusd (simd.dpbusd) as a function a tile can take."""
    return dpbusd(acc, a, b)


@njit(cache=True, inline="always")
def as_is(sargs):
    """The `ready` of a store that needs nothing after the loop."""
    return sargs


def four(row):
    """row (a tuple of 4 or 2 accumulators) as 4: a row of 2 repeats its last (compiled only: the overload)."""
    raise NotImplementedError


@overload(four, inline="always")
def _four(row):
    if len(row) == 4:
        return lambda row: row
    return lambda row: (row[0], row[1], row[1], row[1])


@njit(cache=True, inline="always")
def scratch(sargs, r, row):
    """Row r's panels (4 or 2) into the int32 scratch s (rows of lds values): sargs = (s, m, n0, lds), the
    tile's first row m and first output channel n0."""
    s, m, n0, lds = sargs
    at, p = (m + r) * lds + n0, four(row)
    vstore(s, at, p[0])
    vstore(s, at + 16, p[1])
    if len(row) > 2:
        vstore(s, at + 32, p[2])
        vstore(s, at + 48, p[3])


@njit(cache=True, inline="always")
def _row4(dot, c, xv, b):
    return dot(c[0], xv, b[0]), dot(c[1], xv, b[1]), dot(c[2], xv, b[2]), dot(c[3], xv, b[3])


@njit(cache=True, inline="always")
def _row2(dot, c, xv, b):
    return dot(c[0], xv, b[0]), dot(c[1], xv, b[1])


@njit(cache=True, inline="always")
def _panels4(wp, w, ldw):
    return vload(wp, w), vload(wp, w + ldw), vload(wp, w + 2 * ldw), vload(wp, w + 3 * ldw)


@njit(cache=True, inline="always")
def _panels2(wp, w, ldw):
    return vload(wp, w), vload(wp, w + ldw)


@njit(cache=True, inline="always")
def tile_6x4(dot, ready, store, sargs, x, a, m, runs, xstep, wstep, wp, w0, ldw, bias, n0):
    """6 rows x 4 panels: 24 accumulators, 4 weight loads and 6 broadcasts per 24 inner products."""
    useg, vseg, seg4, ustride, vstride = runs
    c0 = (vload(bias, n0), vload(bias, n0 + 16), vload(bias, n0 + 32), vload(bias, n0 + 48))
    c1 = c2 = c3 = c4 = c5 = c0
    a0, a1, a2, a3, a4, a5 = a[m], a[m + 1], a[m + 2], a[m + 3], a[m + 4], a[m + 5]
    for u in range(useg):
        for v in range(vseg):
            off = u * ustride + v * vstride
            for t in range(seg4):
                b, i = _panels4(wp, w0, ldw), off + xstep * t
                c0 = _row4(dot, c0, vbroadcast4(x, a0 + i), b)
                c1 = _row4(dot, c1, vbroadcast4(x, a1 + i), b)
                c2 = _row4(dot, c2, vbroadcast4(x, a2 + i), b)
                c3 = _row4(dot, c3, vbroadcast4(x, a3 + i), b)
                c4 = _row4(dot, c4, vbroadcast4(x, a4 + i), b)
                c5 = _row4(dot, c5, vbroadcast4(x, a5 + i), b)
                w0 += wstep
    sargs = ready(sargs)
    store(sargs, 0, c0)
    store(sargs, 1, c1)
    store(sargs, 2, c2)
    store(sargs, 3, c3)
    store(sargs, 4, c4)
    store(sargs, 5, c5)


@njit(cache=True, inline="always")
def tile_8x2(dot, ready, store, sargs, x, a, m, runs, xstep, wstep, wp, w0, ldw, bias, n0):
    """8 rows x 2 panels: 16 accumulators, 2 weight loads and 8 broadcasts per 16 inner products (the
    panels a 6x4 tile leaves)."""
    useg, vseg, seg4, ustride, vstride = runs
    c0 = (vload(bias, n0), vload(bias, n0 + 16))
    c1 = c2 = c3 = c4 = c5 = c6 = c7 = c0
    a0, a1, a2, a3, a4, a5, a6, a7 = a[m], a[m + 1], a[m + 2], a[m + 3], a[m + 4], a[m + 5], a[m + 6], a[m + 7]
    for u in range(useg):
        for v in range(vseg):
            off = u * ustride + v * vstride
            for t in range(seg4):
                b, i = _panels2(wp, w0, ldw), off + xstep * t
                c0 = _row2(dot, c0, vbroadcast4(x, a0 + i), b)
                c1 = _row2(dot, c1, vbroadcast4(x, a1 + i), b)
                c2 = _row2(dot, c2, vbroadcast4(x, a2 + i), b)
                c3 = _row2(dot, c3, vbroadcast4(x, a3 + i), b)
                c4 = _row2(dot, c4, vbroadcast4(x, a4 + i), b)
                c5 = _row2(dot, c5, vbroadcast4(x, a5 + i), b)
                c6 = _row2(dot, c6, vbroadcast4(x, a6 + i), b)
                c7 = _row2(dot, c7, vbroadcast4(x, a7 + i), b)
                w0 += wstep
    sargs = ready(sargs)
    store(sargs, 0, c0)
    store(sargs, 1, c1)
    store(sargs, 2, c2)
    store(sargs, 3, c3)
    store(sargs, 4, c4)
    store(sargs, 5, c5)
    store(sargs, 6, c6)
    store(sargs, 7, c7)


@njit(cache=True, inline="always")
def tile_4x2(dot, store, sargs, x, a0, lda, k4, xstep, wstep, wp, w0, ldw, bias, n0):
    """4 rows (lda elements apart, from a0) x 2 panels over one run of k4 words: 8 accumulators."""
    c0 = (vload(bias, n0), vload(bias, n0 + 16))
    c1 = c2 = c3 = c0
    for t in range(k4):
        b, i = _panels2(wp, w0 + wstep * t, ldw), a0 + xstep * t
        c0 = _row2(dot, c0, vbroadcast4(x, i), b)
        c1 = _row2(dot, c1, vbroadcast4(x, i + lda), b)
        c2 = _row2(dot, c2, vbroadcast4(x, i + 2 * lda), b)
        c3 = _row2(dot, c3, vbroadcast4(x, i + 3 * lda), b)
    store(sargs, 0, c0)
    store(sargs, 1, c1)
    store(sargs, 2, c2)
    store(sargs, 3, c3)


@njit(cache=True, inline="always")
def tile_1x2(dot, store, sargs, x, a0, k4, xstep, wstep, wp, w0, ldw, bias, n0):
    """1 row x 2 panels: the rows a 4x2 tile leaves."""
    c0 = (vload(bias, n0), vload(bias, n0 + 16))
    for t in range(k4):
        c0 = _row2(dot, c0, vbroadcast4(x, a0 + xstep * t), _panels2(wp, w0 + wstep * t, ldw))
    store(sargs, 0, c0)


@njit(cache=True, inline="always")
def tiles_4x2(dot, x, a0, lda, nrows, k4, xstep, wstep, wp, ldw, bias, s):
    """s[r, n] = bias[n] + the inner products of x's rows r < nrows (lda elements apart, from a0) with every
    panel pair of wp (a panel ldw elements, wstep a word): 4x2 tiles, then 1x2 for the rows left."""
    lds = s.shape[1]
    for n0 in range(0, lds, 32):
        w0 = (n0 // 16) * ldw
        r = 0
        while r + 4 <= nrows:
            tile_4x2(dot, scratch, (s, r, n0, lds), x, a0 + r * lda, lda, k4, xstep, wstep, wp, w0, ldw, bias, n0)
            r += 4
        for rr in range(r, nrows):
            tile_1x2(dot, scratch, (s, rr, n0, lds), x, a0 + rr * lda, k4, xstep, wstep, wp, w0, ldw, bias, n0)
