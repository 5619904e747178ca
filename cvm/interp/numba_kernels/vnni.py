"""int8 conv/dense on AVX-512 VNNI: vpdpbusd multiplies 4 uint8 by 4 int8 and adds them to an int32 lane.

The input is first stored once as uint8 a + z, padded: (N, H + pads, W + pads, C), borders z (the
uint8 form of 0), where z = 128 for an int8 input and z = 0 for an input proven in 0..255 (an
unsigned activation, stored int16). The planner folds -z * sum_k w[n, k] into the bias, so the lanes
end with the exact sum, and proved bias' + any partial sum of (a + z) * w fits int32
(docs/performance.md).

The GEMM reads that padded input in place (implicit im2col): the K values of an output pixel are
kh runs of kw*C bytes (kh*kw runs of C/groups bytes when dilated or grouped). Runs are read 4 bytes
at a time; a run's length is rounded up to 4 with zero weights, so the bytes read past its end (the
next pixel's, or slack after the buffer) add nothing. Weights per group, flat int8, K in (u, v, c)
order with each run padded: panel j (16 output channels), then k/4, then lane, then 4 k's:
wp[g, ((j * kp/4 + k4) * 16 + lane) * 4 + t] = w[16 j + lane, 4 k4 + t].
A tile is 4 output pixels x 32 output channels in registers (channels padded to a multiple of 32
with zero weights); a block of BLOCK_ROWS pixels goes to an int32 scratch and the output step
(conv.out_rows) then requantizes it into `out` (and applies the fused clamps, lookup tables and
residual add). numba's cache keys a kernel by its own file only: a change to conv.out_rows needs this
file (and every other caller's) touched, or the cached kernel keeps the old output step.

geo (int64, see geometry()): kh, kw, sh, sw, dh, dw, groups, cg, og, oh, ow, hp, wp, c, then the
runs of one pixel's K: useg x vseg runs of seg4*4 bytes, ustride and vstride apart.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import out_rows
from .kargs import V_C, V_CG, V_GROUPS, V_HP, V_OG, V_OH, V_OW, V_SEG4, V_SH, V_SW, V_USEG, V_USTRIDE, V_VSEG, V_VSTRIDE, V_WP, \
    VGEO, pack
from .simd import dpbusd, vbroadcast4, vload, vstore

BLOCK_ROWS = 32  # output pixels per block: the unit of work split between threads


@njit(cache=True, nogil=True)
def to_padded_u8(x, xp, pt, pl, z, r0, r1):
    """xp rows r0..r1 (row = n * HP + y + pt): x + z inside, z in the padding (x + z in 0..255 proven).
    x: (N, H, W*C) int8 (z = 128) or int16 (z = 0); xp: (N, HP, WP*C) uint8; pl: left padding * C."""
    _, h, wc = x.shape
    _, hp, wpc = xp.shape
    for r in range(r0, r1):
        n, y = r // hp, r % hp - pt
        row = xp[n, r % hp]
        if y < 0 or y >= h:
            for i in range(wpc):
                row[i] = z
            continue
        for i in range(pl):
            row[i] = z
        for i in range(pl + wc, wpc):
            row[i] = z
        src, dst = x[n, y], row[pl:pl + wc]
        for i in range(wc):
            dst[i] = np.uint8(np.int32(src[i]) + z)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _tile_4x2(xp, a0, a1, a2, a3, geo, wp, wbase, ldw, bias, n0, s, sbase, lds):
    useg, vseg, seg4, ustride, vstride = geo[V_USEG], geo[V_VSEG], geo[V_SEG4], geo[V_USTRIDE], geo[V_VSTRIDE]
    c00, c01 = vload(bias, n0), vload(bias, n0 + 16)
    c10, c11, c20, c21, c30, c31 = c00, c01, c00, c01, c00, c01
    w0 = wbase
    for u in range(useg):
        for v in range(vseg):
            off = u * ustride + v * vstride
            p0, p1, p2, p3 = a0 + off, a1 + off, a2 + off, a3 + off
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
                w0 += 64
    vstore(s, sbase, c00)
    vstore(s, sbase + 16, c01)
    vstore(s, sbase + lds, c10)
    vstore(s, sbase + lds + 16, c11)
    vstore(s, sbase + 2 * lds, c20)
    vstore(s, sbase + 2 * lds + 16, c21)
    vstore(s, sbase + 3 * lds, c30)
    vstore(s, sbase + 3 * lds + 16, c31)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pixel_bases(p0, count, geo, bases):
    """bases[t] = offset in the padded input of output pixel p0 + t's first tap (group 0)."""
    sh, sw, oh, ow, hp, wpd, ctot = geo[V_SH], geo[V_SW], geo[V_OH], geo[V_OW], geo[V_HP], geo[V_WP], geo[V_C]
    n, rest = p0 // (oh * ow), p0 % (oh * ow)
    i, j = rest // ow, rest % ow
    for t in range(count):
        bases[t] = ((n * hp + i * sh) * wpd + j * sw) * ctot
        j += 1
        if j == ow:
            j, i = 0, i + 1
            if i == oh:
                i, n = 0, n + 1


@njit(cache=True, nogil=True)
def conv_vnni(xp, wp, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Output pixel blocks b0..b1. xp: padded uint8 input (to_padded_u8); wp: (groups, nv*16*kp) int8
    packed; bias: (groups, nv*16) int32 with the -z*sum(w) term folded in; mult, mult2: (groups, og)
    int64; ost, res: the output step (conv.out_rows); out: (N*OH*OW, groups*og), rows are output
    pixels (channels-last)."""
    rows = out.shape[0]
    groups, cg, og = geo[V_GROUPS], geo[V_CG], geo[V_OG]
    lds = bias.shape[1]
    nv = lds // 16
    ldw = wp.shape[1] // nv
    s = np.empty((BLOCK_ROWS, lds), np.int32)
    bases = np.empty(BLOCK_ROWS + 3, np.int64)
    xf = xp.reshape(xp.size)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        _pixel_bases(r0, nrows, geo, bases)
        for t in range(nrows, nrows + 3):  # a partial last tile repeats the last pixel
            bases[t] = bases[nrows - 1]
        for g in range(groups):
            wg, bg, off = wp[g], bias[g], g * cg
            for j in range(0, nv, 2):  # a pair of weight panels stays in cache for the whole block
                for m in range(0, nrows, 4):
                    _tile_4x2(xf, bases[m] + off, bases[m + 1] + off, bases[m + 2] + off, bases[m + 3] + off, geo,
                              wg, j * ldw, ldw, bg, 16 * j, s, m * lds + 16 * j, lds)
            out_rows(s, nrows, out, r0, g * og, mult[g], mult2[g], ost, res)


@njit(cache=True, nogil=True)
def padded_conv_vnni(x, xp3, pt, pl, z, r0, r1, xp, wp, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """to_padded_u8 then conv_vnni in one call, where neither is split between threads: a small
    dense layer (a recurrent cell's) pays one call's dispatch instead of two."""
    to_padded_u8(x, xp3, pt, pl, z, r0, r1)
    conv_vnni(xp, wp, bias, mult, mult2, ost, res, out, geo, b0, b1)


def panels(og: int) -> int:
    """16-channel weight panels for og output channels: an even number (tiles hold two)."""
    return (og + 31) // 32 * 2


def pack_weights(w: np.ndarray, geo: np.ndarray) -> np.ndarray:
    """w: (groups, og, kh, kw, cg) int -> (groups, nv*16*kp) int8 in the panel layout above."""
    g, og = w.shape[:2]
    useg, vseg, seg4 = (int(geo[i]) for i in (V_USEG, V_VSEG, V_SEG4))
    runs = w.reshape(g, og, useg, vseg, -1)
    nv = panels(og)
    full = np.zeros((g, nv * 16, useg, vseg, 4 * seg4), np.int8)
    full[:, :og, :, :, :runs.shape[4]] = runs
    kp = useg * vseg * 4 * seg4
    return np.ascontiguousarray(full.reshape(g, nv, 16, kp // 4, 4).transpose(0, 1, 3, 2, 4)).reshape(g, -1)


def runs(kh, kw, dw, groups, cg) -> tuple[int, int, int]:
    """(useg, vseg, run): one pixel's K read as useg x vseg runs of `run` bytes."""
    if dw == 1 and groups == 1:  # the kw taps of a kernel row are one contiguous run
        return kh, 1, kw * cg
    return kh, kw, cg


def packed_weight_bytes(groups, og, kh, kw, dw, cg) -> int:
    """Size of pack_weights' result: runs rounded up to 4 bytes, channels to panels(og) * 16."""
    useg, vseg, run = runs(kh, kw, dw, groups, cg)
    return groups * panels(og) * 16 * useg * vseg * ((run + 3) // 4 * 4)


def geometry(kh, kw, sh, sw, dh, dw, groups, cg, og, oh, ow, hp, wp) -> np.ndarray:
    c = groups * cg
    useg, vseg, run = runs(kh, kw, dw, groups, cg)
    return pack(VGEO, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, groups=groups, cg=cg, og=og, oh=oh, ow=ow,
                hp=hp, wp=wp, c=c, useg=useg, vseg=vseg, seg4=(run + 3) // 4, ustride=dh * wp * c, vstride=dw * c)


SLACK = 4  # bytes after the padded input: a run's last 4-byte read may pass its end
