"""int8 x int8 matmul of two activations on AVX-512 VNNI (vpdpbusd): an 8-bit transformer's attention.

The portable matmul.matmul_i32 multiplies one int32 lane at a time; ViT-B/16's 24 attention matmuls
(QK^T and probabilities x V, 716M MACs a sample) took a fifth of its run there. vpdpbusd multiplies 4
uint8 x int8 pairs per lane and adds them to an int32 accumulator, so the left operand is shifted into
uint8: a + 128 (a int8), and each accumulator starts at -128 * sum_k b[k, n], which takes the shift back:

    sum_k (a[m, k] + 128) * b[k, n] - 128 * sum_k b[k, n] = sum_k a[m, k] * b[k, n].

Every intermediate is exact in int32 when K * 255 * 128 < 2^31 (MAX_K; `eligible`), and the result equals
matmul_i32's (the op's bound puts the sum in int32). A uint8 left operand is used as it is (no shift).
Both operands are packed per matrix: a's rows to uint8 with K padded to a multiple of 4 (padding 0), b to
panels of 16 columns, then groups of 4 k, then lane, then the 4 bytes (padding 0, so padded k and n add
nothing); a tile is 4 rows x 32 columns in registers (tiles.tiles_4x2, dense16's tiles with vpdpbusd as their
inner product).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .tiles import dot_u8s8, tiles_4x2

MAX_K = (2**31 - 1) // (255 * 128)  # 65,793: the shifted partial sums stay in int32
SHIFT = 128


def eligible(a_dtype, b_dtype, k: int) -> bool:
    """An int8 (or uint8) left operand, an int8 right one, a K the shifted sums fit int32 with."""
    return np.dtype(a_dtype) in (np.int8, np.uint8) and np.dtype(b_dtype) == np.int8 and 1 <= k <= MAX_K


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pack_a(a, au, flip):
    """au (M, K4) uint8 = a's bytes xor flip (0x80: an int8 byte + 128), the padded columns 0."""
    m_, k = a.shape
    for m in range(m_):
        src, dst = a[m], au[m]
        for i in range(k):
            dst[i] = src[i] ^ flip
        for i in range(k, au.shape[1]):
            dst[i] = 0


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pack_b(b, wp, start, shift):
    """wp = b (K, N) as panels (see the module docstring); start[n] = -shift * sum_k b[k, n] (0 past N)."""
    k, n_ = b.shape
    k4 = wp.shape[0] // (start.shape[0] * 4)
    wp[:] = 0
    start[:] = 0
    for n in range(n_):
        base = (n // 16) * k4 * 64 + (n % 16) * 4
        col = np.int32(0)
        for kk in range(k):
            v = b[kk, n]
            wp[base + (kk // 4) * 64 + kk % 4] = v
            col += np.int32(v)
        start[n] = -shift * col


def left_operand(a: np.ndarray) -> tuple[np.ndarray, int]:
    """matmul_vnni's (a, shift) for an int8 or uint8 left operand: its bytes as uint8, and 128 where they
    are int8 (flipping the top bit of an int8 byte adds 128)."""
    return (a.view(np.uint8), SHIFT) if a.dtype == np.int8 else (a, 0)


@njit(cache=True, nogil=True)
def matmul_vnni(a, shift, b, out):
    """out[p] = (a[p] - shift) @ b[p]: a (P, M, K) uint8 (an int8 operand's bytes, shift 128: left_operand),
    b (P, K, N) int8, out (P, M, N) of the op's stored dtype (int32, or narrower where its bound allows)."""
    p_, m_, k = a.shape
    n_ = b.shape[2]
    k4, lds = -(-k // 4), 32 * -(-n_ // 32)
    flip = np.uint8(shift)
    shift = np.int32(shift)
    au = np.empty((m_, 4 * k4), np.uint8)
    wp = np.empty(lds * k4 * 4, np.int8)
    start = np.empty(lds, np.int32)
    s = np.empty((m_, lds), np.int32)
    for p in range(p_):
        _pack_a(a[p], au, flip)
        _pack_b(b[p], wp, start, shift)
        tiles_4x2(dot_u8s8, au, 0, au.shape[1], m_, k4, 4, 64, wp, k4 * 64, start, s)
        for r in range(m_):
            src, dst = s[r], out[p, r]
            for n in range(n_):
                dst[n] = src[n]
