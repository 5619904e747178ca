"""Importers for ONNX's ScatterElements (and the deprecated Scatter), ScatterND and TopK as the IR ops of
mrt.float_ops.scatter (rules: mrt.quantize.rules_scatter), on whole tensors (mrt.onnx_import.forms), so every ONNX
axis, axis 0 included, may be the one they work on. Constant or computed indices alike: the quantizer folds the
0/1 flags of constant ones into constants."""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where
from mrt.onnx_import.forms import WHOLE, form, set_form, stored
from mrt.onnx_import.ops_index import MAX_TAKE, _whole


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _onnx_axis(ctx, node, attrs, default):
    """The node's `axis` on its first input's ONNX axes: the whole-tensor import (one_sample.py) gave an
    activation's axis + 1 where it was not negative."""
    x, axis = node.input[0], attrs.get("axis", default)
    rank = len(ctx.onnx_shape(x, node))
    if not ctx.is_const(x) and form(ctx, x) is WHOLE and axis >= 0:
        axis -= 1
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise UnsupportedOp(f"{where(node)}: axis {attrs.get('axis', default)} out of range for rank {rank}")
    return axis


def _integer(ctx, node) -> int:
    return int(node.output[0] in ctx.integer_tensors)


def _check_size(node, products):
    if products > MAX_TAKE:
        raise UnsupportedOp(f"{where(node)}: a scatter by indices compares each index with every position along "
                            f"its axis: {products} products, over {MAX_TAKE}")


def scatter_elements(ctx, node, attrs):
    """ScatterElements(data, indices, updates; axis, reduction) as scatter_along on whole tensors."""
    data, idx, upd = node.input
    reduction = _text(attrs.get("reduction", "none"))
    axis = _onnx_axis(ctx, node, attrs, 0)
    d, s, u = (ctx.onnx_shape(n, node) for n in node.input)
    if len(s) != len(d) or s != u or any(q != n for a, (q, n) in enumerate(zip(s, d)) if a != axis):
        raise UnsupportedOp(f"{where(node)}: indices {list(s)} and updates {list(u)} for data {list(d)} on axis "
                            f"{axis}: supported where they match the data off the axis")
    _check_size(node, math.prod(s) * d[axis])
    ctx.emit("scatter_along", [_whole(ctx, node, n) for n in node.input],
             {"axis": axis + 1, "reduction": reduction, "integer": _integer(ctx, node)}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def scatter_nd(ctx, node, attrs):
    """ScatterND(data, indices, updates; reduction) as scatter_nd on whole tensors."""
    data, idx, upd = node.input
    reduction = _text(attrs.get("reduction", "none"))
    d, s, u = (ctx.onnx_shape(n, node) for n in node.input)
    q = s[-1] if s else 0
    if not 1 <= q <= len(d) or tuple(u) != (*s[:-1], *d[q:]):
        raise UnsupportedOp(f"{where(node)}: indices {list(s)} and updates {list(u)} do not fit data {list(d)}")
    if len(s) < 2:
        raise UnsupportedOp(f"{where(node)}: indices of one axis (one index row) write one slice: CVM needs the "
                            "rows on an axis of their own")
    _check_size(node, math.prod(u) * math.prod(d[:q]))
    ctx.emit("scatter_nd", [_whole(ctx, node, n) for n in node.input],
             {"reduction": reduction, "integer": _integer(ctx, node)}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def top_k(ctx, node, attrs):
    """TopK(x, k; axis, largest, sorted): one IR top_k per output it defines (values, indices), sorted (ONNX's
    sorted=0 allows any order, sorted is one)."""
    attrs.get("sorted", 1)
    if len(node.input) > 1:
        k = int(np.asarray(ctx.const(node.input[1], node, "TopK k")).reshape(-1)[0])
    else:
        k = int(attrs.get("k"))
    axis = _onnx_axis(ctx, node, attrs, -1)
    n = ctx.onnx_shape(node.input[0], node)[axis]
    if not 1 <= k <= n:
        raise UnsupportedOp(f"{where(node)}: k {k} for an axis of {n} entries (CVM has no empty tensors)")
    x, largest = stored(ctx, node.input[0], node, WHOLE), int(attrs.get("largest", 1))
    for k_out, out in enumerate(node.output):
        if out:
            ctx.emit("top_k", [x], {"axis": axis + 1, "k": k, "largest": largest, "output": k_out}, node, out=out)
            set_form(ctx, out, WHOLE)


HANDLERS: dict = {"ScatterElements": (scatter_elements, {11, 13, 16, 18}), "Scatter": (scatter_elements, {9}),
                  "ScatterND": (scatter_nd, {11, 13, 16, 18}), "TopK": (top_k, {1, 10, 11, 24})}
