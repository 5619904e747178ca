"""Float ops of ONNX's integer arithmetic (mrt.onnx_import.ops_integer; rules in mrt.quantize.rules_integer).

Every IR tensor is float32; these ops read their integer operands rounded to the nearest integer (exact below
2^24) and compute in int64, so the float graph gives ONNX's integer result:

- int_div(a, b): a / b truncated toward zero (ONNX's integer Div); 0 where b == 0 (numpy's; ONNX leaves it
  undefined).
- mod(a, b; fmod, integer): fmod 0 takes the divisor's sign (Python's %), fmod 1 the dividend's (C's fmod);
  0 where b == 0. With integer 0 the operands are floats and the result is numpy's float mod (NaN where
  b == 0, which calibration refuses; the integer model gives 0 there).
- bit_shift(x, s; direction, bits, signed): LEFT is x * 2^s wrapped to the type's `bits` (two's complement
  when `signed`), RIGHT is floor(x / 2^s) (an arithmetic shift); a shift below 0 or of `bits` or more gives
  what the sign fill alone gives: -1 for RIGHT of a negative x, else 0. bits 0: a type MRT was not told, where
  LEFT does not wrap (the quantizer refuses it unless no product can reach 2^31).
- bitwise(a[, b]; op, bits, signed): ONNX's BitwiseAnd / Or / Xor (op 'and', 'or', 'xor') of two's-complement
  integers, and BitwiseNot (op 'not', one input): -a - 1 when `signed`, else 2^bits - 1 - a (bits 0: not known,
  which the importer refuses for an unsigned Not).
- take_along(x, indices; axis, integer): numpy's take_along_axis (ONNX's GatherElements; Gather is one with the
  data reshaped), other axes broadcast; a negative index counts from the end, one out of range gives 0. integer:
  x holds integers (the quantizer keeps them exact).
"""
from __future__ import annotations

import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.scatter import SCATTER
from mrt.float_ops.shapes import broadcast

F32 = np.float32
DIRECTIONS = ("LEFT", "RIGHT")
BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _ints(*xs):
    return [np.rint(np.asarray(x, np.float64)).astype(np.int64) for x in xs]


def _binary_shape(name):
    def rule(a, b, **attrs):
        return broadcast(a, b, op=name)
    return rule


def int_div(a, b):
    a, b = _ints(a, b)
    safe = np.where(b == 0, 1, b)
    return (np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(b)).astype(F32)


def mod(a, b, *, fmod, integer):
    if not integer:
        with np.errstate(all="ignore"):
            return (np.fmod(a, b) if fmod else np.mod(a, b)).astype(F32)
    a, b = _ints(a, b)
    safe = np.where(b == 0, 1, b)
    r = np.sign(a) * (np.abs(a) % np.abs(safe)) if fmod else a - np.floor_divide(a, safe) * safe
    return np.where(b == 0, 0, r).astype(F32)


def mod_shape(a, b, *, fmod, integer):
    if fmod not in (0, 1) or integer not in (0, 1):
        raise GraphError(f"mod: fmod {fmod!r} and integer {integer!r} must be 0 or 1")
    return broadcast(a, b, op="mod")


def wrap(v, bits: int, signed: bool):
    """v as a `bits`-wide integer type holds it: modulo 2^bits, in [-2^(bits-1), 2^(bits-1)) when signed."""
    v = np.asarray(v, np.int64) & ((1 << bits) - 1)
    return v - (v >> (bits - 1) << bits) if signed else v


def bit_shift(x, s, *, direction, bits, signed):
    x, s = _ints(x, s)
    out_of_range = (s < 0) | (s >= bits) if bits else s < 0
    k = np.where(out_of_range, 0, s)
    if direction == "RIGHT":
        y = np.where(out_of_range, np.where(x < 0, -1, 0), x >> np.minimum(k, 62))
    else:
        y = np.where(out_of_range, 0, x << np.minimum(k, 62))
        y = wrap(y, bits, signed) if 0 < bits < 63 else y
    return y.astype(F32)


def bit_shift_shape(x, s, *, direction, bits, signed):
    if direction not in DIRECTIONS or not 0 <= bits <= 64 or signed not in (0, 1):
        raise GraphError(f"bit_shift: direction {direction!r} must be one of {DIRECTIONS}, bits {bits!r} in "
                         f"0..64, signed {signed!r} 0 or 1")
    return broadcast(x, s, op="bit_shift")


def bitwise(*xs, op, bits, signed):
    xs = _ints(*xs)
    if op == "not":
        return (-xs[0] - 1 if signed else (1 << bits) - 1 - xs[0]).astype(F32)
    return BITWISE[op](*xs).astype(F32)


def bitwise_shape(*xs, op, bits, signed):
    if len(xs) != (1 if op == "not" else 2) or op not in (*BITWISE, "not") or not 0 <= bits <= 64:
        raise GraphError(f"bitwise: op {op!r} one of {(*BITWISE, 'not')} ('not' of one input, the others of two), "
                         f"bits {bits!r} in 0..64")
    return xs[0] if len(xs) == 1 else broadcast(*xs, op="bitwise")


def take_along(x, idx, *, axis, integer):
    n = x.shape[axis]
    (i,) = _ints(idx)
    i = np.where(i < 0, i + n, i)
    inside = (i >= 0) & (i < n)
    picked = np.take_along_axis(np.asarray(x, F32), np.where(inside, i, 0), axis=axis)
    return np.where(inside, picked, F32(0)).astype(F32)


def take_along_shape(x, idx, *, axis, integer):
    if len(x) != len(idx) or not 0 < axis < len(x) or integer not in (0, 1):
        raise GraphError(f"take_along: data {x} and indices {idx} of one rank, axis {axis} past the batch axis, "
                         f"integer {integer!r} 0 or 1")
    others = broadcast(x[:axis] + (1,) + x[axis + 1:], idx[:axis] + (1,) + idx[axis + 1:], op="take_along")
    return others[:axis] + (idx[axis],) + others[axis + 1:]


# name: (run, shape rule, attribute names, (min inputs, max inputs))
INTEGER: dict = {
    "int_div": (int_div, _binary_shape("int_div"), (), (2, 2)),
    "mod": (mod, mod_shape, ("fmod", "integer"), (2, 2)),
    "bit_shift": (bit_shift, bit_shift_shape, ("direction", "bits", "signed"), (2, 2)),
    "take_along": (take_along, take_along_shape, ("axis", "integer"), (2, 2)),
    "bitwise": (bitwise, bitwise_shape, ("op", "bits", "signed"), (1, 2)),
    **SCATTER,
}
