"""Quantization rules for reductions and selections along an axis (mrt.float_ops.select): a sum and the maximum keep their
input's scale (a reduction to one number per sample gives one entry: CVM has no rank-0 sample); argmax is an integer index at scale 1, built from opset-1 ops (max, sub, lut, mul)."""
from __future__ import annotations

import numpy as np

from mrt.quantize.rules import _node_name
from mrt.quantize.state import QT


def _removes_every_axis(qz, node, t: str) -> bool:
    return not node.attrs["keepdims"] and len(set(node.attrs["axes"])) == len(qz.shape_of(t))


def reduce_axes(qz, node, t: str) -> dict:
    """The CVM attributes of a reduction over node.attrs' axes of `t`: one that would remove every per-sample
    axis (a loss summed to one number per sample) keeps them, and `one_entry` reshapes its result to one
    entry (CVM has no rank-0 sample)."""
    every = _removes_every_axis(qz, node, t)
    return {"axes": list(node.attrs["axes"]), "keepdims": int(node.attrs["keepdims"] or every)}


def one_entry(qz, name: str, node, t: str) -> str:
    """A reduction's result `name` (of input `t`) as one entry where reduce_axes kept every axis."""
    if not _removes_every_axis(qz, node, t) or len(qz.shape_of(name)) == 1:
        return name
    return qz.op("reshape", name, shape=[1], name=f"{_node_name(node)}.one")


def sum_(qz, node):
    t = qz.narrow(node.inputs[0])
    out = qz.op("sum", t.name, **reduce_axes(qz, node, t.name), name=_node_name(node))
    return QT(name=one_entry(qz, out, node, t.name), scale=t.scale)


def reduce_max(qz, node):
    t = qz.narrow(node.inputs[0])
    out = qz.op("max", t.name, **reduce_axes(qz, node, t.name), name=_node_name(node))
    return QT(name=one_entry(qz, out, node, t.name), scale=t.scale, narrow=True)


def argmax(qz, node):
    """The index of the maximum in integers: e = [x == max(x)] (a table of x - max, 1 only at 0), then the
    largest of e * (L - i) is L - (first index of the maximum), so index = L - that; with
    select_last_index the weights are i + 1 and index = that - 1. Scale 1: the integer is the index."""
    axis, a = node.attrs["axis"], node.attrs
    t = qz.narrow(node.inputs[0])
    lo, hi = qz.interval(t.name)
    n, name = qz.shape_of(t.name)[axis], _node_name(node)
    mx = qz.op("max", t.name, axes=[axis], keepdims=1, name=f"{name}.max")
    d = qz.op("sub", t.name, mx, name=f"{name}.shifted")
    is_max = qz.op("lut", d, qz.const((np.arange(lo - hi, hi - lo + 1) == 0).astype(np.int64)), offset=lo - hi,
                   name=f"{name}.is_max")
    shape = [1] * len(qz.shape_of(t.name))
    shape[axis] = n
    i = np.arange(n).reshape(shape)
    weights = i + 1 if a["select_last_index"] else n - i
    best = qz.op("max", qz.op("mul", is_max, qz.const(weights), name=f"{name}.weighted"), axes=[axis],
                 keepdims=int(a["keepdims"]), name=f"{name}.best")
    out = (qz.op("sub", best, qz.const([1]), name=name) if a["select_last_index"] else
           qz.op("sub", qz.const([n]), best, name=name))
    return QT(name=out, scale=np.asarray(1.0), narrow=True, exact=True)


RULES = {"sum": sum_, "reduce_max": reduce_max, "argmax": argmax}
