"""The VNNI GEMM (vnni.py) with its output step run on the accumulators in registers: each tile
requantizes, clamps and stores its outputs directly (simd_step.step_store), with no int32 scratch
and no second pass (step.out_rows).

Why: with few input channels (MobileNetV2's 1x1 convs, K = 16-32) a tile's 24 vpdpbusd are as few as
its 24 stores to the scratch, and the output step then reads every accumulator back: measured on
MobileNetV2's 112x112 16 -> 96 conv, the GEMM alone 0.114 ms (a third of the vpdpbusd peak) and the
output step alone 0.129 ms. Only for output steps without a residual or a lookup table (requant and
clamps, or none): y = clip(floor((acc * mult + rnd) / 2^shift), lo, hi), the same int64 expression
out_rows evaluates, so the outputs are the same bits.

Same input (the padded uint8 copy, vnni.to_padded_u8), packed weights, bias and geometry as
vnni.conv_vnni, and the same tiles (tiles.py: 6 pixels x 64 channels, 8 x 32 for the last two panels, through
vnni.group_tiles) with this file's stores; mult is
padded to the panels (groups, nv * 16) so that a tile reads 16 multipliers at once. A panel across the
last output channel (og not a multiple of 16: MobileNetV2's 24, EfficientNet's 40) is stored with a
masked store (its residual read with a masked load), panels past it not at all, and a partial last
tile repeats its block's last pixel (the same value stored to the same row again).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .kargs import HI, HI2, LO, LO2, LUT1, LUT2, RHI, RLO, RMUL, RND, RND2, RRND, RSHIFT, SHIFT, SHIFT2, V_GROUPS, V_OG, \
    V_OH, V_OW
from .narrow_mult import narrow
from ...arith import INT32_MAX, INT32_MIN
from .simd_step import opaque, step_store, step_store_part, step_store_res, step_store_res_part
from .tiles import four
from .tuning import Tuning
from .vnni import block_size, group_tiles


@njit(cache=True, inline="always")
def _store(sargs, r, row):
    """tiles.py's store for row r of a tile through the output step: its 16-channel accumulators (4 or 2
    panels; panels past og are padding, a panel across it stored in part: panels padded to 32 channels).
    sargs: (out, m, n0, orow, c0, og, mult, rnd, shift, lo, hi, res, q); tile row r is stored to out's row
    orow[m + r], from channel c0 + n0."""
    out, m, n0, orow, c0, og, mult, rnd, shift, lo, hi, res, q = sargs
    o, p = orow[m + r] * out.shape[1] + c0 + n0, four(row)
    step16(out, o, p[0], mult, n0, rnd, shift, lo, hi, res, q, og - n0)
    if n0 + 16 < og:
        step16(out, o + 16, p[1], mult, n0 + 16, rnd, shift, lo, hi, res, q, og - n0 - 16)
    if len(row) > 2 and n0 + 32 < og:
        step16(out, o + 32, p[2], mult, n0 + 32, rnd, shift, lo, hi, res, q, og - n0 - 32)
    if len(row) > 2 and n0 + 48 < og:
        step16(out, o + 48, p[3], mult, n0 + 48, rnd, shift, lo, hi, res, q, og - n0 - 48)


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
    """conv_vnni_direct with the residual stage of step.out_rows in int32 lanes (simd_step.step_store_res):
    res shaped like out, rq int64 (rm, rr, rs, m2, r2, s2, lo2, hi2), narrow_mult's triples for the
    residual's requant and the add's (exact on their proven domains; residual_stage)."""
    _blocks(xp, wp, bias, multp, ost, res, (rq[0], rq[1], rq[2], rq[3], rq[4], rq[5], rq[6], rq[7]), out, geo, b0, b1,
            None)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _blocks(xp, wp, bias, multp, ost, res, q, out, geo, b0, b1, opad):
    """The pixel blocks b0..b1 of the entry points (res None: no residual; opad None: out unpadded), by
    tiles.py's 6x4 and 8x2 tiles with _store, inlined here (a 1x1 28x28 128 -> 128 conv with a residual
    102 -> 89 us, 16 -> 96 at 112x112 without 381 -> 305 us, against the hand-written tiles they replace)."""
    groups, og = geo[V_GROUPS], geo[V_OG]
    rows = out.shape[0] if opad is None else out.shape[0] // (opad[0] * opad[1]) * geo[V_OH] * geo[V_OW]
    bs = block_size(rows)
    a = np.empty(bs + 8, np.int64)
    orow, xf = np.empty(bs + 8, np.int64), xp.reshape(xp.size)
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for blk in range(b0, b1):
        r0 = blk * bs
        nrows = min(bs, rows - r0)
        if nrows <= 0:
            continue
        for t in range(nrows + 8):  # a partial last tile repeats the last pixel, stored to its row
            orow[t] = _out_row(r0 + min(t, nrows - 1), geo, opad)
        for g in range(groups):
            group_tiles(xf, wp, bias, geo, g, r0, nrows, a, _store, _ready, out,
                        (orow, g * og, og, multp[g], rnd, shift, lo, hi, res, q))


@njit(cache=True, inline="always")
def _out_row(r, geo, opad):
    """The row of `out` output pixel r is stored in (itself unless out is a padded image)."""
    if opad is None:
        return r
    oh, ow = geo[V_OH], geo[V_OW]
    n, rest = r // (oh * ow), r % (oh * ow)
    return (n * opad[0] + rest // ow + opad[2]) * opad[1] + rest % ow + opad[3]


def step16(out, o, v, mult, n0, rnd, shift, lo, hi, res, q, left):
    """One 16-lane output step, with the residual stage where res is an array (none: without it); only the
    first `left` lanes where fewer than 16 output channels are left (masked stores and loads). Compiled only
    (the overload below picks the form by res's type)."""
    raise NotImplementedError


@overload(step16, inline="always")
def _step16(out, o, v, mult, n0, rnd, shift, lo, hi, res, q, left):
    if isinstance(res, types.NoneType):
        def plain(out, o, v, mult, n0, rnd, shift, lo, hi, res, q, left):
            if left >= 16:
                step_store(out, o, v, mult, n0, rnd, shift, lo, hi)
            else:
                step_store_part(out, o, v, mult, n0, rnd, shift, lo, hi, left)
        return plain

    def with_res(out, o, v, mult, n0, rnd, shift, lo, hi, res, q, left):
        if left >= 16:
            step_store_res(out, o, v, mult, n0, rnd, shift, lo, hi, res, q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7])
        else:
            step_store_res_part(out, o, v, mult, n0, rnd, shift, lo, hi, res, q[0], q[1], q[2], q[3], q[4], q[5],
                                q[6], q[7], left)
    return with_res


@njit(cache=True, inline="always")
def _ready(sargs):
    """The store's output-step scalars made opaque after a tile's GEMM loop (simd_step.opaque): with the
    residual stage's eight more, their splats hoisted above the loop took registers the 24 accumulators
    need (spills in the loop: ResNet-50's residual convs 0.95 -> 0.85x with this)."""
    out, m, n0, orow, c0, og, mult, rnd, shift, lo, hi, res, q = sargs
    return (out, m, n0, orow, c0, og, mult, opaque(rnd), opaque(shift), opaque(lo), opaque(hi), res,
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
