"""Float ops that write updates into a tensor at indices, and TopK (mrt.onnx_import.ops_scatter; rules in
mrt.quantize.rules_scatter). Indices are read rounded to the nearest integer; a negative index counts from the end,
one still out of range writes nothing (ONNX calls it an error). On full arrays, batch axis 0 included:

- scatter_along(x, indices, updates; axis, reduction, integer): ONNX's ScatterElements. The indices broadcast to
  the updates' shape, which is x's off `axis`. reduction 'none' writes the last of
  duplicate indices (ONNX leaves it undefined; its reference and onnxruntime write in order); 'add', 'mul', 'max',
  'min' combine every update hitting a position with x's value there.
- scatter_nd(x, indices, updates; reduction, integer): ONNX's ScatterND: each row of the indices' last axis (q
  entries) picks a slice x[i_1, ..., i_q] that takes the update of that row.
- top_k(x; axis, k, largest, output): the k largest (smallest) entries along `axis` in order, ties by the lower
  index first (ONNX's sorted=1); output 0 gives the values, 1 their indices.
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import GraphError

F32 = np.float32
REDUCTIONS = ("none", "add", "mul", "max", "min")
AT = {"add": np.add.at, "mul": np.multiply.at, "max": np.maximum.at, "min": np.minimum.at}


def _rint(x):
    return np.rint(np.asarray(x, np.float64)).astype(np.int64)


def scatter_along(x, idx, upd, *, axis, reduction, integer):
    u = np.asarray(upd, np.float64)
    u = np.broadcast_to(u, (x.shape[0], *u.shape[1:]))  # a constant's batch of one, for every sample
    n = x.shape[axis]
    i = np.broadcast_to(_rint(idx), u.shape)
    i = np.where(i < 0, i + n, i)
    inside = (i >= 0) & (i < n)
    where = list(np.indices(u.shape))
    where[axis] = i
    at = tuple(w[inside] for w in where)
    out = np.array(x, np.float64)
    if reduction == "none":
        out[at] = u[inside]  # numpy writes a repeated position's last value
    else:
        AT[reduction](out, at, u[inside])
    return out.astype(F32)


def scatter_along_shape(x, idx, upd, *, axis, reduction, integer):
    if (reduction not in REDUCTIONS or integer not in (0, 1) or not 0 < axis < len(x) or len(upd) != len(x)
            or len(idx) != len(x) or any(u != d for a, (u, d) in enumerate(zip(upd[1:], x[1:]), 1) if a != axis)
            or any(i not in (1, u) for i, u in zip(idx[1:], upd[1:]))):
        raise GraphError(f"scatter_along: data {x}, indices {idx} broadcasting to updates {upd} of one rank, the "
                         f"updates within the data off axis {axis}; reduction {reduction!r} one of {REDUCTIONS}")
    return x


def scatter_nd(x, idx, upd, *, reduction, integer):
    s, q = x.shape[1:], idx.shape[-1]
    i = _rint(idx)
    dims = np.asarray(s[:q])
    i = np.where(i < 0, i + dims, i)
    strides = np.asarray([math.prod(s[d + 1:q]) for d in range(q)], np.int64)
    flat = np.where(((i >= 0) & (i < dims)).all(-1), (i * strides).sum(-1), -1)  # -1: out of range, no hit
    rows = math.prod(idx.shape[1:-1])
    out = scatter_along(np.reshape(x, (x.shape[0], math.prod(s[:q]), -1)), flat.reshape(-1, rows, 1),
                        np.reshape(upd, (upd.shape[0], rows, -1)), axis=1, reduction=reduction, integer=integer)
    return out.reshape(x.shape)


def scatter_nd_shape(x, idx, upd, *, reduction, integer):
    q = idx[-1] if len(idx) > 1 else 0
    if reduction not in REDUCTIONS or not 1 <= q <= len(x) - 1 or tuple(upd[1:]) != (*idx[1:-1], *x[1 + q:]):
        raise GraphError(f"scatter_nd: data {x}, indices {idx} and updates {upd} do not fit ONNX's ScatterND, or "
                         f"reduction {reduction!r} is not one of {REDUCTIONS}")
    return x


def top_k(x, *, axis, k, largest, output):
    order = np.argsort(-np.asarray(x, np.float64) if largest else x, axis=axis, kind="stable")
    order = np.take(order, np.arange(k), axis=axis)
    return (np.take_along_axis(np.asarray(x, F32), order, axis=axis) if output == 0 else order).astype(F32)


def top_k_shape(x, *, axis, k, largest, output):
    if not 0 < axis < len(x) or not 1 <= k <= x[axis] or largest not in (0, 1) or output not in (0, 1):
        raise GraphError(f"top_k: axis {axis} past the batch axis of {x}, k {k} from 1 to the axis' size, "
                         f"largest {largest!r} and output {output!r} 0 or 1")
    return x[:axis] + (k,) + x[axis + 1:]


# name: (run, shape rule, attribute names, (min inputs, max inputs))
SCATTER: dict = {
    "scatter_along": (scatter_along, scatter_along_shape, ("axis", "reduction", "integer"), (3, 3)),
    "scatter_nd": (scatter_nd, scatter_nd_shape, ("reduction", "integer"), (3, 3)),
    "top_k": (top_k, top_k_shape, ("axis", "k", "largest", "output"), (1, 1)),
}
