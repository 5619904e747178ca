"""Exact elementwise integer ops with numpy broadcasting: add, sub, mul, relu, clip."""
from __future__ import annotations

import numpy as np

from .. import gas
from ..limits import MAX_CLIP, MIN_CLIP
from .base import TABLE_MONOTONE, Attr, OpDef, broadcast_shapes, clamp, corners, elements, require


def _binary_shape(args, a):
    act_ranks = {len(x.shape) for x in args if not x.is_const}
    require(len(act_ranks) <= 1, "shape.act_rank", "activation operands must have the same rank "
            f"(their batch axes line up), got {[x.shape for x in args]}")
    out = broadcast_shapes(*(x.shape for x in args))
    act_rank = max(len(x.shape) for x in args if not x.is_const)
    require(len(out) == act_rank, "shape.const_rank",
            f"a constant operand has more axes than the activation ({len(out)} > {act_rank})")
    return out


def _unary_shape(args, a):
    return args[0].shape


def _elements_cost(args, a, out):
    return elements(out) * gas.GAS_PER_ELEMENT


def _binary(name, fn, doc, **facts):
    def bound(args, a, out):
        return corners(fn, (args[0].lo, args[0].hi), (args[1].lo, args[1].hi))

    def reference(x, y):
        return fn(x, y)

    return OpDef(name, 2, 2, {}, _binary_shape, bound, _elements_cost, reference, doc=doc, **facts)


ADD = _binary("add", lambda x, y: x + y, "y = a + b")
SUB = _binary("sub", lambda x, y: x - y, "y = a - b")
MUL = _binary("mul", lambda x, y: x * y, "y = a * b", bilinear=True)


def relu_ref(x):
    return np.maximum(x, 0)


RELU = OpDef("relu", 1, 1, {}, _unary_shape, lambda args, a, out: (max(args[0].lo, 0), max(args[0].hi, 0)),
             _elements_cost, relu_ref, activation_inputs=(0,), doc="y = max(x, 0)", table=TABLE_MONOTONE)


def clip_shape(args, a):
    require(MIN_CLIP <= a["lo"] <= a["hi"] <= MAX_CLIP, "attrs.clip",
            f"clip needs {MIN_CLIP} <= lo <= hi <= {MAX_CLIP}, got lo={a['lo']} hi={a['hi']}")
    return args[0].shape


def clip_bound(args, a, out):
    lo, hi = a["lo"], a["hi"]
    return min(max(args[0].lo, lo), hi), min(max(args[0].hi, lo), hi)


def clip_ref(x, *, lo, hi):
    return clamp(x, lo, hi)


CLIP = OpDef("clip", 1, 1, {"lo": Attr("int"), "hi": Attr("int")}, clip_shape, clip_bound, _elements_cost,
             clip_ref, activation_inputs=(0,), doc="y = min(max(x, lo), hi)", table=TABLE_MONOTONE)

OPS = [ADD, SUB, MUL, RELU, CLIP]
