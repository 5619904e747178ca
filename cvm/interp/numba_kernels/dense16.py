"""int16 dense (and 1x1 conv) on AVX-512 VNNI: vpdpwssd multiplies 2 int16 pairs and adds both products to an int32 lane.

The "vnni" path reads uint8 activations; a wide activation (12 bits, stored int16: a recurrent cell's
states, mrt.recurrent_precision) with int16 weights fell to the portable int32 GEMM (conv._gemm_i32), which
the unrolled LSTM spent most of its batch-64 time in. This path keeps the portable path's proof: every
partial sum, from the bias (or 0), of products x_k * w[n, k] fits int32 (lower_mac.partial_sums_fit_int32).
vpdpwssd adds two such products to the accumulator in wrapping 32-bit arithmetic, so each accumulator it
leaves equals the exact partial sum, which is in range: the lanes end with the exact sum.

Weights are packed per 16 output channels (a panel), then per pair of k, then lane, then the pair:
wp[((j * k2 + t) * 16 + lane) * 2 + i] = w[16 j + lane, 2 t + i], panels padded to an even count with
zero weights (a tile takes two). The input is read in place, a pair of int16 at a time (one 32-bit
broadcast); an odd k's last column is added after the tile by a plain loop. A tile is 4 rows x 32
channels in registers (tiles.tiles_4x2, with vpdpwssd as its inner product); the output step is step.out_rows.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils
from numba.extending import intrinsic

from .step import out_rows
from .simd import i32x16
from .tiles import tiles_4x2

BLOCK_ROWS = 64  # rows per block: the unit of work split between threads
_VEC = ir.VectorType(ir.IntType(32), 16)


@intrinsic
def dpwssd(typingctx, acc, a, b):
    """acc + sum of 2 products per lane: a and b as 2 x int16 (AVX-512 VNNI vpdpwssd, wrapping)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC] * 3),
                                            "llvm.x86.avx512.vpdpwssd.512")
        return builder.call(fn, args)
    return i32x16(acc, a, b), codegen


def pack_weights(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(og, k) int16-range weights -> the flat packed panels (see the module docstring) and the odd k's last
    column (zeros when k is even), padded to the panels' channel count."""
    og, k = rows.shape
    panels = 2 * -(-og // 32)
    k2 = k // 2
    w = np.zeros((panels * 16, k), np.int16)
    w[:og] = rows
    packed = w[:, :2 * k2].reshape(panels, 16, k2, 2).transpose(0, 2, 1, 3)
    last = w[:, k - 1].copy() if k % 2 else np.zeros(panels * 16, np.int16)
    return np.ascontiguousarray(packed).reshape(-1), last


@njit(cache=True, inline="always")
def dot_s16(acc, a, b):
    """vpdpwssd (dpwssd) as a function a tile can take."""
    return dpwssd(acc, a, b)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _block(x, r0, nrows, wp, last, bias, s):
    """s[r, n] = bias[n] + sum_k x[r0 + r, k] * w[n, k] for the block's rows, every (padded) channel."""
    k = x.shape[1]
    k2, lds = k // 2, s.shape[1]
    tiles_4x2(dot_s16, x, r0 * k, k, nrows, k2, 2, 32, wp, k2 * 32, bias, s)
    if k % 2:
        for r in range(nrows):
            xv, srow = np.int32(x[r0 + r, k - 1]), s[r]
            for n in range(lds):
                srow[n] = np.int32(srow[n] + xv * np.int32(last[n]))


@njit(cache=True, nogil=True)
def dense_vnni16(x, wp, last, bias, mult, mult2, ost, res, out, geo, b0, b1):
    """Row blocks b0..b1 (of BLOCK_ROWS rows) of out (rows, og) = the output step of x (rows, k) int16
    times the packed weights, plus bias (int32, padded to the panels' channels). geo is unused (the
    KernelCall contract); mult, mult2: (og,) int64."""
    rows = out.shape[0]
    s = np.empty((min(BLOCK_ROWS, rows), bias.shape[0]), np.int32)
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, rows - r0)
        _block(x, r0, nrows, wp, last, bias, s)
        out_rows(s, nrows, out, r0, 0, mult, mult2, ost, res)


@njit(cache=True, nogil=True)
def widen_rows(x, out):
    """out = x as int16: an int8 input of a layer whose weights are wider than int8 (the kernel reads int16)."""
    for r in range(x.shape[0]):
        src, dst = x[r], out[r]
        for i in range(x.shape[1]):
            dst[i] = src[i]


def eligible(rows: np.ndarray, x_dtype, groups: int, geom: dict) -> bool:
    """A dense layer, or a 1x1 conv with stride 1 and no padding (a dense layer over the pixels of the
    channels-last input), of int16 activations (or int8 ones, widened first: a layer whose weights are wider
    than the VNNI path's int8) whose weights fit int16; the int32 proof is the caller's (the "i32" path's)."""
    pointwise = geom["kh"] == geom["kw"] == 1 and geom["sh"] == geom["sw"] == 1 and \
        geom["pt"] == geom["pl"] == geom["pb"] == geom["pr"] == 0
    return (pointwise and groups == 1 and np.dtype(x_dtype) in (np.int8, np.int16) and rows.shape[1] >= 2
            and rows.min() >= -32768 and rows.max() <= 32767)


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pack_b(b, wp, last, k2):
    """b (k, n) as dense16's packed panels of w[n, k] = b[k, n] (the padded lanes stay zero)."""
    k, n_ = b.shape
    for n in range(n_):
        base = ((n // 16) * k2 * 16 + n % 16) * 2
        for t in range(k2):
            wp[base + t * 32] = b[2 * t, n]
            wp[base + t * 32 + 1] = b[2 * t + 1, n]
        if k % 2:
            last[n] = b[k - 1, n]


@njit(cache=True, nogil=True)
def matmul_vnni16(a, b, out):
    """out[p] = a[p] @ b[p] for int16 activations a (P, M, K) and b (P, K, N), out int32 (P, M, N): b packed
    per p into dense16's panels, then the dense tiles with a zero bias. Exact as matmul.matmul_i32 is (the op's
    bound puts every partial sum in int32)."""
    p_, m_, k = a.shape
    n_ = b.shape[2]
    k2, lds = k // 2, 32 * -(-n_ // 32)
    wp = np.zeros(lds * k2 * 2, np.int16)
    last = np.zeros(lds, np.int16)
    bias = np.zeros(lds, np.int32)
    s = np.empty((min(BLOCK_ROWS, m_), lds), np.int32)
    for p in range(p_):
        _pack_b(b[p], wp, last, k2)
        x = a[p]
        for r0 in range(0, m_, BLOCK_ROWS):
            nrows = min(BLOCK_ROWS, m_ - r0)
            _block(x, r0, nrows, wp, last, bias, s)
            for r in range(nrows):
                for n in range(n_):
                    out[p, r0 + r, n] = s[r, n]
