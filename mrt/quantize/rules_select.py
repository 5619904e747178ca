"""Quantization rules for selections along an axis (mrt.float_ops.select): the maximum keeps its input's
scale; argmax is an integer index at scale 1, built from opset-1 ops (max, sub, lut, mul)."""
from __future__ import annotations

import numpy as np

from mrt.quantize.rules import _node_name
from mrt.quantize.state import QT


def reduce_max(qz, node):
    t = qz.narrow(node.inputs[0])
    out = qz.op("max", t.name, axes=list(node.attrs["axes"]), keepdims=int(node.attrs["keepdims"]),
                name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=True)


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


RULES = {"reduce_max": reduce_max, "argmax": argmax}
