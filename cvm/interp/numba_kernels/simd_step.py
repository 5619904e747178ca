"""Vector helpers of the VNNI kernels beside simd.py's: the output step of step.out_rows on 16 int32
accumulators held in a register (AVX-512), so that a VNNI tile can store its requantized outputs
directly instead of going through an int32 scratch; and the byte fix-ups that let the depthwise
kernel build its tap quads from an unpadded input (vbits, vsplat).

    out[i + l] = min(max((int64(acc[l]) * mult[m + l] + rnd) >> shift, lo), hi),   l < 16

in int64 lanes (sign extension, wrapping multiply, arithmetic shift, signed clamp), the exact
expression out_rows evaluates per element, then narrowed to out's integer width (the clamp proved the
value fits). Only imported where simd.py is (avx512f + avx512vnni, compiled for the host).

With an int32 multiplier array (the planner's choice where every multiplier fits int32 and shift >= 32)
the same values come from 16 int32 lanes: two vpmuldq (even and odd lanes) give the exact 64-bit
sums, whose high halves are floor(sum / 2^32); an arithmetic shift by shift - 32 finishes the floor.
step_store_res adds the residual stage of step.out_rows in int32 lanes, with the narrowed requants of
narrow_mult (exact on the domains the planner proved). opaque() keeps LLVM from hoisting a tile's
output-step constants above its GEMM loop, where they would take the accumulators' registers.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .simd import i32x16

_I64 = ir.IntType(64)
_V64 = ir.VectorType(_I64, 16)
_V8 = ir.VectorType(_I64, 8)
_I32 = ir.IntType(32)
_M16 = ir.VectorType(ir.IntType(1), 16)


def _address(context, builder, arrty, arr, index):
    data = context.make_array(arrty)(context, builder, arr).data
    return builder.gep(data, [index])


def _splat(builder, value):
    vec = builder.insert_element(ir.Constant(_V64, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(vec, ir.Constant(_V64, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 16),
                                                                                      [0] * 16))


def _splat8(builder, value):
    vec = builder.insert_element(ir.Constant(_V8, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(vec, ir.Constant(_V8, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 8),
                                                                                    [0] * 8))


def _flat_ints(*arrs) -> bool:
    """C-contiguous integer arrays (the intrinsics address them by flat index)."""
    return all(isinstance(a, types.Array) and isinstance(a.dtype, types.Integer) and a.layout == "C" for a in arrs)


def _stage1(context, builder, multty, mult, mi, acc, rnd, shift, lo, hi):
    """clip(floor((acc * m + rnd) / 2^shift), lo, hi) for 16 lanes as <16 x i32>, m = mult.flat[mi:mi+16]:
    int64 lanes for an int64 array, the vpmuldq form (module docstring) for an int32 one."""
    mty = ir.VectorType(ir.IntType(multty.dtype.bitwidth), 16)
    m = builder.load(builder.bitcast(_address(context, builder, multty, mult, mi), mty.as_pointer()), align=1)
    if multty.dtype.bitwidth == 64:
        v = builder.ashr(builder.add(builder.mul(builder.sext(acc, _V64), m), _splat(builder, rnd)),
                         _splat(builder, shift))
        return builder.trunc(_clip(builder, v, lo, hi, _splat), _V32)
    c32 = ir.Constant(_V8, [32] * 8)
    a, mm, r = builder.bitcast(acc, _V8), builder.bitcast(m, _V8), _splat8(builder, rnd)
    even = builder.mul(builder.ashr(builder.shl(a, c32), c32), builder.ashr(builder.shl(mm, c32), c32))
    odd = builder.mul(builder.ashr(a, c32), builder.ashr(mm, c32))
    even, odd = builder.bitcast(builder.add(even, r), _V32), builder.bitcast(builder.add(odd, r), _V32)
    high = builder.shuffle_vector(even, odd, ir.Constant(_V32, [h for i in range(8) for h in (2 * i + 1, 2 * i + 17)]))
    return _clip(builder, builder.ashr(high, _splat32(builder, builder.sub(shift, ir.Constant(_I64, 32)))), lo, hi,
                 _splat32)


def _clip(builder, v, lo, hi, splat):
    lo_v, hi_v = splat(builder, lo), splat(builder, hi)
    v = builder.select(builder.icmp_signed("<", v, lo_v), lo_v, v)
    return builder.select(builder.icmp_signed(">", v, hi_v), hi_v, v)


def _narrow_requant(builder, v, m, r, s):
    """floor((v * m + r) / 2^s) in int32 lanes (narrow_mult proved it exact where it is used)."""
    return builder.ashr(builder.add(builder.mul(v, _splat32(builder, m)), _splat32(builder, r)), _splat32(builder, s))


def _store16(context, builder, outty, out, oi, v, nl=None):
    """<16 x i32> v narrowed to out's integer width (the clip proved the values fit) at out.flat[oi]; with
    nl (an int64), only lanes l < nl (a masked store: a panel past the last output channel)."""
    ovec = ir.VectorType(ir.IntType(outty.dtype.bitwidth), 16)
    v = builder.trunc(v, ovec) if outty.dtype.bitwidth < 32 else v
    ptr = builder.bitcast(_address(context, builder, outty, out, oi), ovec.as_pointer())
    if nl is None:
        builder.store(v, ptr, align=1)
        return
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ovec, ptr.type, _I32, _M16]),
                                        f"llvm.masked.store.v16i{outty.dtype.bitwidth}.p0")
    builder.call(fn, [v, ptr, ir.Constant(_I32, 1), _lanes_below(builder, nl)])


def _load16(context, builder, arrty, arr, i, nl=None):
    """The 16 elements at arr.flat[i] widened to <16 x i32> (sign or zero by arr's type); with nl, lanes
    l >= nl are not read (0)."""
    vec = ir.VectorType(ir.IntType(arrty.dtype.bitwidth), 16)
    ptr = builder.bitcast(_address(context, builder, arrty, arr, i), vec.as_pointer())
    if nl is None:
        v = builder.load(ptr, align=1)
    else:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [ptr.type, _I32, _M16, vec]),
                                            f"llvm.masked.load.v16i{arrty.dtype.bitwidth}.p0")
        v = builder.call(fn, [ptr, ir.Constant(_I32, 1), _lanes_below(builder, nl), ir.Constant(vec, [0] * 16)])
    return builder.sext(v, _V32) if arrty.dtype.signed else builder.zext(v, _V32)


def _lanes_below(builder, nl):
    return builder.icmp_signed("<", ir.Constant(_V32, list(range(16))), _splat32(builder, nl))


def _step_codegen(partial: bool):
    def codegen(context, builder, sig, args):
        out_, oi_, acc_, mult_, mi_, rnd_, shift_, lo_, hi_ = args[:9]
        v = _stage1(context, builder, sig.args[3], mult_, mi_, acc_, rnd_, shift_, lo_, hi_)
        _store16(context, builder, sig.args[0], out_, oi_, v, args[9] if partial else None)
        return context.get_dummy_value()
    return codegen


def _step_res_codegen(partial: bool):
    def codegen(context, builder, sig, args):
        out_, oi_, acc_, mult_, mi_, rnd_, shift_, lo_, hi_, res_, rm_, rr_, rs_, m2_, r2_, s2_, lo2_, hi2_ = args[:18]
        nl = args[18] if partial else None
        y = _stage1(context, builder, sig.args[3], mult_, mi_, acc_, rnd_, shift_, lo_, hi_)
        r = _load16(context, builder, sig.args[9], res_, oi_, nl)
        v = builder.add(y, _narrow_requant(builder, r, rm_, rr_, rs_))
        _store16(context, builder, sig.args[0], out_, oi_, _clip(builder, _narrow_requant(builder, v, m2_, r2_, s2_),
                                                                  lo2_, hi2_, _splat32), nl)
        return context.get_dummy_value()
    return codegen


@intrinsic
def step_store(typingctx, out, oi, acc, mult, mi, rnd, shift, lo, hi):
    """out.flat[oi + l] = the output step of acc lane l with multiplier mult.flat[mi + l], l < 16: mult an
    int64 array, or an int32 one where shift >= 32 (the vpmuldq form); rnd, shift, lo, hi int64 scalars
    (lo, hi within int32); out an int8/int16/int32/uint8 array."""
    if not _flat_ints(out, mult) or acc != i32x16 or mult.dtype.bitwidth not in (32, 64) or out.dtype.bitwidth > 32:
        return None
    return types.void(out, oi, acc, mult, mi, *([types.int64] * 4)), _step_codegen(False)


@intrinsic
def step_store_part(typingctx, out, oi, acc, mult, mi, rnd, shift, lo, hi, nl):
    """step_store for lanes l < nl only (1 <= nl <= 16): a panel past the last output channel."""
    if not _flat_ints(out, mult) or acc != i32x16 or mult.dtype.bitwidth not in (32, 64) or out.dtype.bitwidth > 32:
        return None
    return types.void(out, oi, acc, mult, mi, *([types.int64] * 5)), _step_codegen(True)


@intrinsic
def step_store_res(typingctx, out, oi, acc, mult, mi, rnd, shift, lo, hi, res, rm, rr, rs, m2, r2, s2, lo2, hi2):
    """step_store's stage 1 (y), then with the residual lane r = res.flat[oi + l] (res shaped like out):
    out = clip(floor(((y + floor((r*rm + rr) / 2^rs)) * m2 + r2) / 2^s2), lo2, hi2), all in int32 lanes
    (rm, rr, rs and m2, r2, s2: narrow_mult's triples for the two requants of step.out_rows' residual
    stage, exact on the domains the planner proved; the residual's own clip open)."""
    if not _res_types_ok(out, mult, res, acc):
        return None
    return types.void(out, oi, acc, mult, mi, *([types.int64] * 4), res, *([types.int64] * 8)), _step_res_codegen(False)


@intrinsic
def step_store_res_part(typingctx, out, oi, acc, mult, mi, rnd, shift, lo, hi, res, rm, rr, rs, m2, r2, s2, lo2, hi2, nl):
    """step_store_res for lanes l < nl only (the residual's other lanes not read either)."""
    if not _res_types_ok(out, mult, res, acc):
        return None
    return types.void(out, oi, acc, mult, mi, *([types.int64] * 4), res, *([types.int64] * 9)), _step_res_codegen(True)


def _res_types_ok(out, mult, res, acc) -> bool:
    return (_flat_ints(out, mult, res) and acc == i32x16 and mult.dtype.bitwidth in (32, 64) and out.dtype.bitwidth <= 32
            and res.dtype.bitwidth <= 16)


@intrinsic
def opaque(typingctx, x):
    """x (an int64) through an empty asm statement with side effects: whatever a tile computes from it
    (the output step's splatted constants) is computed after the tile's GEMM loop, not hoisted above it."""
    def codegen(context, builder, sig, args):
        return builder.asm(ir.FunctionType(_I64, [_I64]), "", "=r,0", [args[0]], side_effect=True)
    return types.int64(types.int64), codegen


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
