"""Portable multiply-accumulate kernels: conv2d (and dense as a 1x1 conv) on channels-last input.

A conv is an integer GEMM over row blocks: a block of output pixels is packed (im2col, K ordered
(u, v, c)) into a small per-thread buffer, multiplied by the prepacked weight rows, and the output
step applies bias, requantization and the folded relu/clip before storing. Parallel runs split the
output rows (never the summed axis) into chunks.

geo (int64): kh, kw, sh, sw, dh, dw, pt, pl, groups, cg, og, k, oh, ow  (k = kh*kw*cg is the summed length)
Output step: y = clip(floor((acc*mult[n] + rnd) / 2^shift), lo, hi) (mult 1, shift 0 when unfused).
"""
from __future__ import annotations

import numpy as np
from numba import njit

BLOCK_ROWS = 64  # output pixels packed at a time (the packed block stays in L1/L2)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def pack_rows(x, geo, g, r0, nrows, buf, offset):
    """buf[r, (u*kw + v)*cg + c] = x[n, y, z, g*cg + c] + offset for output pixel r0 + r; taps in the
    padding, columns past k and rows past nrows hold `offset` (the packed form of 0)."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    cg, k = geo[9], geo[11]
    _, h, w, _ = x.shape
    oh, ow = geo[12], geo[13]
    c0 = g * cg
    for r in range(buf.shape[0]):
        if r >= nrows:
            for c in range(buf.shape[1]):
                buf[r, c] = offset
            continue
        p = r0 + r
        n, rest = p // (oh * ow), p % (oh * ow)
        i, j = rest // ow, rest % ow
        col = 0
        for u in range(kh):
            y = i * sh + u * dh - pt
            for v in range(kw):
                z = j * sw + v * dw - pl
                if y < 0 or y >= h or z < 0 or z >= w:
                    for c in range(cg):
                        buf[r, col + c] = offset
                else:
                    for c in range(cg):
                        buf[r, col + c] = x[n, y, z, c0 + c] + offset
                col += cg
        for c in range(k, buf.shape[1]):
            buf[r, c] = offset


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def out_step(acc, mult, rnd, shift, lo, hi):
    v = (np.int64(acc) * mult + rnd) >> shift
    return min(max(v, lo), hi)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _gemm_i32(a, nrows, w, bias, mult, rnd, shift, lo, hi, out, row0, col0):
    """out[row0 + m, col0 + n] = out_step(bias[n] + sum_k a[m, k] * w[n, k]) in int32 (the planner
    proved every partial sum, in any order, fits int32)."""
    n_out, kp = w.shape
    for m in range(0, nrows - 1, 2):
        a0, a1 = a[m], a[m + 1]
        for n in range(0, n_out - 1, 2):
            w0, w1 = w[n], w[n + 1]
            c00, c01 = np.int32(bias[n]), np.int32(bias[n + 1])
            c10, c11 = c00, c01
            for t in range(kp):
                x0, x1, y0, y1 = np.int32(a0[t]), np.int32(a1[t]), np.int32(w0[t]), np.int32(w1[t])
                c00 = np.int32(c00 + x0 * y0)
                c01 = np.int32(c01 + x0 * y1)
                c10 = np.int32(c10 + x1 * y0)
                c11 = np.int32(c11 + x1 * y1)
            out[row0 + m, col0 + n] = out_step(c00, mult[n], rnd, shift, lo, hi)
            out[row0 + m, col0 + n + 1] = out_step(c01, mult[n + 1], rnd, shift, lo, hi)
            out[row0 + m + 1, col0 + n] = out_step(c10, mult[n], rnd, shift, lo, hi)
            out[row0 + m + 1, col0 + n + 1] = out_step(c11, mult[n + 1], rnd, shift, lo, hi)
        if n_out % 2:
            n = n_out - 1
            out[row0 + m, col0 + n] = out_step(_dot_i32(a0, w[n], bias[n]), mult[n], rnd, shift, lo, hi)
            out[row0 + m + 1, col0 + n] = out_step(_dot_i32(a1, w[n], bias[n]), mult[n], rnd, shift, lo, hi)
    if nrows % 2:
        m = nrows - 1
        for n in range(n_out):
            out[row0 + m, col0 + n] = out_step(_dot_i32(a[m], w[n], bias[n]), mult[n], rnd, shift, lo, hi)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _dot_i32(a, w, acc0):
    acc = np.int32(acc0)
    for t in range(a.shape[0]):
        acc = np.int32(acc + np.int32(a[t]) * np.int32(w[t]))
    return acc


@njit(cache=True, nogil=True)
def conv_i32(x, w, bias, mult, rnd, shift, lo, hi, out, geo, b0, b1):
    """Output row blocks b0..b1 (of BLOCK_ROWS pixels). x: (N, H, W, C) int8/16/32; w: (groups, og, k)
    int16/int32 rows; bias int32 and mult int64: (groups, og); out: (N*OH*OW, groups*og), rows are
    output pixels (channels-last)."""
    rows = out.shape[0]
    groups, og = geo[8], geo[10]
    buf = np.empty((BLOCK_ROWS, w.shape[2]), w.dtype)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        for g in range(groups):
            pack_rows(x, geo, g, r0, nrows, buf, 0)
            _gemm_i32(buf, nrows, w[g], bias[g], mult[g], rnd, shift, lo, hi, out, r0, g * og)


@njit(cache=True, nogil=True)
def conv_i64(x, w, bias, mult, rnd, shift, lo, hi, out, geo, b0, b1):
    """Direct convolution with int64 accumulation: the fallback when int32 is not proven safe.
    w: (groups, og, kh, kw, cg) int64; bias, mult: (groups, og) int64; out as in conv_i32."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    groups, cg, og = geo[8], geo[9], geo[10]
    oh, ow = geo[12], geo[13]
    _, h, wd, _ = x.shape
    for p in range(b0 * BLOCK_ROWS, min(b1 * BLOCK_ROWS, out.shape[0])):
        n, rest = p // (oh * ow), p % (oh * ow)
        i, j = rest // ow, rest % ow
        for g in range(groups):
            for o in range(og):
                acc = bias[g, o]
                for u in range(kh):
                    y = i * sh + u * dh - pt
                    if y < 0 or y >= h:
                        continue
                    for v in range(kw):
                        z = j * sw + v * dw - pl
                        if z < 0 or z >= wd:
                            continue
                        for c in range(cg):
                            acc += np.int64(x[n, y, z, g * cg + c]) * w[g, o, u, v, c]
                out[p, g * og + o] = out_step(acc, mult[g, o], rnd, shift, lo, hi)
