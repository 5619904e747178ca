"""A requant -> lut chain's lookups as AVX-512 gathers (16 per vpgatherdd), for the whole-plan runner.

A wide recurrent cell's gates are 12-bit lookups (tables of 4,095 entries, too large for the VBMI
permutes of lut_vbmi.py): fused.copy_rows with a lut in its output step, called on a few rows of
32-128 values, one scalar load from the int64 output-step table per value (about 0.6 ns a value
measured; the LSTM fixture's 69 such calls were a third of its batch-8 run). `copy_rows_g` computes
the same values in two passes over each row: the requant and clamp (the output step's exact int64
arithmetic, step.requant, a loop that vectorizes) into an int32 scratch row, then the lookups, 16 at a time, from
an int32 copy of the output-step table made at bind time (the tables hold output values, which fit
the output's dtype, at most int32; the fields before them are not read from the copy). The index
is the clamped value plus the table's start, as in the scalar path, so it stays inside the table.

The plain twins are fused.copy_rows (the per-step path) and rows_lean's copy_rows_l / copy_rows_f
(the program without gathers); rows_lean.translate_row picks this one where the CPU has AVX-512.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .fused import BLOCK_ROWS
from .kargs import HI, LO, LUT1, LUT1_OFF, RND, SHIFT
from .simd import _VEC, _address, i32x16, vload
from .step import COPY, cols, requant

_I1x16 = ir.VectorType(ir.IntType(1), 16)
_I8P = ir.IntType(8).as_pointer()


@intrinsic
def vgather(typingctx, tab, vidx):
    """16 x int32: lane l = tab.flat[vidx[l]] (tab an int32 array; vpgatherdd, every lane)."""
    def codegen(context, builder, sig, args):
        base = builder.bitcast(_address(context, builder, sig.args[0], args[0], ir.Constant(ir.IntType(64), 0)), _I8P)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VEC, [_VEC, _I8P, _VEC, _I1x16, ir.IntType(32)]),
            "llvm.x86.avx512.mask.gather.dpi.512")
        return builder.call(fn, [ir.Constant(_VEC, [0] * 16), base, args[1], ir.Constant(_I1x16, [1] * 16),
                                 ir.Constant(ir.IntType(32), 4)])
    return i32x16(tab, vidx), codegen


@intrinsic
def vplus(typingctx, vec, k):
    """vec + k in every int32 lane (k an int64 that fits int32: a table's start)."""
    def codegen(context, builder, sig, args):
        w = builder.trunc(args[1], ir.IntType(32))
        one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), w, ir.Constant(ir.IntType(32), 0))
        return builder.add(args[0], builder.shuffle_vector(one, ir.Constant(_VEC, ir.Undefined),
                                                           ir.Constant(_VEC, [0] * 16)))
    return i32x16(vec, types.int64), codegen


@intrinsic
def vstore_as(typingctx, arr, index, vec):
    """Write 16 x int32 to arr.flat[index:index + 16], each lane stored to arr's integer dtype (the
    low bits, as numpy's store of an int to a narrower int: the values fit it here)."""
    bits = arr.dtype.bitwidth

    def codegen(context, builder, sig, args):
        vt = ir.VectorType(ir.IntType(bits), 16)
        v = args[2] if bits == 32 else builder.trunc(args[2], vt) if bits < 32 else builder.sext(args[2], vt)
        ptr = builder.bitcast(_address(context, builder, sig.args[0], args[0], args[1]), vt.as_pointer())
        builder.store(v, ptr, align=1)
        return context.get_dummy_value()
    return types.void(arr, index, vec), codegen


@njit(cache=True, nogil=True)
def copy_rows_g(x, mult, mult2, ost, res, out, c0, b0, b1, s, ost32):
    """fused.copy_rows (its first nine arguments, same result) for an output step of one lut and no
    residual: s an int32 scratch of (min(BLOCK_ROWS, rows), x's width), ost32 the output-step table
    as int32. Every row's requant first, then the lookups (a vector load right after the scalar
    stores of the same bytes would stall on store forwarding)."""
    c = x.shape[1]
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    t1 = ost[LUT1] - ost[LUT1_OFF]
    for blk in range(b0, b1):
        r0 = blk * BLOCK_ROWS
        nrows = min(BLOCK_ROWS, x.shape[0] - r0)
        for r in range(nrows):
            xr, sr = x[r0 + r], s[r]
            for ch in range(c):
                sr[ch] = requant(np.int32(xr[ch]), mult[ch], rnd, shift, lo, hi)
        for r in range(nrows):
            _lookups(s[r], c, t1, ost, ost32, out[r0 + r, c0:c0 + c])


@njit(cache=True, nogil=True)
def copy_flat_g(x, m, ost, out, s, ost32):
    """copy_rows_g on flat operands (x, out: rows x channels, contiguous; s: int32 scratch of as many
    values) with one multiplier m for every channel: one requant loop, then the lookups."""
    rnd, shift, lo, hi = ost[RND], ost[SHIFT], ost[LO], ost[HI]
    for i in range(x.shape[0]):
        s[i] = requant(np.int32(x[i]), m, rnd, shift, lo, hi)
    _lookups(s, x.shape[0], ost[LUT1] - ost[LUT1_OFF], ost, ost32, out)


@njit(cache=True, nogil=True)
def copy_cols_g(x, c0, m, ost, out, s, ost32):
    """copy_flat_g of the columns c0:c0 + w of x (rows x W, contiguous; out: rows * w values): a
    gate's slice read in place (wholeplan_fuse) instead of copied to a buffer of its own first. Every
    value is read into s before out is written, so out may lie over x."""
    _cols(x, c0, m, ost, out, s, ost32)


@njit(cache=True, nogil=True, inline="always")
def _cols(x, c0, m, ost, out, s, ost32):
    cols(COPY, x, c0, s, m, ost, s)  # (a copy reads no scale: s stands in for one)
    _lookups(s, out.shape[0], ost[LUT1] - ost[LUT1_OFF], ost, ost32, out)


@njit(cache=True, nogil=True, inline="always")
def _lookups(s, n, t1, ost, ost32, out):
    i = 0
    while i + 16 <= n:
        vstore_as(out, i, vgather(ost32, vplus(vload(s, i), t1)))
        i += 16
    for k in range(i, n):
        out[k] = ost[t1 + s[k]]
