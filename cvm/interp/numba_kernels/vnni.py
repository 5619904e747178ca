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
A tile is 6 output pixels x 64 output channels in registers (24 of the 32 zmm registers; 4 weight
loads and 6 broadcasts feed 24 vpdpbusd), and 8 pixels x 32 channels for the last two panels when
the panels (channels padded to a multiple of 32 with zero weights) are not a multiple of 4. A block
of BLOCK_ROWS pixels goes to an int32 scratch and the output step (step.out_rows) then
requantizes it into `out` (and applies the fused clamps, lookup tables and residual add). out_rows'
residual requant (OST's rmul..rhi) is only ever non-identity on this file's conv_vnni
(lower_mac.requant_residual; its clamp may be open, where the planner proved it inactive).

geo (int64, see geometry()): kh, kw, sh, sw, dh, dw, groups, cg, og, oh, ow, hp, wp, c, then the
runs of one pixel's K: useg x vseg runs of seg4*4 bytes, ustride and vstride apart.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .step import out_rows
from .kargs import V_C, V_CG, V_GROUPS, V_HP, V_OG, V_OH, V_OW, V_SEG4, V_SH, V_SW, V_USEG, V_USTRIDE, V_VSEG, \
    V_VSTRIDE, V_WP, VGEO, pack
from .tiles import as_is, dot_u8s8, scratch, tile_6x4, tile_8x2

BLOCK_ROWS = 96  # output pixels per block at most (block_size; the unit of work split between threads)


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
        if z == 0:  # an int16 input in 0..255: a plain narrowing, vectorized 32 lanes wide (measured
            for i in range(wc):  # 27.5 -> 22.3 us for 56x56x256); the int32 form measured faster for int8
                dst[i] = np.uint8(src[i])
        else:
            for i in range(wc):
                dst[i] = np.uint8(np.int32(src[i]) + z)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def pixel_bases(p0, count, geo, bases, off):
    """bases[t] = off + the offset in the padded input of output pixel p0 + t's first tap, t < count."""
    sh, sw, oh, ow, hp, wpd, ctot = geo[V_SH], geo[V_SW], geo[V_OH], geo[V_OW], geo[V_HP], geo[V_WP], geo[V_C]
    n, rest = p0 // (oh * ow), p0 % (oh * ow)
    i, j = rest // ow, rest % ow
    for t in range(count):
        bases[t] = ((n * hp + i * sh) * wpd + j * sw) * ctot + off
        j += 1
        if j == ow:
            j, i = 0, i + 1
            if i == oh:
                i, n = 0, n + 1


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def block_size(rows):
    """Output pixels per block: the ceil(rows / BLOCK_ROWS) blocks that threads split (the planner's
    count) made even, a multiple of 6, at most BLOCK_ROWS; every block reads all the weights, so a
    last block of a few rows (49 pixels: 48 + 1) would cost nearly a block's weight traffic."""
    nblk = (rows + BLOCK_ROWS - 1) // BLOCK_ROWS
    return ((rows + nblk - 1) // nblk + 5) // 6 * 6


@njit(cache=True, nogil=True)
def conv_vnni(xp, wp, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Output pixel blocks b0..b1. xp: padded uint8 input (to_padded_u8); wp: (groups, nv*16*kp) int8
    packed; bias: (groups, nv*16) int32 with the -z*sum(w) term folded in; mult, mult2: (groups, og)
    int64; ost, res: the output step (step.out_rows); out: (N*OH*OW, groups*og), rows are output
    pixels (channels-last)."""
    rows = out.shape[0]
    groups, og = geo[V_GROUPS], geo[V_OG]
    lds = bias.shape[1]
    bs = block_size(rows)
    s = np.empty((bs + 8, lds), np.int32)  # whole tiles of 6 and of 8 rows
    a, xf = np.empty(bs + 8, np.int64), xp.reshape(xp.size)
    for blk in range(b0, b1):
        r0 = blk * bs
        nrows = min(bs, rows - r0)
        if nrows <= 0:
            continue
        for g in range(groups):
            group_tiles(xf, wp, bias, geo, g, r0, nrows, a, scratch, as_is, s, (lds,))
            out_rows(s, nrows, out, r0, g * og, mult[g], mult2[g], ost, res)


@njit(cache=True, inline="always")
def group_tiles(xf, wp, bias, geo, g, r0, nrows, a, store, ready, target, rest):
    """Group g's tiles over output pixels r0..r0+nrows-1 (xf: the padded input, flat; a: scratch of nrows + 8
    ints): tiles.py's 6x4 over the panels taken 4 at a time, 8x2 over the two left, if any, each stored by
    `store` (after `ready`) with the arguments (target, the tile's first row, its first channel) + rest."""
    nv = bias.shape[1] // 16
    ldw = wp.shape[1] // nv
    n4 = nv - nv % 4  # panels taken 4 at a time (6x4 tiles); the 2 left, if any, by 8x2 tiles
    runs = (geo[V_USEG], geo[V_VSEG], geo[V_SEG4], geo[V_USTRIDE], geo[V_VSTRIDE])
    pixel_bases(r0, nrows, geo, a, g * geo[V_CG])
    for t in range(nrows, nrows + 8):  # a partial last tile repeats the last pixel
        a[t] = a[nrows - 1]
    wg, bg = wp[g], bias[g]
    for j in range(0, n4, 4):  # 4 weight panels stay in cache for the whole block
        for m in range(0, nrows, 6):
            tile_6x4(dot_u8s8, ready, store, (target, m, 16 * j) + rest, xf, a, m, runs, 4, 64, wg, j * ldw, ldw,
                     bg, 16 * j)
    if n4 < nv:
        for m in range(0, nrows, 8):
            tile_8x2(dot_u8s8, ready, store, (target, m, 16 * n4) + rest, xf, a, m, runs, 4, 64, wg, n4 * ldw, ldw,
                     bg, 16 * n4)


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
