"""Depthwise conv on AVX-512 VNNI: four taps of a kernel row per vpdpbusd, 16 channels per vector,
4 output pixels per tile, the accumulators in registers across every tap.

vpdpbusd adds the 4 products of 4 uint8 by 4 int8 in each int32 lane: a lane is a channel, its 4
bytes four taps (4k..4k+3, v) of one kernel column. The input is first stored once as uint8 with its
padding (the VNNI path's vnni.to_padded_u8: x + z inside, z in the padding), then, for each output
row, the kh input rows it reads are interleaved into tap quads (kh/4 rows of the padded width, in
L1/L2; each quad is read by kw output pixels at stride 1):

    q[k, z, ch] = bytes t = 0..3: xp[n, i*sh + (4k + t)*dh, z, ch]

Kernel rows past kh read the last one again and get weight 0. The planner folds -z * sum of the
channel's weights into its bias and proved (as for the VNNI GEMM) that bias' plus any partial sum
of (x + z) * w, x + z in 0..255, fits int32: each lane's sum is exact in any order. Channels are
padded to a multiple of 16 with zero weights (a quad past the last channel reads bytes of the next
pixel, or the slack: times 0).
The plain twin is conv.conv_depthwise / conv.conv_depthwise_rows (every ISA).
Where the channels are a multiple of 16 and the output step has no residual or lookup (a requant
and clamps: every MobileNetV2 depthwise conv), a tile's accumulators are requantized in registers
and stored to `out` (simd_step.step_store, out_rows' int64 expression) instead of going through the
int32 scratch and out_rows, whose per-row loop cost more than the taps at 32-144 channels: MobileNetV2's
17 depthwise calls 1.166 -> 0.759 ms (batch 1, one process, thread CPU).
conv_dw_vnni_in_place builds the same quads from the stored input itself where it is uint8 or int8
with channels a multiple of 16 (no padded copy: rows and columns outside the input become z, an int8
byte gets + 128, simd_step.vbits): the copy wrote and the kernel read a whole padded batch, which at
batch 8 no longer fits the caches. MobileNetV2 whole runs 0.916x (batch 1), 0.864x (batch 8).
Both build a quad as one byte shuffle of its four 16-byte loads (simd_step.vquad_shuffle: inserts and
a vpermb, where simd.vquad zero-extended, shifted and or-ed four times): the 17 calls 1.07 -> 0.81 ms.
Row pairs (conv_dw_vnni_in_place at stride and dilation 1 with 4 * nq >= kh + 1, i.e. kh 3, 5, 7;
the output step on the accumulators): one set of quads of input rows i..i+4nq-1 serves output rows
i and i + 1, its lane bytes times the weights for the first and times the weights one row further
down (wq2: the byte string shifted by one, the last row moving into a zero byte) for the second, so
quads are built once per two output rows and every quad and weight load feeds two vpdpbusd.
MobileNetV2's 17 calls (3x3) 0.739 -> 0.471 ms (batch 1), 6.99 -> 3.97 ms (batch 8); with 5x5 and
7x7 too, EfficientNet-B0's 1.121 -> 0.720 ms (batch 1); thread CPU, one process.

wq: (nq*kw, cp) int32, four int8 weights per lane (byte t: tap (4k + t, v)), row k*kw + v;
bias: (cp,) int32; mult, mult2: (1, C) int64; ost, res: the output step (step.out_rows);
out: (N*OH*OW, C); geo: kargs.DGEO; b0..b1: output image rows (n * OH + i), OW pixels each.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .step import out_rows
from .kargs import D_C, D_DH, D_DW, D_HP, D_KH, D_KW, D_NQ, D_OH, D_OW, D_SH, D_SW, D_WP, HAS_RESIDUAL, HI, LO, LUT1, RND, \
    SHIFT
from .simd import dpbusd, vload, vstore
from .simd_step import step_store, vbits, vquad_shuffle, vsplat

SLACK = 64  # bytes after the padded input: a quad past the last channel reads past the last pixel


@njit(cache=True, nogil=True)
def conv_dw_vnni(xp, wq, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Output image rows b0..b1 from the padded uint8 copy xp (vnni.to_padded_u8, SLACK after it)."""
    nq, wpd, cp = geo[D_NQ], geo[D_WP], wq.shape[1]
    s = np.empty((max(geo[D_OW], 4), cp), np.int32)  # a tile of 4 pixels where OW < 4 (extra rows unused)
    q = np.empty(nq * wpd * cp + 4 * geo[D_SW] * cp, np.int32)  # and its reads past the row (times weight 0)
    for row in range(b0, b1):
        _quads_padded(xp, q, row, geo, cp)
        _taps(q, wq, bias, mult, mult2, ost, res, out, geo, s, row)


@njit(cache=True, nogil=True)
def conv_dw_vnni_in_place(x, wq, bias, mult, mult2, ost, pad, res, out, geo, b0, b1):
    """conv_dw_vnni reading the stored input x itself (flat, (N, H, W, C) uint8 or int8, C a multiple
    of 16: no quad reads past a row) instead of a padded copy: pad = (pt, pl, h, w, z)."""
    nq, wpd, cp, oh = geo[D_NQ], geo[D_WP], wq.shape[1], geo[D_OH]
    s = np.empty((max(geo[D_OW], 4), cp), np.int32)
    q = np.empty(nq * wpd * cp + 4 * geo[D_SW] * cp, np.int32)
    kw = geo[D_KW]
    pairs = (4 * nq >= geo[D_KH] + 1 and geo[D_SH] == 1 and geo[D_DH] == 1 and geo[D_C] % 16 == 0
             and geo[D_OW] >= 4 and ost[HAS_RESIDUAL] == 0 and ost[LUT1] == 0)
    wq2 = np.empty_like(wq)  # the weights one kernel row further down the quads: the next output row's
    for r in range(wq.shape[0]):  # (the last kernel row moves into a zero byte: 4 * nq >= kh + 1)
        for ch in range(cp):
            below = (np.int64(wq[r - kw, ch]) >> 24) & 0xFF if r >= kw else 0
            wq2[r, ch] = np.int32(((np.int64(wq[r, ch]) << 8) | below) & 0xFFFFFFFF)
    row = b0
    while row < b1:
        if pairs and row + 1 < b1 and row % oh + 1 < oh:  # two output rows from one quad of input rows
            _quads_in_place(x, q, row, geo, cp, pad, True)
            _taps_pair(q, wq, wq2, bias, mult, ost, out, geo, row)
            row += 2
            continue
        _quads_in_place(x, q, row, geo, cp, pad, False)
        _taps(q, wq, bias, mult, mult2, ost, res, out, geo, s, row)
        row += 1


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _quads_padded(xp, q, row, geo, cp):
    """Output row `row`'s tap quads from the padded copy: kernel rows 4k..4k+3 (past kh: the last again)."""
    kh, sh, dh, oh, hp, wpd, c = geo[D_KH], geo[D_SH], geo[D_DH], geo[D_OH], geo[D_HP], geo[D_WP], geo[D_C]
    n, i = row // oh, row % oh
    for k in range(geo[D_NQ]):
        a0 = ((n * hp + i * sh + min(4 * k, kh - 1) * dh) * wpd) * c
        a1 = ((n * hp + i * sh + min(4 * k + 1, kh - 1) * dh) * wpd) * c
        a2 = ((n * hp + i * sh + min(4 * k + 2, kh - 1) * dh) * wpd) * c
        a3 = ((n * hp + i * sh + min(4 * k + 3, kh - 1) * dh) * wpd) * c
        for z in range(wpd):
            for cb in range(0, cp, 16):
                e = z * c + cb
                vstore(q, (k * wpd + z) * cp + cb, vquad_shuffle(xp, a0 + e, a1 + e, a2 + e, a3 + e))


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _quads_in_place(x, q, row, geo, cp, pad, pair):
    """_quads_padded's quads built from the unpadded input: bytes of rows above or below the input,
    and quads of columns left or right of it, are the padding value z; an int8 byte gets + 128.
    pair (stride and dilation 1, 4 * nq >= kh + 1): input rows i..i+4nq-1, the taps of output rows i
    and i + 1."""
    kh, sh, dh, oh, wpd, c = geo[D_KH], geo[D_SH], geo[D_DH], geo[D_OH], geo[D_WP], geo[D_C]
    pt, pl, h, w, z = pad[0], pad[1], pad[2], pad[3], pad[4]
    flip = 0x80808080 if z == 128 else 0
    n, i = row // oh, row % oh
    border = vsplat(z * 0x01010101)
    for k in range(geo[D_NQ]):
        keep, fill = 0, 0
        a0 = a1 = a2 = a3 = n * h * w * c
        for t in range(4):
            r = i + 4 * k + t - pt if pair else i * sh + min(4 * k + t, kh - 1) * dh - pt
            if 0 <= r < h:
                keep |= 0xFF << (8 * t)
                a = (n * h + r) * w * c
                if t == 0:
                    a0 = a
                elif t == 1:
                    a1 = a
                elif t == 2:
                    a2 = a
                else:
                    a3 = a
            else:
                fill |= z << (8 * t)
        plain = flip == 0 and keep == 0xFFFFFFFF  # every byte read as it is
        for zc in range(wpd):
            col = zc - pl
            base = (k * wpd + zc) * cp
            if col < 0 or col >= w:
                for cb in range(0, cp, 16):
                    vstore(q, base + cb, border)
                continue
            if plain:
                for cb in range(0, cp, 16):
                    e = col * c + cb
                    vstore(q, base + cb, vquad_shuffle(x, a0 + e, a1 + e, a2 + e, a3 + e))
                continue
            for cb in range(0, cp, 16):
                e = col * c + cb
                vstore(q, base + cb, vbits(vquad_shuffle(x, a0 + e, a1 + e, a2 + e, a3 + e), flip, keep, fill))


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _taps(q, wq, bias, mult, mult2, ost, res, out, geo, s, row):
    """Output row `row` from its tap quads q: tiles of 4 pixels x 16 channels, then the output step (on the
    accumulators where `direct` holds, else through s and out_rows)."""
    ow, c = geo[D_OW], geo[D_C]
    cp = wq.shape[1]
    sf, wf = s.reshape(s.size), wq.reshape(wq.size)  # (flat views made once a row: a reshape costs a call)
    step = (mult.reshape(mult.size), ost[RND], ost[SHIFT], ost[LO], ost[HI])
    direct = c % 16 == 0 and ow >= 4 and ost[HAS_RESIDUAL] == 0 and ost[LUT1] == 0
    for cb in range(0, cp, 16):
        for jj in range(0, ow, 4):
            j = min(jj, max(0, ow - 4))  # the last tile repeats pixels of the one before
            t0, t1, t2, t3, _, _, _, _ = _tile(_none, q, wf, wf, cp, bias, geo, cb, j)
            if direct:  # the output step on the accumulators, stored to out (simd_step)
                _store_pixels(out, (row * ow + j) * c + cb, c, t0, t1, t2, t3, cb, step)
            else:
                vstore(sf, j * cp + cb, t0)
                vstore(sf, (j + 1) * cp + cb, t1)
                vstore(sf, (j + 2) * cp + cb, t2)
                vstore(sf, (j + 3) * cp + cb, t3)
    if not direct:
        out_rows(s, ow, out, row * ow, np.int64(0), mult[0], mult2[0], ost, res)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _taps_pair(q, wq, wq2, bias, mult, ost, out, geo, row):
    """Output rows row and row + 1 from quads of input rows i..i+4nq-1: the lane bytes times wq for the
    first, times wq2 (the same weights one kernel row further down) for the second; both stored through the
    output step on the accumulators (no residual or lookup, C a multiple of 16)."""
    ow, c, cp = geo[D_OW], geo[D_C], wq.shape[1]
    wf, wf2 = wq.reshape(wq.size), wq2.reshape(wq2.size)
    step = (mult.reshape(mult.size), ost[RND], ost[SHIFT], ost[LO], ost[HI])
    for cb in range(0, cp, 16):
        for jj in range(0, ow, 4):
            j = min(jj, max(0, ow - 4))
            t0, t1, t2, t3, u0, u1, u2, u3 = _tile(_below, q, wf, wf2, cp, bias, geo, cb, j)
            o = (row * ow + j) * c + cb
            _store_pixels(out, o, c, t0, t1, t2, t3, cb, step)
            _store_pixels(out, o + ow * c, c, u0, u1, u2, u3, cb, step)


@njit(cache=True, inline="always")
def _tile(second, q, wf, wf2, cp, bias, geo, cb, j):
    """The accumulators of 4 pixels (j..j+3) x 16 channels (cb..) over every tap quad: t times the weights
    wf (wq flat, rows of cp lanes), and u = second(u, x, wf2, i) (_below: times wf2, the next output row's
    weights; _none: not computed)."""
    kw, sw, dw, wpd, nq = geo[D_KW], geo[D_SW], geo[D_DW], geo[D_WP], geo[D_NQ]
    jstep, vstep = sw * cp, dw * cp
    t0 = t1 = t2 = t3 = u0 = u1 = u2 = u3 = vload(bias, cb)
    for k in range(nq):
        for v in range(kw):
            p, i = (k * wpd + j * sw) * cp + v * vstep + cb, (k * kw + v) * cp + cb
            wv = vload(wf, i)
            x0, x1, x2, x3 = vload(q, p), vload(q, p + jstep), vload(q, p + 2 * jstep), vload(q, p + 3 * jstep)
            t0, u0 = dpbusd(t0, x0, wv), second(u0, x0, wf2, i)
            t1, u1 = dpbusd(t1, x1, wv), second(u1, x1, wf2, i)
            t2, u2 = dpbusd(t2, x2, wv), second(u2, x2, wf2, i)
            t3, u3 = dpbusd(t3, x3, wv), second(u3, x3, wf2, i)
    return t0, t1, t2, t3, u0, u1, u2, u3


@njit(cache=True, inline="always")
def _below(u, x, wf2, i):
    return dpbusd(u, x, vload(wf2, i))


@njit(cache=True, inline="always")
def _none(u, x, wf2, i):
    return u


@njit(cache=True, inline="always")
def _store_pixels(out, o, c, t0, t1, t2, t3, cb, step):
    """4 pixels' (c values apart) 16 accumulators through the output step (simd_step.step_store)."""
    mf, rnd, shift, lo, hi = step
    step_store(out, o, t0, mf, cb, rnd, shift, lo, hi)
    step_store(out, o + c, t1, mf, cb, rnd, shift, lo, hi)
    step_store(out, o + 2 * c, t2, mf, cb, rnd, shift, lo, hi)
    step_store(out, o + 3 * c, t3, mf, cb, rnd, shift, lo, hi)
