"""int8 conv/dense on AVX-512 VNNI: vpdpbusd multiplies 4 uint8 by 4 int8 and adds them to an int32 lane.

Activations are int8; packing adds 128 (the uint8 form, taps in the padding become 128 = 0 + 128)
and the planner folds -128 * sum_k w[n, k] into the bias, so the lanes end with the exact sum. The
planner also proved bias' + any partial sum of (a + 128) * w fits int32 (docs/performance.md).

Weights per group, flat int8: panel j (16 output channels), then k/4, then lane, then 4 k's:
wp[g, ((j * kp/4 + k4) * 16 + lane) * 4 + t] = w[16 j + lane, 4 k4 + t].
A row block of packed pixels is multiplied panel by panel in chunks of K (so the weight panel stays in
L1), accumulating in an int32 scratch that starts as the bias; the output step then requantizes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import BLOCK_ROWS, out_step, pack_rows
from .simd import dpbusd, vbroadcast4, vload, vstore

K4_CHUNK = 64  # 256 values of K per pass: a 2-panel weight chunk is 32 KiB


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _tile_4x2(a, abase, lda, k4a, k4b, wp, wbase, ldw, s, sbase, lds):
    c00, c01 = vload(s, sbase), vload(s, sbase + 16)
    c10, c11 = vload(s, sbase + lds), vload(s, sbase + lds + 16)
    c20, c21 = vload(s, sbase + 2 * lds), vload(s, sbase + 2 * lds + 16)
    c30, c31 = vload(s, sbase + 3 * lds), vload(s, sbase + 3 * lds + 16)
    for k4 in range(k4a, k4b):
        b0, b1 = vload(wp, wbase + 64 * k4), vload(wp, wbase + ldw + 64 * k4)
        a0 = vbroadcast4(a, abase + 4 * k4)
        c00, c01 = dpbusd(c00, a0, b0), dpbusd(c01, a0, b1)
        a1 = vbroadcast4(a, abase + lda + 4 * k4)
        c10, c11 = dpbusd(c10, a1, b0), dpbusd(c11, a1, b1)
        a2 = vbroadcast4(a, abase + 2 * lda + 4 * k4)
        c20, c21 = dpbusd(c20, a2, b0), dpbusd(c21, a2, b1)
        a3 = vbroadcast4(a, abase + 3 * lda + 4 * k4)
        c30, c31 = dpbusd(c30, a3, b0), dpbusd(c31, a3, b1)
    vstore(s, sbase, c00)
    vstore(s, sbase + 16, c01)
    vstore(s, sbase + lds, c10)
    vstore(s, sbase + lds + 16, c11)
    vstore(s, sbase + 2 * lds, c20)
    vstore(s, sbase + 2 * lds + 16, c21)
    vstore(s, sbase + 3 * lds, c30)
    vstore(s, sbase + 3 * lds + 16, c31)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _tile_4x1(a, abase, lda, k4a, k4b, wp, wbase, s, sbase, lds):
    c0, c1 = vload(s, sbase), vload(s, sbase + lds)
    c2, c3 = vload(s, sbase + 2 * lds), vload(s, sbase + 3 * lds)
    for k4 in range(k4a, k4b):
        b0 = vload(wp, wbase + 64 * k4)
        c0 = dpbusd(c0, vbroadcast4(a, abase + 4 * k4), b0)
        c1 = dpbusd(c1, vbroadcast4(a, abase + lda + 4 * k4), b0)
        c2 = dpbusd(c2, vbroadcast4(a, abase + 2 * lda + 4 * k4), b0)
        c3 = dpbusd(c3, vbroadcast4(a, abase + 3 * lda + 4 * k4), b0)
    vstore(s, sbase, c0)
    vstore(s, sbase + lds, c1)
    vstore(s, sbase + 2 * lds, c2)
    vstore(s, sbase + 3 * lds, c3)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _gemm_block(buf, mt, wp, s):
    """s[:mt] += buf[:mt] (uint8, mt x kp) times the packed weights (all panels)."""
    kp = buf.shape[1]
    lds = s.shape[1]
    nv = lds // 16
    ldw = 16 * kp
    for k4a in range(0, kp // 4, K4_CHUNK):
        k4b = min(k4a + K4_CHUNK, kp // 4)
        for j in range(0, nv - 1, 2):
            for m in range(0, mt, 4):
                _tile_4x2(buf, m * kp, kp, k4a, k4b, wp, j * ldw, ldw, s, m * lds + 16 * j, lds)
        if nv % 2:
            j = nv - 1
            for m in range(0, mt, 4):
                _tile_4x1(buf, m * kp, kp, k4a, k4b, wp, j * ldw, s, m * lds + 16 * j, lds)


@njit(cache=True, nogil=True)
def conv_vnni(x, wp, bias, mult, rnd, shift, lo, hi, out, geo, b0, b1):
    """Output row blocks b0..b1 (of BLOCK_ROWS pixels). x: (N, H, W, C) int8; wp: (groups, nv*16*kp)
    int8 packed; bias: (groups, nv*16) int32 with the -128*sum(w) term folded in; mult: (groups, og)
    int64; out: (N*OH*OW, groups*og), rows are output pixels (channels-last)."""
    rows = out.shape[0]
    groups, og = geo[8], geo[10]
    kp = wp.shape[1] // bias.shape[1]
    buf = np.empty((BLOCK_ROWS, kp), np.uint8)
    s = np.empty((BLOCK_ROWS, bias.shape[1]), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        mt = (nrows + 3) // 4 * 4
        for g in range(groups):
            pack_rows(x, geo, g, r0, nrows, buf, 128)
            for r in range(mt):
                for n in range(s.shape[1]):
                    s[r, n] = bias[g, n]
            _gemm_block(buf, mt, wp[g], s)
            for r in range(nrows):
                for n in range(og):
                    out[r0 + r, g * og + n] = out_step(s[r, n], mult[g, n], rnd, shift, lo, hi)


def pack_weights(w: np.ndarray, kp: int) -> np.ndarray:
    """w: (groups, og, k) int -> (groups, nv*16*kp) int8 in the panel layout above."""
    g, og, k = w.shape
    nv = (og + 15) // 16
    full = np.zeros((g, nv * 16, kp), np.int8)
    full[:, :og, :k] = w
    return np.ascontiguousarray(full.reshape(g, nv, 16, kp // 4, 4).transpose(0, 1, 3, 2, 4)).reshape(g, -1)
