"""Quantization rules for comparisons, Where and the element-wise maximum and minimum (mrt.float_ops.unary's
binary table), in opset-1 ops.

Both operands are read at one scale, the finer of their calibrated scales (rules._common: wide bits, nothing
clipped; a constant operand is rounded onto that scale), and subtracted: d = a - b as an integer. For an integer
d, clip(d, 0, 1) is [d > 0] and clip(d + 1, 0, 1) is [d >= 0], so every comparison is a sub, at most one add of
a constant and one or two clips; its result is a 0/1 flag at scale 1, marked exact (an integer output keeps it).
Integer operands (token ids, indices, flags: scale 1) compare exactly; float operands compare as their
quantized values do, so values closer than one step of the common scale may compare equal.
Where(c, a, b) = b + [c != 0] * (a - b) and max(a, b) = b + relu(a - b), min(a, b) = a - relu(a - b), at the
operands' common scale.
"""
from __future__ import annotations

import numpy as np

from mrt.quantize.rules import _common, _const, _node_name, _operand
from mrt.quantize.state import QT


# a constant operand is clipped to +-2^20 steps of the common scale: a mask's "minus infinity" (float32's lowest, as
# exporters write a masked attention bias) stays far below any calibrated value and within int32 after a subtraction
CONST_REACH = 2 ** 20


def _scale(qz, node, *names) -> float:
    """The finer of the activations' calibrated scales (constants do not set it); the output's where every operand
    is a constant (Where choosing between two constants by a computed flag)."""
    return min((qz.scale_of(n) for n in names if _const(qz, n) is None), default=qz.scale_of(node.outputs[0]))


def _at(qz, node, name, scale, like):
    """An operand as an integer tensor name at `scale`: an activation rescaled, a constant rounded onto it."""
    c = _const(qz, name)
    if c is None:
        return _common(qz, node, name, scale).name
    return qz.const(_steps(qz, name, scale, like), dtype="int32")


def _steps(qz, name, scale, like) -> np.ndarray:
    """A constant operand in integer steps of `scale`, clipped to CONST_REACH."""
    c = _operand(qz, _const(qz, name), like).astype(np.float64)
    return np.clip(np.round(c / scale), -CONST_REACH, CONST_REACH).astype(np.int64)


def _operands(qz, node, a, b):
    scale = _scale(qz, node, a, b)
    like = node.outputs[0]  # an activation: a constant of its full rank has a leading 1 for the batch axis
    return _at(qz, node, a, scale, like), _at(qz, node, b, scale, like), scale


def _flag(qz, node, x, y, strict: bool, suffix=""):
    """[x > y] (strict) or [x >= y] as a 0/1 integer tensor name."""
    d = qz.op("sub", x, y, name=f"{_node_name(node)}.d{suffix}")
    if not strict:
        d = qz.op("add", d, qz.const(np.asarray([1])), name=f"{_node_name(node)}.d1{suffix}")
    return qz.op("clip", d, lo=0, hi=1, name=f"{_node_name(node)}{suffix}")


def compare(qz, node) -> QT:
    a, b = node.inputs
    x, y, _ = _operands(qz, node, a, b)
    op = node.op
    if op in ("greater", "greater_equal"):
        out = _flag(qz, node, x, y, strict=op == "greater")
    elif op in ("less", "less_equal"):
        out = _flag(qz, node, y, x, strict=op == "less")
    else:  # equal: [x >= y] - [x > y]
        ge = _flag(qz, node, x, y, strict=False, suffix=".ge")
        gt = _flag(qz, node, x, y, strict=True, suffix=".gt")
        out = qz.op("sub", ge, gt, name=_node_name(node))
    return QT(name=out, scale=np.asarray(1.0), narrow=True, exact=True)


def _nonzero(qz, node, c, suffix=""):
    """[c != 0] as a 0/1 integer tensor name (a flag already is one; a constant is rounded to one)."""
    const = _const(qz, c)
    if const is not None:
        return qz.const((_operand(qz, const, node.outputs[0]) != 0).astype(np.int64), dtype="int32")
    t = qz.q[c]
    if t.exact and qz.interval(t.name)[0] >= 0 and qz.interval(t.name)[1] <= 1:
        return t.name
    q, name = qz.narrow(c).name, f"{_node_name(node)}{suffix}"
    pos = qz.op("clip", q, lo=0, hi=1, name=f"{name}.pos")
    neg = qz.op("clip", qz.op("sub", qz.const(np.asarray([0])), q, name=f"{name}.negc"), lo=0, hi=1,
                name=f"{name}.neg")
    return qz.op("add", pos, neg, name=f"{name}.nonzero")


def logical(qz, node) -> QT:
    """And, Or, Xor of [a != 0] and [b != 0]: a product, a clipped sum, a clipped sum minus the product twice."""
    fa, fb = (_nonzero(qz, node, n, suffix=f".{k}") for k, n in enumerate(node.inputs))
    both = qz.op("mul", fa, fb, name=f"{_node_name(node)}.both")
    if node.op == "and":
        out = both
    else:
        either = qz.op("add", fa, fb, name=f"{_node_name(node)}.sum")
        out = (qz.op("clip", either, lo=0, hi=1, name=_node_name(node)) if node.op == "or" else
               qz.op("sub", either, qz.op("add", both, both, name=f"{_node_name(node)}.twice"), name=_node_name(node)))
    return QT(name=out, scale=np.asarray(1.0), narrow=True, exact=True)


def where(qz, node) -> QT:
    c, a, b = node.inputs
    x, y, scale = _operands(qz, node, a, b)
    flag = _nonzero(qz, node, c)
    if _const(qz, a) is not None and _const(qz, b) is not None:  # two constants: their difference is one
        diff = qz.const(_steps(qz, a, scale, node.outputs[0]) - _steps(qz, b, scale, node.outputs[0]), dtype="int32")
    else:
        diff = qz.op("sub", x, y, name=f"{_node_name(node)}.diff")
    out = qz.op("add", y, qz.op("mul", flag, diff, name=f"{_node_name(node)}.pick"), name=_node_name(node))
    exact = all(qz.q[n].exact for n in (a, b) if _const(qz, n) is None) and scale == 1.0
    return QT(name=out, scale=np.asarray(scale), exact=exact)


def extremum(qz, node) -> QT:
    a, b = node.inputs
    x, y, scale = _operands(qz, node, a, b)
    over = qz.op("relu", qz.op("sub", x, y, name=f"{_node_name(node)}.d"), name=f"{_node_name(node)}.over")
    out = (qz.op("add", y, over, name=_node_name(node)) if node.op == "maximum" else
           qz.op("sub", x, over, name=_node_name(node)))
    return QT(name=out, scale=np.asarray(scale))


RULES: dict = {**{op: compare for op in ("greater", "less", "greater_equal", "less_equal", "equal")},
               "where": where, "maximum": extremum, "minimum": extremum, "and": logical, "or": logical,
               "xor": logical}
