"""The compiled half of the whole-plan runner (wholeplan.py): the interpreter loop and the two
intrinsics it and the generated steps are made of.

A program is an int64 array: at each step an opcode, then the step's arguments (an array: its byte
offset in the arena, then its dims; an int: its value). The interpreter calls, through a table of
addresses indexed by opcode, one step function per kernel signature (wholeplan_gen: a generated
`@cfunc` of STEP_SIG that builds the kernel's arrays in place and calls it), which returns the
program counter of the next step. The interpreter itself never changes, so it compiles once.
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

STEP_SIG = types.int64(types.CPointer(types.int64), types.CPointer(types.uint8), types.int64)


@intrinsic
def at(typingctx, arena, offset, shape, dtype):
    """at(arena, offset, (d0, ...), np.<dtype>): the C-contiguous array of that shape whose first
    byte is arena[offset] (arena: a uint8 pointer), built in place: no checks, no owner (the arena
    outlives the step). numpy's view + reshape cost about 30 ns an array (measured), more than a
    small kernel's work."""
    nd = len(shape)
    ret = types.Array(dtype.instance_type, nd, "C")

    def codegen(context, builder, sig, args):
        base, off, shp, _ = args
        out = make_array(ret)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(ret.dtype)))
        dims = cgutils.unpack_tuple(builder, shp, nd)
        strides, step = [], itemsize
        for d in reversed(dims):
            strides.insert(0, step)
            step = builder.mul(step, d)
        data = builder.bitcast(builder.gep(base, [off]), out.data.type)
        populate_array(out, data=data, shape=dims, strides=strides, itemsize=itemsize,
                       meminfo=cgutils.get_null_value(out.meminfo.type))
        return out._getvalue()
    return ret(arena, offset, shape, dtype), codegen


@intrinsic
def call_step(typingctx, address, prog, arena, pc):
    """address(prog.data, arena.data, pc): a call of a step function (STEP_SIG) by its address."""
    def codegen(context, builder, sig, args):
        addr, p, a, counter = args
        p_data = make_array(sig.args[1])(context, builder, p).data
        a_data = make_array(sig.args[2])(context, builder, a).data
        fnty = ir.FunctionType(ir.IntType(64), [p_data.type, a_data.type, ir.IntType(64)])
        return builder.call(builder.inttoptr(addr, fnty.as_pointer()), [p_data, a_data, counter])
    return types.int64(address, prog, arena, pc), codegen


@njit(cache=True, nogil=True)
def run(prog, arena, steps, pc, end):
    """Runs the program from pc to end; steps: int64 addresses of the step functions by opcode.
    A step whose kernel raised returns 0 (a cfunc prints the exception and returns its type's zero):
    the run stops with an error instead of going on with what the kernel left unwritten."""
    while pc < end:
        nxt = call_step(steps[prog[pc]], prog, arena, pc)
        if nxt <= pc:
            raise RuntimeError("a kernel of the whole-plan program raised (printed above)")
        pc = nxt
