"""Quantization rules for ONNX's integer arithmetic (mrt.float_ops.integer), in opset-1 ops, exact on integers.

An integer operand is read at scale 1 (an exact tensor as it is; any other rounded to the integer it stands
for, exact while its float error stays below one half; a constant rounded). CVM's one division rounds to
nearest, div(a, e) = floor((2a + e) / (2e)) for e >= 1, so the floor of n / d for d >= 1 is
div(2n - d, 2d) = floor((4n - 2d + 2d) / (4d)). Signs are flags: sign(x) = clip(x, -1, 1) on integers and
|x| = x * sign(x); a divisor's magnitude is clipped to 1 or more, so the division is proven safe, and a zero
divisor (its sign 0) gives 0 as numpy does:

- int_div: trunc(x / d) = sign(x) * sign(d) * floor(|x| / |d|);
- mod, fmod 0: sign(d) * floor_mod(x * sign(d), |d|); fmod 1: sign(x) * floor_mod(|x|, |d|), with
  floor_mod(n, e) = n - floor(n / e) * e.

A float mod (integer 0) is the integer mod of both operands at one fine scale (16 bits over the larger
range): as exact as the operands' rounding, like comparisons of floats (rules_compare).
Bitwise ops read bits as floor(u / 2^j) - 2 floor(u / 2^(j+1)) of u = x modulo 2^k (bitwise).
A node whose integers may leave int32 (the verifier proves every interval) is refused with a QuantizeError.
"""
from __future__ import annotations

import numpy as np

from cvm.arith import bits_max
from cvm.limits import MAX_BITS
from mrt.quantize import rules_scatter
from mrt.quantize.axes import _axis as per_sample_axis
from mrt.quantize.int_arith import Ints, activation
from mrt.quantize.rules import _const, _operand
from mrt.quantize.state import QT, QuantizeError

FLOAT_MOD_BITS = 16  # a float mod's common scale: the larger operand range over 2^15 - 1 steps
TABLE_BITS = 16  # a float constant read by take_along: its largest magnitude over 2^15 - 1 steps
MAX_WRAP_BITS = 30  # a wrap to 2^bits subtracts multiples of 2^bits, an int32 constant
MAX_DIVISOR_BITS = 29  # a right shift by up to k bits divides by 2^k with div(2x - 2^k, 2^(k+1)), int32 constants


def int_div(qz, node) -> QT:
    ints = Ints(qz, node)
    x, d = (ints.operand(n) for n in node.inputs)
    sx, ax = ints.magnitude(x)
    sd, ad = ints.divisor(d)
    q = ints.mul(ints.floor_div(ax, ad), ints.mul(sx, sd))
    return QT(name=activation(ints, q), scale=np.asarray(1.0), exact=True)


def _float_scale(qz, node) -> float:
    """The common scale of a float mod's operands: the larger range over FLOAT_MOD_BITS."""
    reach = [float(np.abs(c).max()) if (c := _const(qz, n)) is not None and c.size else float(qz.thr.get(n, 0.0))
             for n in node.inputs]
    return (max(reach) or 1.0) / bits_max(FLOAT_MOD_BITS)


def mod(qz, node) -> QT:
    integer = bool(node.attrs["integer"])
    scale = 1.0 if integer else _float_scale(qz, node)
    ints = Ints(qz, node)
    x, d = (ints.operand(n, scale) for n in node.inputs)
    sd, ad = ints.divisor(d)
    if node.attrs["fmod"]:
        sx, ax = ints.magnitude(x)
        r = ints.mul(ints.floor_mod(ax, ad), sx)
    else:
        r = ints.mul(ints.floor_mod(ints.mul(x, sd), ad), sd)
    return QT(name=activation(ints, r), scale=np.asarray(scale), exact=integer)


def _data(qz, ints, fname, integer):
    """The values take_along reads: (integers, their scale, exact). An integer tensor at scale 1; a float
    activation at its activation bits; a float constant at TABLE_BITS over its largest magnitude."""
    c = _const(qz, fname)
    if integer:
        return ints.operand(fname), 1.0, True
    if c is None:
        t = qz.narrow(fname)
        return t.name, float(t.scale), False
    c = np.asarray(_operand(qz, c, ints.node.outputs[0]), np.float64)
    scale = (float(np.abs(c).max()) or 1.0) / bits_max(TABLE_BITS)
    return np.round(c / scale).astype(np.int64), scale, False


def take_along(qz, node) -> QT:
    """y = sum over k of x[k on axis] * [i == k], i the index with n added where negative: the flags
    1 - sign(i - k)^2 on a new axis after `axis` (x gets a unit axis before it), one nonzero term per output, so
    the result keeps x's integers and scale exactly."""
    axis, ints = per_sample_axis(node.attrs["axis"]), Ints(qz, node)
    x, scale, exact = _data(qz, ints, node.inputs[0], node.attrs["integer"])
    i = ints.operand(node.inputs[1])
    n = ints.shape(x)[axis]
    i = ints.op("add", i, ints.mul(ints.op("clip", ints.op("sub", np.asarray([0]), i), lo=0, hi=1), np.asarray([n])))
    shape = ints.shape(i)
    i = ints.op("reshape", i, shape=(*shape[:axis + 1], 1, *shape[axis + 1:]))
    s = ints.sign(ints.op("sub", i, np.arange(n).reshape((n,) + (1,) * (len(shape) - axis - 1))))
    flags = ints.op("sub", np.asarray([1]), ints.mul(s, s))
    shape = ints.shape(x)
    x = ints.op("reshape", x, shape=(*shape[:axis], 1, *shape[axis:]))
    out = ints.op("sum", ints.mul(flags, x), axes=[axis + 1], keepdims=0)
    return QT(name=activation(ints, out), scale=np.asarray(scale), exact=exact)


def _powers(ints, s, lo, hi, fn):
    """fn(v) for every shift amount v, s clipped to [lo, hi] first: a table lookup of the clipped amount, or
    numpy's values for a constant s."""
    if isinstance(s, np.ndarray):
        return np.vectorize(fn)(np.clip(s, lo, hi)).astype(np.int64)
    c = ints.op("clip", s, lo=lo, hi=hi)
    a, b = ints.qz.interval(c)
    return ints.op("lut", c, ints.qz.const(np.asarray([fn(v) for v in range(a, b + 1)], np.int64)), offset=a)


def _reach(ints, x) -> int:
    return int(np.abs(x).max()) if isinstance(x, np.ndarray) else max(-ints.qz.interval(x)[0], ints.qz.interval(x)[1])


def _wrap(ints, v, bits, signed):
    """v as a `bits`-wide integer type holds it (modulo 2^bits), where its interval may leave that type (an
    unsigned type's values are never negative, whatever the symmetric interval of an input says)."""
    lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)
    if isinstance(v, np.ndarray) or (lo <= ints.qz.interval(v)[0] or not signed) and ints.qz.interval(v)[1] <= hi:
        return v
    if bits > MAX_WRAP_BITS:
        raise QuantizeError(f"node {ints.node.name!r}: a left shift may wrap at {bits} bits, past CVM's int32")
    # requant's rounding shift by `bits` is floor((v + 2^(bits-1)) / 2^bits): the wrap count of a signed v, and of
    # an unsigned one after subtracting 2^(bits-1)
    shifted = v if signed else ints.op("add", v, np.asarray([-(1 << bits - 1)]))
    count = ints.op("requant", shifted, np.asarray([1]), shift=bits, bits=MAX_BITS)
    return ints.op("sub", v, ints.mul(count, np.asarray([1 << bits])))


def bit_shift(qz, node) -> QT:
    """RIGHT: floor(x / p), p = 2^s from a table of s clipped to [-1, K] with 2^K > |x| (a shift below 0 or past
    x's bits is by 2^K: the sign fill, -1 or 0). LEFT: x * f, f = 2^s from a table of s clipped to [-1, bits] (0
    below 0 and from the type's bits on), wrapped to the type (_wrap) where the product's interval leaves it."""
    ints, a = Ints(qz, node), node.attrs
    x, s = (ints.operand(n) for n in node.inputs)
    if a["direction"] == "RIGHT":
        k = _reach(ints, x).bit_length()
        if k > MAX_DIVISOR_BITS:
            raise QuantizeError(f"node {node.name!r}: a right shift of values up to 2^{k} needs divisors past int32")
        y = ints.floor_div(x, _powers(ints, s, -1, k, lambda v: 1 << (k if v < 0 else v)))
    elif not a["bits"]:
        raise QuantizeError(f"node {node.name!r}: a left shift wraps at its type's width, which the import did "
                            "not learn (ONNX's type inference of the model)")
    else:
        bits = a["bits"]
        top = min(_reach(ints, s), bits)
        if top > MAX_WRAP_BITS and _reach(ints, x):
            raise QuantizeError(f"node {node.name!r}: a left shift by up to {top} bits leaves CVM's int32")
        f = _powers(ints, s, -1, min(top, MAX_WRAP_BITS), lambda v: 0 if v < 0 or v >= bits else 1 << v)
        y = _wrap(ints, ints.mul(x, f), bits, a["signed"])
    return QT(name=activation(ints, y), scale=np.asarray(1.0), exact=True)


def _bits(ints, x, k):
    """(the low k bits of x in two's complement on a new last axis, x's sign bit [x < 0]), |x| <= 2^k: the bits
    of u = x + 2^k [x < 0], which is x modulo 2^k, as floor(u / 2^j) - 2 floor(u / 2^(j+1))."""
    sign = ints.mul(ints.op("clip", x, lo=-1, hi=0), np.asarray([-1]))
    u = ints.op("add", x, ints.mul(sign, np.asarray([1 << k])))
    u = ints.op("reshape", u, shape=(*ints.shape(u), 1))
    p = 1 << np.arange(k)
    low = ints.op("sub", ints.floor_div(u, p), ints.mul(ints.floor_div(u, 2 * p), np.asarray([2])))
    return ints.op("clip", low, lo=0, hi=1), sign  # 0 or 1 already: the clip tells the verifier


COMBINE = {"and": lambda ints, a, b: ints.mul(a, b),
           "or": lambda ints, a, b: ints.op("sub", ints.op("add", a, b), ints.mul(a, b)),
           "xor": lambda ints, a, b: ints.mul(*(2 * [ints.op("sub", a, b)]))}


def bitwise(qz, node) -> QT:
    """Not: -x - 1 (signed) or 2^bits - 1 - x. And, Or, Xor: bit by bit on the operands' k low bits and their
    sign bits (_bits; every bit from k up is the sign bit), combined as a * b, a + b - a * b and (a - b)^2, and
    y = sum_j r_j 2^j - r_sign 2^k."""
    ints, a = Ints(qz, node), node.attrs
    xs = [ints.operand(n) for n in node.inputs]
    if a["op"] == "not":
        y = ints.op("sub", np.asarray([-1 if a["signed"] else (1 << a["bits"]) - 1]), xs[0])
        return QT(name=activation(ints, y), scale=np.asarray(1.0), exact=True)
    k = max(1, max(ints.reach(x) for x in xs).bit_length())
    if k > MAX_DIVISOR_BITS:
        raise QuantizeError(f"node {node.name!r}: bitwise {a['op']} of {k}-bit values: CVM's int32 division reads "
                            f"the bits of at most {MAX_DIVISOR_BITS}-bit ones")
    (la, sa), (lb, sb) = (_bits(ints, x, k) for x in xs)
    combine = COMBINE[a["op"]]
    low = ints.mul(combine(ints, la, lb), 1 << np.arange(k))
    low = ints.op("sum", low, axes=[len(ints.shape(low)) - 1], keepdims=0)
    y = ints.op("sub", low, ints.mul(combine(ints, sa, sb), np.asarray([1 << k])))
    return QT(name=activation(ints, y), scale=np.asarray(1.0), exact=True)


RULES: dict = {"int_div": int_div, "mod": mod, "take_along": take_along, "bit_shift": bit_shift, "bitwise": bitwise,
               **rules_scatter.RULES}
