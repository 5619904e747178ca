"""Kernels of the opset-2 vision ops: resize2d (channels-last and planar) and conv_transpose2d
(channels-last, direct: each output pixel sums only the (input, tap) pairs that land on it, listed per
axis at plan time, so the work is the MACs the op pays for, never a zero-stuffed input).

Every kernel takes the range [r0, r1) of output rows it computes (threads.Pool splits them)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .step import out_rows


@njit(cache=True, nogil=True)
def resize_nhwc(x, out, hmap, wmap, shift, linear, r0, r1):
    """x: (N, H, W, C); out: (N, OH, OW, C); hmap, wmap: (4, OH) and (4, OW) int64 rows i0, i1, w0, w1
    (cvm.ops.vision.axis_map). Rows r = n*OH + i."""
    oh, ow, c = out.shape[1], out.shape[2], out.shape[3]
    rnd = (np.int64(1) << shift) >> 1
    for r in range(r0, r1):
        n, i = r // oh, r % oh
        a0, a1, p0, p1 = hmap[0, i], hmap[1, i], hmap[2, i], hmap[3, i]
        for j in range(ow):
            b0 = wmap[0, j]
            if not linear:
                for ch in range(c):
                    out[n, i, j, ch] = x[n, a0, b0, ch]
                continue
            b1, q0, q1 = wmap[1, j], wmap[2, j], wmap[3, j]
            for ch in range(c):
                top = q0 * np.int64(x[n, a0, b0, ch]) + q1 * np.int64(x[n, a0, b1, ch])
                bot = q0 * np.int64(x[n, a1, b0, ch]) + q1 * np.int64(x[n, a1, b1, ch])
                out[n, i, j, ch] = (p0 * top + p1 * bot + rnd) >> shift


@njit(cache=True, nogil=True)
def resize_planar(x, out, hmap, wmap, shift, linear, r0, r1):
    """x: (N*C, H, W); out: (N*C, OH, OW); maps as in resize_nhwc. Rows r = plane*OH + i."""
    oh, ow = out.shape[1], out.shape[2]
    rnd = (np.int64(1) << shift) >> 1
    for r in range(r0, r1):
        pl, i = r // oh, r % oh
        a0, a1, p0, p1 = hmap[0, i], hmap[1, i], hmap[2, i], hmap[3, i]
        src0, src1, dst = x[pl, a0], x[pl, a1], out[pl, i]
        if not linear:
            for j in range(ow):
                dst[j] = src0[wmap[0, j]]
            continue
        for j in range(ow):
            b0, b1, q0, q1 = wmap[0, j], wmap[1, j], wmap[2, j], wmap[3, j]
            top = q0 * np.int64(src0[b0]) + q1 * np.int64(src0[b1])
            bot = q0 * np.int64(src1[b0]) + q1 * np.int64(src1[b1])
            dst[j] = (p0 * top + p1 * bot + rnd) >> shift


@njit(cache=True, nogil=True)
def conv_transpose_nhwc(x, w, bias, mult, mult2, ost, res, out, hptr, hpair, wptr, wpair, oh, ow, r0, r1):
    """x: (N, H, W, C); w: (KH, KW, groups, cg, og) int64; bias, mult, mult2: (groups, og) int64;
    out: (N*OH*OW, groups*og) channels-last rows; hptr (OH+1) / hpair (pairs, 2): for output row p,
    the (tap u, input i) pairs hpair[hptr[p]:hptr[p+1]] that land on it (wptr / wpair: columns).
    Output rows r0..r1 are (n, p) = divmod(row, OH). Accumulates in int64 (exact in any order), then
    the fused output step (step.out_rows)."""
    groups, cg, og = w.shape[2], w.shape[3], w.shape[4]
    acc = np.empty((1, og), np.int64)
    for r in range(r0, r1):
        n, p = r // oh, r % oh
        for q in range(ow):
            pix = r * ow + q
            for g in range(groups):
                for o in range(og):
                    acc[0, o] = bias[g, o]
                for a in range(hptr[p], hptr[p + 1]):
                    u, i = hpair[a, 0], hpair[a, 1]
                    for b in range(wptr[q], wptr[q + 1]):
                        v, j = wpair[b, 0], wpair[b, 1]
                        xrow, wtap = x[n, i, j], w[u, v, g]
                        for c in range(cg):
                            xv = np.int64(xrow[g * cg + c])
                            wrow = wtap[c]
                            for o in range(og):
                                acc[0, o] += xv * wrow[o]
                out_rows(acc, 1, out, pix, g * og, mult[g], mult2[g], ost, res)
