"""Vector helpers of the VNNI kernels beside simd.py's: the output step of conv.out_rows on 16 int32
accumulators held in a register (AVX-512), so that a VNNI tile can store its requantized outputs
directly instead of going through an int32 scratch; and the byte fix-ups that let the depthwise
kernel build its tap quads from an unpadded input (vbits, vsplat).

    out[i + l] = min(max((int64(acc[l]) * mult[m + l] + rnd) >> shift, lo), hi),   l < 16

in int64 lanes (sign extension, wrapping multiply, arithmetic shift, signed clamp), the exact
expression out_rows evaluates per element, then narrowed to out's integer width (the clamp proved the
value fits). Only imported where simd.py is (avx512f + avx512vnni, compiled for the host).
numba's cache keys a kernel by its own file only: touch dw_vnni.py and vnni_direct.py after a change
here, or their cached kernels keep the old intrinsics.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .simd import i32x16

_I64 = ir.IntType(64)
_V64 = ir.VectorType(_I64, 16)


def _address(context, builder, arrty, arr, index):
    data = context.make_array(arrty)(context, builder, arr).data
    return builder.gep(data, [index])


def _splat(builder, value):
    vec = builder.insert_element(ir.Constant(_V64, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(vec, ir.Constant(_V64, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 16),
                                                                                      [0] * 16))


@intrinsic
def step_store(typingctx, out, oi, acc, mult, mi, rnd, shift, lo, hi):
    """out.flat[oi + l] = the output step of acc lane l with multiplier mult.flat[mi + l] (int64 array),
    l < 16; rnd, shift, lo, hi int64 scalars; out an int8/int16/int32/uint8 array."""
    if not isinstance(out, types.Array) or not isinstance(out.dtype, types.Integer) or acc != i32x16:
        return None
    if not isinstance(mult, types.Array) or mult.dtype != types.int64 \
            or out.layout != "C" or mult.layout != "C":  # flat indices into the buffers
        return None
    width = out.dtype.bitwidth

    def codegen(context, builder, sig, args):
        out_, oi_, acc_, mult_, mi_, rnd_, shift_, lo_, hi_ = args
        m = builder.load(builder.bitcast(_address(context, builder, sig.args[3], mult_, mi_), _V64.as_pointer()),
                         align=8)
        v = builder.add(builder.mul(builder.sext(acc_, _V64), m), _splat(builder, rnd_))
        v = builder.ashr(v, _splat(builder, shift_))
        lo_v, hi_v = _splat(builder, lo_), _splat(builder, hi_)
        v = builder.select(builder.icmp_signed("<", v, lo_v), lo_v, v)
        v = builder.select(builder.icmp_signed(">", v, hi_v), hi_v, v)
        ovec = ir.VectorType(ir.IntType(width), 16)
        v = builder.trunc(v, ovec) if width < 64 else v
        ptr = builder.bitcast(_address(context, builder, sig.args[0], out_, oi_), ovec.as_pointer())
        builder.store(v, ptr, align=1)
        return context.get_dummy_value()
    return types.void(out, oi, acc, mult, mi, types.int64, types.int64, types.int64, types.int64), codegen


_V32 = ir.VectorType(ir.IntType(32), 16)


def _splat32(builder, value):
    value = builder.trunc(value, ir.IntType(32)) if value.type.width > 32 else value
    vec = builder.insert_element(ir.Constant(_V32, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(vec, ir.Constant(_V32, ir.Undefined), ir.Constant(_V32, [0] * 16))


@intrinsic
def vbits(typingctx, vec, xor, keep, fill):
    """((vec ^ xor) & keep) | fill per int32 lane, the three int32 words repeated in every lane: a tap
    quad read from an unpadded input made what the padded copy would hold (xor 0x80 per byte: an int8
    byte plus 128; keep/fill: the bytes of kernel rows outside the input set to the padding value)."""
    if vec != i32x16:
        return None

    def codegen(context, builder, sig, args):
        v, x, k, f = args
        v = builder.xor(v, _splat32(builder, x))
        return builder.or_(builder.and_(v, _splat32(builder, k)), _splat32(builder, f))
    return i32x16(vec, types.int64, types.int64, types.int64), codegen


@intrinsic
def vsplat(typingctx, word):
    """The int32 word (the low 32 bits of an int64) in every lane."""
    def codegen(context, builder, sig, args):
        return _splat32(builder, args[0])
    return i32x16(types.int64), codegen


_B16 = ir.VectorType(ir.IntType(8), 16)


@intrinsic
def vquad_shuffle(typingctx, arr, i0, i1, i2, i3):
    """simd.vquad (lane l holds bytes arr.flat[i0 + l], [i1 + l], [i2 + l], [i3 + l], lowest first)
    as one byte shuffle of the four 16-byte loads, which LLVM lowers to inserts and a vpermb."""
    def codegen(context, builder, sig, args):
        arrty, arr_, idx = sig.args[0], args[0], args[1:]
        data = context.make_array(arrty)(context, builder, arr_).data
        v = [builder.load(builder.bitcast(builder.gep(data, [i]), _B16.as_pointer()), align=1) for i in idx]
        i32 = ir.IntType(32)
        lo = builder.shuffle_vector(v[0], v[1], ir.Constant(ir.VectorType(i32, 32), list(range(32))))
        hi = builder.shuffle_vector(v[2], v[3], ir.Constant(ir.VectorType(i32, 32), list(range(32))))
        mask = [16 * t + lane for lane in range(16) for t in range(4)]
        both = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 64), mask))
        return builder.bitcast(both, _V32)
    return i32x16(arr, i0, i1, i2, i3), codegen
