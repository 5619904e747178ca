"""A 16 x int32 (512-bit) vector value for numba, and the few x86 intrinsics the VNNI kernels use.

Only imported when the host CPU reports avx512f and avx512vnni and numba compiles for the host.
Every load and store addresses an array's buffer by flat element index (the array is C-contiguous);
bounds are the caller's responsibility, as in any compiled kernel.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model


class I32x16(types.Type):
    def __init__(self):
        super().__init__(name="i32x16")


i32x16 = I32x16()
_VEC = ir.VectorType(ir.IntType(32), 16)
_I32 = ir.IntType(32)


@register_model(I32x16)
class _I32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


def _address(context, builder, arrty, arr, index):
    data = context.make_array(arrty)(context, builder, arr).data
    return builder.gep(data, [index])


@intrinsic
def vload(typingctx, arr, index):
    """The 64 bytes starting at arr.flat[index], as 16 x int32."""
    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_address(context, builder, sig.args[0], *args), _VEC.as_pointer())
        return builder.load(ptr, align=1)
    return i32x16(arr, index), codegen


@intrinsic
def vbroadcast4(typingctx, arr, index):
    """The 4 bytes starting at arr.flat[index], repeated in every 32-bit lane."""
    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_address(context, builder, sig.args[0], *args), _I32.as_pointer())
        word = builder.load(ptr, align=1)
        vec = builder.insert_element(ir.Constant(_VEC, ir.Undefined), word, ir.Constant(_I32, 0))
        return builder.shuffle_vector(vec, ir.Constant(_VEC, ir.Undefined), ir.Constant(_VEC, [0] * 16))
    return i32x16(arr, index), codegen


@intrinsic
def vstore(typingctx, arr, index, vec):
    """Write 16 x int32 to the 64 bytes starting at arr.flat[index]."""
    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_address(context, builder, sig.args[0], args[0], args[1]), _VEC.as_pointer())
        builder.store(args[2], ptr, align=1)
        return context.get_dummy_value()
    return types.void(arr, index, vec), codegen


@intrinsic
def dpbusd(typingctx, acc, a, b):
    """acc + sum of 4 products per lane: a as 4 x uint8, b as 4 x int8 (AVX-512 VNNI vpdpbusd).
    The lane sum is exact; the planner proved the accumulator never leaves int32."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC] * 3),
                                            "llvm.x86.avx512.vpdpbusd.512")
        return builder.call(fn, args)
    return i32x16(acc, a, b), codegen


_BYTES = ir.VectorType(ir.IntType(8), 16)


@intrinsic
def vload_u8(typingctx, arr, index):
    """The 16 bytes starting at arr.flat[index] (a uint8 array), zero-extended to 16 x int32 (vpmovzxbd)."""
    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_address(context, builder, sig.args[0], *args), _BYTES.as_pointer())
        return builder.zext(builder.load(ptr, align=1), _VEC)
    return i32x16(arr, index), codegen


@intrinsic
def vmadd(typingctx, acc, a, b):
    """acc + a * b per int32 lane (vpmulld, vpaddd); the planner proved every partial sum fits int32."""
    def codegen(context, builder, sig, args):
        return builder.add(args[0], builder.mul(args[1], args[2]))
    return i32x16(acc, a, b), codegen


@intrinsic
def vquad(typingctx, arr, i0, i1, i2, i3):
    """16 x int32 whose lane l holds the bytes arr.flat[i0 + l], [i1 + l], [i2 + l], [i3 + l] (a uint8
    array), lowest first: four 16-byte runs interleaved into the 4-byte lanes vpdpbusd reads."""
    def codegen(context, builder, sig, args):
        arrty, arr_, idx = sig.args[0], args[0], args[1:]
        lane = ir.Constant(_I32, 0)
        for t, i in enumerate(idx):
            ptr = builder.bitcast(_address(context, builder, arrty, arr_, i), _BYTES.as_pointer())
            v = builder.zext(builder.load(ptr, align=1), _VEC)
            if t:
                v = builder.shl(v, ir.Constant(_VEC, [8 * t] * 16))
                lane = builder.or_(lane, v)
            else:
                lane = v
        return lane
    return i32x16(arr, i0, i1, i2, i3), codegen


_B64 = ir.VectorType(ir.IntType(8), 64)


def host_has_vnni() -> bool:
    """AVX-512 VNNI usable: the CPU has it and numba compiles for this CPU (not a generic target,
    not NUMBA_DISABLE_JIT, where the intrinsics cannot run)."""
    import llvmlite.binding as ll
    from numba.core import config
    if config.DISABLE_JIT or config.CPU_NAME not in (None, "host"):
        return False
    features = ll.get_host_cpu_features()
    return bool(features.get("avx512f") and features.get("avx512vnni"))


def host_has_vbmi() -> bool:
    """AVX-512 VBMI (vpermi2b: byte lookups in a 128-byte table held in two registers)."""
    import llvmlite.binding as ll
    return bool(ll.get_host_cpu_features().get("avx512vbmi"))


@intrinsic
def lut64(typingctx, x, tab, out, i):
    """out.flat[i + t] = tab[x.flat[i + t] as uint8] for t < 64: x and out int8 (or uint8) arrays,
    tab 256 bytes. Two vpermi2b lookups (table bytes 0..127 and 128..255, index bits 0..6) and a
    select on bit 7 of each index (AVX-512 VBMI)."""
    def codegen(context, builder, sig, args):
        xty, tty, oty = sig.args[0], sig.args[1], sig.args[2]
        xa, ta, oa, idx = args
        xv = builder.load(builder.bitcast(_address(context, builder, xty, xa, idx), _B64.as_pointer()), align=1)
        parts = [builder.load(builder.bitcast(_address(context, builder, tty, ta, ir.Constant(ir.IntType(64), 64 * k)),
                                              _B64.as_pointer()), align=1) for k in range(4)]
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_B64, [_B64] * 3),
                                            "llvm.x86.avx512.vpermi2var.qi.512")
        lo = builder.call(fn, [parts[0], xv, parts[1]])
        hi = builder.call(fn, [parts[2], xv, parts[3]])
        top = builder.icmp_signed("<", xv, ir.Constant(_B64, [0] * 64))
        y = builder.select(top, hi, lo)
        builder.store(y, builder.bitcast(_address(context, builder, oty, oa, idx),
                                         _B64.as_pointer()), align=1)
        return context.get_dummy_value()
    return types.void(x, tab, out, i), codegen
