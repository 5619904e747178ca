"""Quantization rules for mrt.float_ops.scatter, in opset-1 ops (mrt.quantize.int_arith), exact on integers.

Scatter: the index i of every update (n added where negative) is compared with every position k of its axis, the
flags f = [i == k] = 1 - sign(i - k)^2 on a new axis after it (constants where the indices are: numpy's flags), and
each output position combines the updates whose flag is 1 with the data there:

- none: x * (1 - hit) + sum(f' * u), f' the flag of the last update hitting a position (its number j + 1 is the
  largest of f * (j + 1));
- add: x + sum(f * u);  max: max(x, max(u - (1 - f) * big)), big past both ranges; min the same on -x and -u;
- mul: x * prod(1 + f * (u - 1)), the product one update at a time. Floats read u at a power-of-two scale 2^-q
  (so 1 is 2^q exactly) and round each product back to it with requant's shift.

Integers (an integer result) are read at scale 1 and come out exact. Float none, add, max and min read data and
updates at one scale (the larger calibrated range over the activation bits), so the result is their integers.

TopK: k rounds of: m = max(x), the first position holding it (the largest of [x == m] * (n - position) is n minus
that position), then that position masked below the range (clipped to lo - 1, under every entry left). Values are
x's integers (its scale), indices integers at scale 1.
"""
from __future__ import annotations

import math

import numpy as np

from cvm.arith import bits_max
from cvm.limits import MAX_BITS
from mrt.quantize.axes import _axis as per_sample_axis
from mrt.quantize.int_arith import Ints, activation
from mrt.quantize.rules import _const
from mrt.quantize.state import QT

MUL_BITS = 16  # a float scatter-mul reads its updates at 2^-q with their largest magnitude within 2^(MUL_BITS - 1)
ONE = np.asarray([1])


def _operand(ints, fname, scale=1.0):
    """A scatter input at `scale`: a constant's per-sample values (the import gave it a leading 1), rounded."""
    c = _const(ints.qz, fname)
    if c is None:
        return ints.operand(fname, scale)
    c = np.asarray(c, np.float64)
    return np.round(c.reshape(c.shape[1:]) / scale).astype(np.int64)


def _reach(qz, fname) -> float:
    c = _const(qz, fname)
    return float(np.abs(c).max()) if c is not None and c.size else float(qz.thr.get(fname, 0.0))


def _operands(qz, ints, node):
    """(x, i, u, scale of x, scale of u) of a scatter node (module docstring)."""
    a = node.attrs
    data, idx, upd = node.inputs
    if a["integer"]:
        scales = (1.0, 1.0)
    elif a["reduction"] == "mul":
        q = MUL_BITS - 1 - max(0, math.ceil(math.log2(max(_reach(qz, upd), 1.0))))
        scales = ((_reach(qz, data) or 1.0) / bits_max(qz.act_bits(data)), 2.0 ** -q)
    else:
        s = (max(_reach(qz, data), _reach(qz, upd)) or 1.0) / bits_max(qz.act_bits(data))
        scales = (s, s)
    return _operand(ints, data, scales[0]), _operand(ints, idx), _operand(ints, upd, scales[1]), *scales


def _shift(node, su) -> int:
    """q of a float scatter-mul's update scale 2^-q; 0 for every other."""
    return round(-math.log2(su)) if node.attrs["reduction"] == "mul" else 0


def _from_end(ints, i, n):
    """i + n where i < 0."""
    return ints.op("add", i, ints.mul(ints.op("clip", ints.op("sub", np.asarray([0]), i), lo=0, hi=1),
                                      np.asarray([n])))


def _grown(ints, v, axis):
    shape = ints.shape(v)
    return ints.op("reshape", v, shape=(*shape[:axis], 1, *shape[axis:]))


def _last(ints, flags, axis):
    """The flags of the last update hitting each position: j + 1 equal to the largest of f * (j + 1)."""
    shape = ints.shape(flags)
    w = np.arange(1, shape[axis] + 1).reshape((shape[axis],) + (1,) * (len(shape) - axis - 1))
    return ints.equal(ints.op("max", ints.mul(flags, w), axes=[axis], keepdims=1), w)


def _extreme(ints, x, u, flags, axis, sign):
    """max(x, max over hits of u) for sign 1; min for sign -1 (the max of the negated values, negated)."""
    s = np.asarray([sign])
    xs, us = ints.mul(x, s), ints.mul(u, s)
    big = np.asarray([ints.reach(xs) + ints.reach(us) + 1])
    masked = ints.op("sub", us, ints.mul(ints.op("sub", ONE, flags), big))
    return ints.mul(ints.maximum(xs, ints.op("max", masked, axes=[axis], keepdims=0)), s)


def _product(ints, x, u, flags, axis, q):
    """x * prod over hits of u, u at scale 2^-q: the result at x's scale times 2^-q."""
    one = np.asarray([1 << q])
    factors = ints.op("add", ints.mul(flags, ints.op("sub", u, one)), one)
    shape = ints.shape(factors)
    p = None
    for j in range(shape[axis]):
        starts = [j if a == axis else 0 for a in range(len(shape))]
        ends = [j + 1 if a == axis else d for a, d in enumerate(shape)]
        f = ints.op("slice", factors, starts=starts, ends=ends, steps=[1] * len(shape))
        p = f if p is None else ints.op("mul", p, f)
        if q and j:
            p = ints.op("requant", p, ONE, shift=q, bits=MAX_BITS)
    return ints.mul(x, ints.op("reshape", p, shape=(*shape[:axis], *shape[axis + 1:])))


def _scatter(ints, x, i, u, axis, reduction, q=0):
    """The scattered integers (module docstring); x of the output's shape, i broadcasting to u."""
    n = ints.shape(x)[axis]
    i, u = _grown(ints, _from_end(ints, i, n), axis + 1), _grown(ints, u, axis + 1)
    k = np.arange(n).reshape((n,) + (1,) * (len(ints.shape(x)) - axis - 1))
    flags = ints.equal(i, k)
    if reduction in ("max", "min"):
        return _extreme(ints, x, u, flags, axis, 1 if reduction == "max" else -1)
    if reduction == "mul":
        return _product(ints, x, u, flags, axis, q)
    if reduction == "none":
        flags = _last(ints, flags, axis)
    picked = ints.op("sum", ints.mul(flags, u), axes=[axis], keepdims=0)
    if reduction == "add":
        return ints.op("add", x, picked)
    return ints.op("add", ints.mul(x, ints.op("sub", ONE, ints.op("sum", flags, axes=[axis], keepdims=0))), picked)


def _result(ints, node, y, sx, su):
    if node.attrs["reduction"] == "mul" and not node.attrs["integer"]:
        return QT(name=activation(ints, y), scale=np.asarray(sx * su))
    return QT(name=activation(ints, y), scale=np.asarray(sx), exact=bool(node.attrs["integer"]))


def scatter_along(qz, node) -> QT:
    ints = Ints(qz, node)
    x, i, u, sx, su = _operands(qz, ints, node)
    y = _scatter(ints, x, i, u, per_sample_axis(node.attrs["axis"]), node.attrs["reduction"], _shift(node, su))
    return _result(ints, node, y, sx, su)


def scatter_nd(qz, node) -> QT:
    """ScatterND as scatter_along on axis 0 of the data as (positions, rest), each index row's flat position
    (its entries, n added where negative, times the strides) the index of its row of updates."""
    ints = Ints(qz, node)
    x, i, u, sx, su = _operands(qz, ints, node)
    s, ishape = ints.shape(x), ints.shape(i)
    depth = ishape[-1]
    dims = np.asarray(s[:depth])
    i = ints.op("add", i, ints.mul(ints.op("clip", ints.op("sub", np.asarray([0]), i), lo=0, hi=1), dims))
    strides = np.asarray([math.prod(s[d + 1:depth]) for d in range(depth)])
    flat = ints.op("sum", ints.mul(i, strides), axes=[len(ishape) - 1], keepdims=1)
    rows, positions = math.prod(ishape[:-1]), math.prod(s[:depth])
    flat = ints.op("reshape", flat, shape=(rows, 1))
    x2 = ints.op("reshape", x, shape=(positions, math.prod(s[depth:])))
    u2 = ints.op("reshape", u, shape=(rows, math.prod(s[depth:])))
    y = _scatter(ints, x2, flat, u2, 0, node.attrs["reduction"], _shift(node, su))
    return _result(ints, node, ints.op("reshape", y, shape=s), sx, su)


def top_k(qz, node) -> QT:
    """Values or indices of the k largest (smallest: of -x) entries (module docstring)."""
    a, ints = node.attrs, Ints(qz, node)
    axis, k = per_sample_axis(a["axis"]), a["k"]
    t = qz.q[node.inputs[0]]
    t = t if t.exact else qz.narrow(node.inputs[0])
    sign = np.asarray([1 if a["largest"] else -1])
    x = ints.mul(t.name, sign)
    lo, hi = qz.interval(activation(ints, x))
    shape = ints.shape(x)
    n = shape[axis]
    weights = n - np.arange(n).reshape((n,) + (1,) * (len(shape) - axis - 1))
    found = []
    for r in range(k):
        m = ints.op("max", x, axes=[axis], keepdims=1)
        score = ints.mul(ints.op("sub", ONE, ints.op("clip", ints.op("sub", m, x), lo=0, hi=1)), weights)
        best = ints.op("max", score, axes=[axis], keepdims=1)
        found.append(ints.mul(m, sign) if a["output"] == 0 else ints.op("sub", np.asarray([n]), best))
        if r + 1 < k:
            first = ints.op("sub", ONE, ints.op("clip", ints.op("sub", best, score), lo=0, hi=1))
            x = ints.op("clip", ints.op("sub", x, ints.mul(first, np.asarray([hi - lo + 1]))), lo=lo - 1, hi=hi)
    y = found[0] if k == 1 else ints.op("concat", *found, axis=axis)
    if a["output"]:
        return QT(name=activation(ints, y), scale=np.asarray(1.0), exact=True)
    return QT(name=activation(ints, y), scale=np.asarray(t.scale), exact=t.exact)


RULES: dict = {"scatter_along": scatter_along, "scatter_nd": scatter_nd, "top_k": top_k}
