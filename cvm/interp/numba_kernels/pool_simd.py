"""max_pool2d on AVX-512: a window's maximum over 64 bytes of channels at once, held in a register.

pool.max_pool_nhwc (its plain twin, which this must equal bit for bit) updates the output element by
element for every tap; with C = 64 uint8 channels that was ~13 cycles a tap (ResNet-50's stem pool at
batch 8: 0.72-0.93 ms for 25,088 windows of 9 taps). Here one 64-byte vector per window and channel
run: load the first in-image tap, vpmaxub / vpmaxsb / vpmaxsw with each other tap, one store. The taps
visited are the twin's (conv.tap_range: never one in the padding, at least one per window, proved by the
verifier). Channels a multiple of 64 bytes' worth (64 int8 / uint8, 32 int16): eligible().
Only imported where simd.py is (avx512f + avx512vnni, which every such CPU has with avx512bw).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .conv import tap_range
from .kargs import DH, DW, KH, KW, PL, PT, SH, SW
from .simd import i32x16, vload, vstore

_V32 = ir.VectorType(ir.IntType(32), 16)


@intrinsic
def vmax(typingctx, acc, arr, index):
    """Lane-wise max of acc and the 64 bytes at arr.flat[index], both read as arr's element type (uint8
    unsigned, int8 / int16 signed)."""
    if acc != i32x16 or not isinstance(arr, types.Array) or arr.dtype not in (types.uint8, types.int8, types.int16):
        return None
    bits, signed = arr.dtype.bitwidth, arr.dtype.signed

    def codegen(context, builder, sig, args):
        acc_, arr_, idx = args
        vt = ir.VectorType(ir.IntType(bits), 512 // bits)
        data = context.make_array(sig.args[1])(context, builder, arr_).data
        x = builder.load(builder.bitcast(builder.gep(data, [idx]), vt.as_pointer()), align=1)
        a = builder.bitcast(acc_, vt)
        bigger = builder.icmp_signed(">", x, a) if signed else builder.icmp_unsigned(">", x, a)
        return builder.bitcast(builder.select(bigger, x, a), _V32)
    return i32x16(acc, arr, index), codegen


@njit(cache=True, nogil=True)
def max_pool_nhwc_simd(x, out, geo, r0, r1):
    """Output rows r0..r1 of pool.max_pool_nhwc (the same arguments); x and out C-contiguous."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    _, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    lanes = 64 // x.itemsize
    xf, of = x.reshape(x.size), out.reshape(out.size)
    for r in range(r0, r1):
        n, i = r // oh, r % oh
        ulo, uhi = tap_range(i, sh, dh, pt, h, kh)
        for j in range(ow):
            vlo, vhi = tap_range(j, sw, dw, pl, w, kw)
            first = ((n * h + i * sh + ulo * dh - pt) * w + j * sw + vlo * dw - pl) * c
            for ch in range(0, c, lanes):
                acc = vload(xf, first + ch)
                for u in range(ulo, uhi):
                    row = (n * h + i * sh + u * dh - pt) * w
                    for v in range(vlo, vhi):
                        acc = vmax(acc, xf, (row + j * sw + v * dw - pl) * c + ch)
                vstore(of, ((n * oh + i) * ow + j) * c + ch, acc)


def eligible(dtype, channels: int) -> bool:
    """Channels in whole 64-byte vectors, of a dtype vmax reads."""
    dtype = np.dtype(dtype)
    return dtype in (np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.int16)) and channels % (64 // dtype.itemsize) == 0
