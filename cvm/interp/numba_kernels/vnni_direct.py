"""The VNNI GEMM (vnni.py) with its output step run on the accumulators in registers: each tile
requantizes, clamps and stores its outputs directly (simd_step.step_store), with no int32 scratch
and no second pass (conv.out_rows).

Why: with few input channels (MobileNetV2's 1x1 convs, K = 16-32) a tile's 24 vpdpbusd are as few as
its 24 stores to the scratch, and the output step then reads every accumulator back: measured on
MobileNetV2's 112x112 16 -> 96 conv, the GEMM alone 0.114 ms (a third of the vpdpbusd peak) and the
output step alone 0.129 ms. Only for output steps without a residual or a lookup table (requant and
clamps, or none): y = clip(floor((acc * mult + rnd) / 2^shift), lo, hi), the same int64 expression
out_rows evaluates, so the outputs are the same bits.

Same input (the padded uint8 copy, vnni.to_padded_u8), packed weights, bias and geometry as
vnni.conv_vnni, and the same tiles (6 pixels x 64 channels, 8 x 32 for the last two panels); mult is
padded to the panels (groups, nv * 16) so that a tile reads 16 multipliers at once. A panel across the
last output channel (og not a multiple of 16: MobileNetV2's 24, EfficientNet's 40) is stored with a
masked store (its residual read with a masked load), panels past it not at all, and a partial last
tile repeats its block's last pixel (the same value stored to the same row again).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kargs import HI, HI2, LO, LO2, LUT1, LUT2, RHI, RLO, RMUL, RND, RND2, RRND, RSHIFT, SHIFT, SHIFT2, V_CG, V_GROUPS, \
    V_OG, V_OH, V_OW, V_SEG4, V_USEG, V_USTRIDE, V_VSEG, V_VSTRIDE
from .narrow_mult import narrow
from ...arith import INT32_MAX, INT32_MIN
from .simd import dpbusd, vbroadcast4, vload
from .simd_step import opaque, step_store, step_store_part, step_store_res, step_store_res_part
from .tuning import Tuning
from .vnni import _pixel_bases, block_size


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _tile_6x4(xp, a, m, geo, wp, wbase, ldw, bias, n0, out, rows, c0, og, mult, rnd, shift, lo, hi, res, q):
    """vnni._tile_6x4 for pixels a[m..m+5] (output rows rows[m..m+5]), stored through the output step."""
    useg, vseg, seg4, ustride, vstride = geo[V_USEG], geo[V_VSEG], geo[V_SEG4], geo[V_USTRIDE], geo[V_VSTRIDE]
    ld = out.shape[1]
    a0, a1, a2, a3, a4, a5 = a[m], a[m + 1], a[m + 2], a[m + 3], a[m + 4], a[m + 5]
    c00, c01, c02, c03 = vload(bias, n0), vload(bias, n0 + 16), vload(bias, n0 + 32), vload(bias, n0 + 48)
    c10, c11, c12, c13 = c00, c01, c02, c03
    c20, c21, c22, c23 = c00, c01, c02, c03
    c30, c31, c32, c33 = c00, c01, c02, c03
    c40, c41, c42, c43 = c00, c01, c02, c03
    c50, c51, c52, c53 = c00, c01, c02, c03
    w0 = wbase
    for u in range(useg):
        for v in range(vseg):
            off = u * ustride + v * vstride
            p0, p1, p2, p3, p4, p5 = a0 + off, a1 + off, a2 + off, a3 + off, a4 + off, a5 + off
            for t in range(seg4):
                b0, b1 = vload(wp, w0), vload(wp, w0 + ldw)
                b2, b3 = vload(wp, w0 + 2 * ldw), vload(wp, w0 + 3 * ldw)
                x = vbroadcast4(xp, p0 + 4 * t)
                c00, c01, c02, c03 = dpbusd(c00, x, b0), dpbusd(c01, x, b1), dpbusd(c02, x, b2), dpbusd(c03, x, b3)
                x = vbroadcast4(xp, p1 + 4 * t)
                c10, c11, c12, c13 = dpbusd(c10, x, b0), dpbusd(c11, x, b1), dpbusd(c12, x, b2), dpbusd(c13, x, b3)
                x = vbroadcast4(xp, p2 + 4 * t)
                c20, c21, c22, c23 = dpbusd(c20, x, b0), dpbusd(c21, x, b1), dpbusd(c22, x, b2), dpbusd(c23, x, b3)
                x = vbroadcast4(xp, p3 + 4 * t)
                c30, c31, c32, c33 = dpbusd(c30, x, b0), dpbusd(c31, x, b1), dpbusd(c32, x, b2), dpbusd(c33, x, b3)
                x = vbroadcast4(xp, p4 + 4 * t)
                c40, c41, c42, c43 = dpbusd(c40, x, b0), dpbusd(c41, x, b1), dpbusd(c42, x, b2), dpbusd(c43, x, b3)
                x = vbroadcast4(xp, p5 + 4 * t)
                c50, c51, c52, c53 = dpbusd(c50, x, b0), dpbusd(c51, x, b1), dpbusd(c52, x, b2), dpbusd(c53, x, b3)
                w0 += 64
    at = c0 + n0
    rnd, shift, lo, hi, q = _after_loop(rnd, shift, lo, hi, q)
    _store4(out, rows[m] * ld + at, c00, c01, c02, c03, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store4(out, rows[m + 1] * ld + at, c10, c11, c12, c13, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store4(out, rows[m + 2] * ld + at, c20, c21, c22, c23, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store4(out, rows[m + 3] * ld + at, c30, c31, c32, c33, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store4(out, rows[m + 4] * ld + at, c40, c41, c42, c43, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store4(out, rows[m + 5] * ld + at, c50, c51, c52, c53, mult, n0, og, rnd, shift, lo, hi, res, q)


@njit(cache=True, inline="always")
def _store4(out, o, v0, v1, v2, v3, mult, n0, og, rnd, shift, lo, hi, res, q):
    """One pixel's four 16-channel accumulators through the output step (panels past og are padding, a
    panel across it stored in part: panels padded to 32 channels)."""
    _step(out, o, v0, mult, n0, rnd, shift, lo, hi, res, q, og - n0)
    if n0 + 16 < og:
        _step(out, o + 16, v1, mult, n0 + 16, rnd, shift, lo, hi, res, q, og - n0 - 16)
    if n0 + 32 < og:
        _step(out, o + 32, v2, mult, n0 + 32, rnd, shift, lo, hi, res, q, og - n0 - 32)
    if n0 + 48 < og:
        _step(out, o + 48, v3, mult, n0 + 48, rnd, shift, lo, hi, res, q, og - n0 - 48)


@njit(cache=True, inline="always")
def _store2(out, o, v0, v1, mult, n0, og, rnd, shift, lo, hi, res, q):
    """One pixel's two 16-channel accumulators through the output step (as _store4)."""
    _step(out, o, v0, mult, n0, rnd, shift, lo, hi, res, q, og - n0)
    if n0 + 16 < og:
        _step(out, o + 16, v1, mult, n0 + 16, rnd, shift, lo, hi, res, q, og - n0 - 16)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _tile_8x2(xp, a, m, geo, wp, wbase, ldw, bias, n0, out, rows, c0, og, mult, rnd, shift, lo, hi, res, q):
    """vnni._tile_8x2 for pixels a[m..m+7], stored through the output step."""
    useg, vseg, seg4, ustride, vstride = geo[V_USEG], geo[V_VSEG], geo[V_SEG4], geo[V_USTRIDE], geo[V_VSTRIDE]
    ld = out.shape[1]
    a0, a1, a2, a3, a4, a5, a6, a7 = a[m], a[m + 1], a[m + 2], a[m + 3], a[m + 4], a[m + 5], a[m + 6], a[m + 7]
    c00, c01 = vload(bias, n0), vload(bias, n0 + 16)
    c10, c11, c20, c21, c30, c31 = c00, c01, c00, c01, c00, c01
    c40, c41, c50, c51, c60, c61, c70, c71 = c00, c01, c00, c01, c00, c01, c00, c01
    w0 = wbase
    for u in range(useg):
        for v in range(vseg):
            off = u * ustride + v * vstride
            p0, p1, p2, p3 = a0 + off, a1 + off, a2 + off, a3 + off
            p4, p5, p6, p7 = a4 + off, a5 + off, a6 + off, a7 + off
            for t in range(seg4):
                b0, b1 = vload(wp, w0), vload(wp, w0 + ldw)
                x = vbroadcast4(xp, p0 + 4 * t)
                c00, c01 = dpbusd(c00, x, b0), dpbusd(c01, x, b1)
                x = vbroadcast4(xp, p1 + 4 * t)
                c10, c11 = dpbusd(c10, x, b0), dpbusd(c11, x, b1)
                x = vbroadcast4(xp, p2 + 4 * t)
                c20, c21 = dpbusd(c20, x, b0), dpbusd(c21, x, b1)
                x = vbroadcast4(xp, p3 + 4 * t)
                c30, c31 = dpbusd(c30, x, b0), dpbusd(c31, x, b1)
                x = vbroadcast4(xp, p4 + 4 * t)
                c40, c41 = dpbusd(c40, x, b0), dpbusd(c41, x, b1)
                x = vbroadcast4(xp, p5 + 4 * t)
                c50, c51 = dpbusd(c50, x, b0), dpbusd(c51, x, b1)
                x = vbroadcast4(xp, p6 + 4 * t)
                c60, c61 = dpbusd(c60, x, b0), dpbusd(c61, x, b1)
                x = vbroadcast4(xp, p7 + 4 * t)
                c70, c71 = dpbusd(c70, x, b0), dpbusd(c71, x, b1)
                w0 += 64
    at = c0 + n0
    rnd, shift, lo, hi, q = _after_loop(rnd, shift, lo, hi, q)
    _store2(out, rows[m] * ld + at, c00, c01, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 1] * ld + at, c10, c11, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 2] * ld + at, c20, c21, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 3] * ld + at, c30, c31, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 4] * ld + at, c40, c41, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 5] * ld + at, c50, c51, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 6] * ld + at, c60, c61, mult, n0, og, rnd, shift, lo, hi, res, q)
    _store2(out, rows[m + 7] * ld + at, c70, c71, mult, n0, og, rnd, shift, lo, hi, res, q)


@njit(cache=True, nogil=True)
def conv_vnni_direct(xp, wp, bias, multp, rq, ost, res, out, geo, b0, b1):
    """Output pixel blocks b0..b1 (vnni.block_size pixels each), as vnni.conv_vnni (the same
    arguments but rq) for an output step with no residual or lookup (ost: kargs.OST; its requant and
    clamp are applied; rq and res unused). multp: (groups, nv * 16) int64 multipliers, or int32 where
    every one fits int32 and the shift is at least 32 (simd_step's vpmuldq form), padded with zeros;
    out: (N*OH*OW, groups*og)."""
    _blocks(xp, wp, bias, multp, ost, None, (0, 0, 0, 0, 0, 0, 0, 0), out, geo, b0, b1, None)


@njit(cache=True, nogil=True)
def conv_vnni_direct_padded(xp, wp, bias, multp, opad, ost, res, out, geo, b0, b1):
    """conv_vnni_direct storing into its reader's padded input (pad_fuse): out (N*HP*WP, og) is the
    padded image (N, HP, WP, og) as rows, output pixel (n, i, j) its row (n*HP + i + pt)*WP + j + pl;
    opad int64 (HP, WP, pt, pl). The border is not written (pad_fuse.zero_border)."""
    _blocks(xp, wp, bias, multp, ost, None, (0, 0, 0, 0, 0, 0, 0, 0), out, geo, b0, b1, opad)


@njit(cache=True, nogil=True)
def conv_vnni_direct_res(xp, wp, bias, multp, rq, ost, res, out, geo, b0, b1):
    """conv_vnni_direct with the residual stage of conv.out_rows in int32 lanes (simd_step.step_store_res):
    res shaped like out, rq int64 (rm, rr, rs, m2, r2, s2, lo2, hi2), narrow_mult's triples for the
    residual's requant and the add's (exact on their proven domains; residual_stage)."""
    _blocks(xp, wp, bias, multp, ost, res, (rq[0], rq[1], rq[2], rq[3], rq[4], rq[5], rq[6], rq[7]), out, geo, b0, b1,
            None)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _blocks(xp, wp, bias, multp, ost, res, q, out, geo, b0, b1, opad):
    """The pixel blocks b0..b1 of the entry points (res None: no residual; opad None: out unpadded)."""
    groups, cg, og = geo[V_GROUPS], geo[V_CG], geo[V_OG]
    rows = out.shape[0] if opad is None else out.shape[0] // (opad[0] * opad[1]) * geo[V_OH] * geo[V_OW]
    nv16 = bias.shape[1]
    nv = nv16 // 16
    ldw = wp.shape[1] // nv
    n4 = nv - nv % 4
    bs = block_size(rows)
    bases = np.empty(bs + 8, np.int64)
    a = np.empty(bs + 8, np.int64)
    orow = np.empty(bs + 8, np.int64)
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    xf = xp.reshape(xp.size)
    for blk in range(b0, b1):
        r0 = blk * bs
        nrows = min(bs, rows - r0)
        if nrows <= 0:
            continue
        _pixel_bases(r0, nrows, geo, bases)
        for t in range(nrows + 8):  # a partial last tile repeats the last pixel, stored to its row
            orow[t] = _out_row(r0 + min(t, nrows - 1), geo, opad)
        for t in range(nrows, nrows + 8):
            bases[t] = bases[nrows - 1]
        for g in range(groups):
            wg, bg, mg, off = wp[g], bias[g], multp[g], g * cg
            for t in range(nrows + 8):
                a[t] = bases[t] + off
            for j in range(0, n4, 4):  # 4 weight panels stay in cache for the whole block
                for m in range(0, nrows, 6):
                    _tile_6x4(xf, a, m, geo, wg, j * ldw, ldw, bg, 16 * j, out, orow, g * og, og, mg, rnd, shift, lo, hi,
                              res, q)
            if n4 < nv:
                for m in range(0, nrows, 8):
                    _tile_8x2(xf, a, m, geo, wg, n4 * ldw, ldw, bg, 16 * n4, out, orow, g * og, og, mg, rnd, shift, lo,
                              hi, res, q)


@njit(cache=True, inline="always")
def _out_row(r, geo, opad):
    """The row of `out` output pixel r is stored in (itself unless out is a padded image)."""
    if opad is None:
        return r
    oh, ow = geo[V_OH], geo[V_OW]
    n, rest = r // (oh * ow), r % (oh * ow)
    return (n * opad[0] + rest // ow + opad[2]) * opad[1] + rest % ow + opad[3]


@njit(cache=True, inline="always")
def _step(out, o, v, mult, n0, rnd, shift, lo, hi, res, q, left):
    """One 16-lane output step: with the residual stage where res is an array (compiled out for None); only
    the first `left` lanes where fewer than 16 output channels are left (masked stores and loads)."""
    if res is None:
        if left >= 16:
            step_store(out, o, v, mult, n0, rnd, shift, lo, hi)
        else:
            step_store_part(out, o, v, mult, n0, rnd, shift, lo, hi, left)
    elif left >= 16:
        step_store_res(out, o, v, mult, n0, rnd, shift, lo, hi, res, q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7])
    else:
        step_store_res_part(out, o, v, mult, n0, rnd, shift, lo, hi, res, q[0], q[1], q[2], q[3], q[4], q[5], q[6],
                            q[7], left)


@njit(cache=True, inline="always")
def _after_loop(rnd, shift, lo, hi, q):
    """The output step's scalars, made opaque after a tile's GEMM loop (simd_step.opaque): with the
    residual stage's eight more, their splats hoisted above the loop took registers the 24
    accumulators need (spills in the loop: ResNet-50's residual convs 0.95 -> 0.85x with this)."""
    return (opaque(rnd), opaque(shift), opaque(lo), opaque(hi),
            (opaque(q[0]), opaque(q[1]), opaque(q[2]), opaque(q[3]), opaque(q[4]), opaque(q[5]), opaque(q[6]),
             opaque(q[7])))


def eligible(ost: np.ndarray, pixels: int, gemv_max_rows: int) -> bool:
    """Whether conv_vnni_direct (or, with a residual, conv_vnni_direct_res where residual_stage finds
    its narrowed form) can run a VNNI conv: no lookup table, and more pixels per sample than
    gemv_max_rows (Tuning's: smaller convs keep padded_conv_vnni, which the whole-plan runner gives its
    one-pixel kernel). Any og: a panel across the last output channel is stored in part (masked)."""
    return ost[LUT1] == 0 and ost[LUT2] == 0 and pixels > gemv_max_rows


def residual_stage(ost: np.ndarray, mult2: np.ndarray, res_lo: int, res_hi: int,
                   tuning: Tuning | None = None) -> np.ndarray | None:
    """rq for conv_vnni_direct_res: the residual's requant (OST's rmul, rrnd, rshift; its clip open, or
    never acting on the residual's proven range [res_lo, res_hi]) narrowed on that range, and the add's
    requant (one multiplier for every channel) narrowed on y + r' (y within stage 1's clip [lo, hi], r'
    the requanted residual's range) with its clip [lo2, hi2] after it; None where either has no exact
    int32 form. tuning: the search's bounds (narrow_mult.narrow)."""
    if not (mult2 == mult2.flat[0]).all():
        return None
    rmul, rrnd, rshift = int(ost[RMUL]), int(ost[RRND]), int(ost[RSHIFT])
    ends = [(d * rmul + rrnd) >> rshift for d in (res_lo, res_hi)]  # monotonic in d
    if min(ends) < ost[RLO] or max(ends) > ost[RHI]:  # the residual's clip would act
        return None
    rq = narrow(rmul, rrnd, rshift, res_lo, res_hi, tuning=tuning)
    if rq is None:
        return None
    lo2, hi2 = int(ost[LO2]), int(ost[HI2])
    add = narrow(int(mult2.flat[0]), int(ost[RND2]), int(ost[SHIFT2]), int(ost[LO]) + min(ends),
                 int(ost[HI]) + max(ends), (lo2, hi2), tuning)
    return None if add is None else np.array([*rq, *add, lo2, hi2], np.int64)


def pad_mult(mult: np.ndarray, nv16: int, shift: int = 0) -> np.ndarray:
    """(groups, og) int64 multipliers -> (groups, nv16), zeros past og (a tile reads 16 at a time); as
    int32 where shift >= 32 and every multiplier fits int32 (simd_step's vpmuldq form of the step)."""
    narrow32 = shift >= 32 and int(mult.min(initial=0)) >= INT32_MIN and int(mult.max(initial=0)) <= INT32_MAX
    out = np.zeros((mult.shape[0], nv16), np.int32 if narrow32 else np.int64)
    out[:, :mult.shape[1]] = mult
    return out


NO_RQ = np.zeros(8, np.int64)  # conv_vnni_direct's rq argument (no residual stage)
