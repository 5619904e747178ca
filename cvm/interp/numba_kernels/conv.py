"""Portable multiply-accumulate kernels: conv2d (and dense as a 1x1 conv) on channels-last input.

A conv is an integer GEMM over row blocks: a block of output pixels is packed (im2col, K ordered
(u, v, c)) into a per-thread buffer of at most BLOCK_ROWS x k (never more rows than the output has,
so it is bounded by the MACs the node pays for), multiplied by the prepacked weight rows, and the output
step applies bias, requantization and the folded relu/clip before storing. Parallel runs split the
output rows (never the summed axis) into chunks.

geo: kargs.GEO (kh, kw, sh, sw, dh, dw, pt, pl, groups, cg, og, k, oh, ow; k = kh*kw*cg the summed
length); ost: kargs.OST
The output step (step.out_rows) is plan.OutputStep: requant, relu/clip, and a residual add with its own
requant and relu/clip, when the planner fused them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kargs import CG, DH, DW, GROUPS, K, KH, KW, OG, OH, OW, PL, PT, SH, SW
from .step import out_rows

BLOCK_ROWS = 64  # output pixels packed at a time (the packed block stays in L1/L2)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def pack_rows(x, geo, g, r0, nrows, buf, offset):
    """buf[r, (u*kw + v)*cg + c] = x[n, y, z, g*cg + c] + offset for output pixel r0 + r; taps in the
    padding, columns past k and rows past nrows hold `offset` (the packed form of 0)."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    cg, k = geo[CG], geo[K]
    _, h, w, _ = x.shape
    oh, ow = geo[OH], geo[OW]
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
def _gemm_i32(a, nrows, w, bias, s):
    """s[m, n] = bias[n] + sum_k a[m, k] * w[n, k] in int32 (the planner proved every partial sum,
    in any order, fits int32)."""
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
            s[m, n], s[m, n + 1], s[m + 1, n], s[m + 1, n + 1] = c00, c01, c10, c11
        if n_out % 2:
            n = n_out - 1
            s[m, n] = _dot_i32(a0, w[n], bias[n])
            s[m + 1, n] = _dot_i32(a1, w[n], bias[n])
    if nrows % 2:
        m = nrows - 1
        for n in range(n_out):
            s[m, n] = _dot_i32(a[m], w[n], bias[n])


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _dot_i32(a, w, acc0):
    acc = np.int32(acc0)
    for t in range(a.shape[0]):
        acc = np.int32(acc + np.int32(a[t]) * np.int32(w[t]))
    return acc


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def tap_range(o, stride, dilation, pad, size, taps):
    """[lo, hi): the taps t of a kernel of `taps` taps that output index o reads inside the input,
    0 <= o*stride + t*dilation - pad < size; (0, 0) when every tap is in the padding."""
    first = o * stride - pad  # input index of tap 0
    top = size - 1 - first  # t * dilation <= top
    if top < 0:
        return 0, 0
    lo = (-first + dilation - 1) // dilation if first < 0 else 0
    hi = min(taps, top // dilation + 1)
    return (lo, hi) if lo < hi else (0, 0)


@njit(cache=True)
def block_taps(geo, h, w, r0, nrows):
    """(ua, ub, va, vb): the smallest box of kernel taps (rows ua..ub-1, columns va..vb-1) holding
    every tap that output pixels r0..r0+nrows-1 read inside the input; (0, 0, 0, 0) when they read
    none. Taps outside it read only padding (zeros), so the GEMM may skip them."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    oh, ow = geo[OH], geo[OW]
    ua, ub, va, vb = kh, 0, kw, 0
    rest = r0 % (oh * ow)
    i, j = rest // ow, rest % ow
    for _ in range(nrows):  # pixels in order, no division per pixel; stops once the box is the kernel
        ulo, uhi = tap_range(i, sh, dh, pt, h, kh)
        vlo, vhi = tap_range(j, sw, dw, pl, w, kw)
        if ulo < uhi and vlo < vhi:
            ua, ub, va, vb = min(ua, ulo), max(ub, uhi), min(va, vlo), max(vb, vhi)
            if ua == 0 and ub == kh and va == 0 and vb == kw:
                break
        j += 1
        if j == ow:
            j, i = 0, i + 1
            if i == oh:
                i = 0
    if ub <= ua:
        return 0, 0, 0, 0
    return ua, ub, va, vb


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def pack_taps(x, geo, g, r0, nrows, buf, wg, wbuf, ua, ub, va, vb):
    """pack_rows (offset 0) and the weight rows wg restricted to the taps u in ua..ub-1, v in
    va..vb-1: buf[r, ((u-ua)*(vb-va) + v-va)*cg + c] and wbuf[o, same column] = wg[o, (u*kw + v)*cg + c].
    The weight copy is og x (box taps) x cg, no more than the multiply-accumulates of the block's
    in-image taps (each tap of the box is read inside the input by some pixel of the block)."""
    kw, sh, sw, dh, dw, pt, pl = geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    cg = geo[CG]
    _, h, w, _ = x.shape
    oh, ow = geo[OH], geo[OW]
    c0, run = g * cg, (vb - va) * cg
    for o in range(wg.shape[0]):
        for u in range(ua, ub):
            src, dst = (u * kw + va) * cg, (u - ua) * run
            for t in range(run):
                wbuf[o, dst + t] = wg[o, src + t]
    for r in range(nrows):
        p = r0 + r
        n, rest = p // (oh * ow), p % (oh * ow)
        i, j = rest // ow, rest % ow
        col = 0
        for u in range(ua, ub):
            y = i * sh + u * dh - pt
            for v in range(va, vb):
                z = j * sw + v * dw - pl
                if y < 0 or y >= h or z < 0 or z >= w:
                    for c in range(cg):
                        buf[r, col + c] = 0
                else:
                    for c in range(cg):
                        buf[r, col + c] = x[n, y, z, c0 + c]
                col += cg


@njit(cache=True, nogil=True)
def conv_i32(x, w, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Output row blocks b0..b1 (of BLOCK_ROWS pixels). x: (N, H, W, C) int8/16/32; w: (groups, og, k)
    int16/int32 rows; bias int32, mult and mult2 int64: (groups, og); out: (N*OH*OW, groups*og), rows
    are output pixels (channels-last).
    A block whose pixels read only some of the kernel's taps inside the input (a kernel larger than
    the image, far pads) multiplies only the box of those taps (block_taps): the portable path's time
    then follows the taps that touch the input, as the reference's does, not the padded zeros, so
    that gas schedule v2, calibrated on this path, is not set by multiplications of padding."""
    rows = out.shape[0]
    groups, og = geo[GROUPS], geo[OG]
    kh, kw = geo[KH], geo[KW]
    _, h, wd, _ = x.shape
    block = min(BLOCK_ROWS, rows)  # no more rows than there are outputs: k may be 2^24 (a 2^24-tap kernel)
    buf = np.empty((block, w.shape[2]), w.dtype)
    s = np.empty((block, og), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        ua, ub, va, vb = block_taps(geo, h, wd, r0, nrows)
        full = ua == 0 and ub == kh and va == 0 and vb == kw
        for g in range(groups):
            if full:
                pack_rows(x, geo, g, r0, nrows, buf, 0)
                _gemm_i32(buf, nrows, w[g], bias[g], s)
            else:
                kp = (ub - ua) * (vb - va) * geo[CG]
                wbuf = np.empty((og, kp), w.dtype)
                pack_taps(x, geo, g, r0, nrows, buf, w[g], wbuf, ua, ub, va, vb)
                _gemm_i32(buf[:, :kp], nrows, wbuf, bias[g], s)
            out_rows(s, nrows, out, r0, g * og, mult[g], mult2[g], ost, res)


@njit(cache=True, nogil=True)
def conv_i64(x, w, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Direct convolution with int64 accumulation: the fallback when int32 is not proven safe.
    w: (groups, og, kh, kw, cg) int64; bias, mult, mult2: (groups, og) int64; out as in conv_i32."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    groups, cg, og = geo[GROUPS], geo[CG], geo[OG]
    oh, ow = geo[OH], geo[OW]
    _, h, wd, _ = x.shape
    s = np.empty((1, og), np.int64)
    for p in range(b0 * BLOCK_ROWS, min(b1 * BLOCK_ROWS, out.shape[0])):
        n, rest = p // (oh * ow), p % (oh * ow)
        i, j = rest // ow, rest % ow
        ulo, uhi = tap_range(i, sh, dh, pt, h, kh)  # the taps inside the input
        vlo, vhi = tap_range(j, sw, dw, pl, wd, kw)
        for g in range(groups):
            for o in range(og):
                acc = bias[g, o]
                for u in range(ulo, uhi):
                    xr, wr = x[n, i * sh + u * dh - pt], w[g, o, u]
                    for v in range(vlo, vhi):
                        xp, wv = xr[j * sw + v * dw - pl, g * cg:], wr[v]
                        for c in range(cg):
                            acc += np.int64(xp[c]) * wv[c]
                s[0, o] = acc
            out_rows(s, 1, out, p, g * og, mult[g], mult2[g], ost, res)


@njit(cache=True, nogil=True)
def conv_depthwise(x, w, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Depthwise conv (groups = channels, one output per group), vectorized over channels, int32
    accumulation (proven as for conv_i32). x: (N, H, W, C); w: (kh, kw, C) int32; bias: (C,) int32;
    mult, mult2: (1, C) int64; out: (N*OH*OW, C); output row blocks b0..b1."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    oh, ow = geo[OH], geo[OW]
    _, h, wd, c = x.shape
    s = np.empty((min(BLOCK_ROWS, out.shape[0]), c), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, out.shape[0] - r0)
        for r in range(nrows):
            p = r0 + r
            n, rest = p // (oh * ow), p % (oh * ow)
            i, j = rest // ow, rest % ow
            acc = s[r]
            for ch in range(c):
                acc[ch] = bias[ch]
            for u in range(kh):  # (bounds tested per tap: two tap_range calls a pixel cost ppocr_cls's 8
                y = i * sh + u * dh - pt  # depthwise convs 2.06 -> 2.62 ms at batch 8)
                if y < 0 or y >= h:
                    continue
                for v in range(kw):
                    z = j * sw + v * dw - pl
                    if z < 0 or z >= wd:
                        continue
                    xr, wr = x[n, y, z], w[u, v]
                    for ch in range(c):
                        acc[ch] = np.int32(acc[ch] + np.int32(xr[ch]) * wr[ch])
        out_rows(s, nrows, out, r0, np.int64(0), mult[0], mult2[0], ost, res)


@njit(cache=True, nogil=True)
def conv_depthwise_rows(x, wt, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Depthwise conv at horizontal stride 1, by output image rows b0..b1 (row = n * OH + i, OW
    pixels each). wt: (kh, kw, OW*C) int32, each tap's C weights repeated OW times, so that one tap
    over a row is a single long multiply-add of two contiguous runs (the input columns inside the
    image, found once per tap): vectorized loops instead of one C-long loop per pixel and tap.
    int32 accumulation (proven as for conv_i32). x: (N, H, W, C); bias: (OW*C,) int32 (repeated
    likewise); mult, mult2: (1, C) int64; out: (N*OH*OW, C)."""
    kh, kw, sh, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[DH], geo[DW], geo[PT], geo[PL]
    oh, ow = geo[OH], geo[OW]
    _, h, wd, c = x.shape
    acc = np.empty((ow, c), np.int32)
    af = acc.reshape(ow * c)
    for row in range(b0, b1):
        n, i = row // oh, row % oh
        for t in range(ow * c):
            af[t] = bias[t]
        for u in range(kh):
            y = i * sh + u * dh - pt
            if y < 0 or y >= h:
                continue
            xf = x[n, y].reshape(wd * c)
            for v in range(kw):
                off = v * dw - pl  # input column of output column j: j + off
                jlo, jhi = max(0, -off), min(ow, wd - off)
                if jlo >= jhi:
                    continue
                a0, x0, m = jlo * c, (jlo + off) * c, (jhi - jlo) * c
                ar, xr, wr = af[a0:a0 + m], xf[x0:x0 + m], wt[u, v, a0:a0 + m]  # indexed by the loop
                for t in range(m):  # counter only, so that LLVM vectorizes
                    ar[t] = np.int32(ar[t] + np.int32(xr[t]) * wr[t])
        out_rows(acc, ow, out, row * ow, np.int64(0), mult[0], mult2[0], ost, res)
