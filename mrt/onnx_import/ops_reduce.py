"""Importers for ONNX reductions over non-batch axes and the padding modes that copy edge values.

ReduceSum and ReduceMax map to IR sum / reduce_max; ReduceMean is a sum times 1/n (a scale, free in
integers); ReduceMin is -max(-x); ReduceSumSquare and ReduceL2 square element-wise first (a table), ReduceL1
takes absolute values; ReduceLogSum is log(sum x) and ReduceLogSumExp m + log(sum exp(x - m)), m the maximum;
GlobalMaxPool is a max over the spatial axes. Pad's reflect and edge modes are concatenations of
one-element slices on each padded axis.
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where
from mrt.onnx_import.ops_shape import _axes, _const_ints, _pick


def _reduce_axes(ctx, node, attrs, full):
    """The reduced axes (from the axes input or attribute), or None for Reduce* with no axes and
    noop_with_empty_axes (the identity)."""
    axes = _const_ints(ctx, node, 1, f"{node.op_type} axes") if len(node.input) > 1 else attrs.get("axes")
    noop = attrs.get("noop_with_empty_axes", 0)
    if not axes:
        if noop:
            return None
        raise UnsupportedOp(f"{where(node)}: reduces every axis, the unit axis too (imported on the whole tensor)")
    return _axes(node, axes, len(full))


def reduction(kind):
    def handler(ctx, node, attrs):
        full = ctx.shape(node.input[0], node)
        axes, keep = _reduce_axes(ctx, node, attrs, full), int(attrs.get("keepdims", 1))
        x, out = ctx.tensor(node.input[0], node), node.output[0]
        if axes is None:
            ctx.emit("identity", [x], {}, node, out=out)
            return
        reduce_attrs = {"axes": tuple(axes), "keepdims": keep}
        if kind == "log_sum_exp":
            _log_sum_exp(ctx, node, x, reduce_attrs, out)
            return
        if kind == "l1":
            x = ctx.emit("abs", [x], {}, node)
        if kind in ("sum_square", "l2"):
            x = ctx.emit("mul", [x, x], {}, node)
        if kind == "min":
            x = ctx.emit("neg", [x], {}, node)
        op = "reduce_max" if kind in ("max", "min") else "sum"
        last = kind in ("sum", "max", "sum_square", "l1")
        value = ctx.emit(op, [x], reduce_attrs, node, out=out if last else None)
        if kind == "mean":
            n = math.prod(full[a] for a in axes)
            ctx.emit("mul", [value, ctx.add_const(f"{out}/inv_n", np.float32(1 / n))], {}, node, out=out)
        elif kind == "min":
            ctx.emit("neg", [value], {}, node, out=out)
        elif kind == "l2":
            ctx.emit("sqrt", [value], {}, node, out=out)
        elif kind == "log_sum":
            ctx.emit("log", [value], {}, node, out=out)
    return handler


def _log_sum_exp(ctx, node, x, reduce_attrs, out):
    """m + log(sum(exp(x - m))), m = max(x): every exp in (0, 1], the sum in [1, n] (no overflow, as LogSoftmax)."""
    m = ctx.emit("reduce_max", [x], {**reduce_attrs, "keepdims": 1}, node)
    e = ctx.emit("exp", [ctx.emit("sub", [x, m], {}, node)], {}, node)
    lg = ctx.emit("log", [ctx.emit("sum", [e], reduce_attrs, node)], {}, node)
    top = m if reduce_attrs["keepdims"] else ctx.emit("reduce_max", [x], reduce_attrs, node)
    ctx.emit("add", [lg, top], {}, node, out=out)


def global_max_pool(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    if len(full) < 3:
        raise UnsupportedOp(f"{where(node)}: input {full} has no spatial axes")
    ctx.emit("reduce_max", [ctx.tensor(node.input[0], node)], {"axes": tuple(range(2, len(full))), "keepdims": 1},
             node, out=node.output[0])


def argmax(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, [attrs.get("axis", 0)], len(full))[0]
    ctx.emit("argmax", [ctx.tensor(node.input[0], node)],
             {"axis": axis, "keepdims": int(attrs.get("keepdims", 1)),
              "select_last_index": int(attrs.get("select_last_index", 0))}, node, out=node.output[0])


def argmin(ctx, node, attrs):
    """ArgMin(x) is ArgMax(-x): the same first (or last) index, ties included."""
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, [attrs.get("axis", 0)], len(full))[0]
    negated = ctx.emit("neg", [ctx.tensor(node.input[0], node)], {}, node)
    ctx.emit("argmax", [negated], {"axis": axis, "keepdims": int(attrs.get("keepdims", 1)),
                                   "select_last_index": int(attrs.get("select_last_index", 0))}, node,
             out=node.output[0])


def pad_by_copies(ctx, node, x, full, pads, mode):
    """Pad `x` in reflect or edge mode: each padded axis becomes a concatenation of slices."""
    rank = len(full)
    value = x
    for a in range(1, rank):
        before, after, n = pads[a], pads[rank + a], full[a]
        if not before and not after:
            continue
        if mode == "reflect" and max(before, after) >= n:
            raise UnsupportedOp(f"{where(node)}: reflect padding {max(before, after)} needs more than {n} values")
        if mode == "reflect":
            order = list(range(before, 0, -1)) + list(range(n)) + list(range(n - 2, n - 2 - after, -1))
        else:
            order = [0] * before + list(range(n)) + [n - 1] * after
        value = _pick(ctx, node, value, a, order)
    ctx.emit("identity", [value], {}, node, out=node.output[0])


HANDLERS = {
    "ReduceSum": (reduction("sum"), {1, 11, 13}),
    "ReduceMean": (reduction("mean"), {1, 11, 13, 18}),
    "ReduceMax": (reduction("max"), {1, 11, 12, 13, 18, 20}),
    "ReduceMin": (reduction("min"), {1, 11, 12, 13, 18, 20}),
    "ReduceSumSquare": (reduction("sum_square"), {1, 11, 13, 18}),
    "ReduceL2": (reduction("l2"), {1, 11, 13, 18}),
    "ReduceL1": (reduction("l1"), {1, 11, 13, 18}),
    "ReduceLogSum": (reduction("log_sum"), {1, 11, 13, 18, 28}),  # 28 only drops integer types
    "ReduceLogSumExp": (reduction("log_sum_exp"), {1, 11, 13, 18, 28}),  # 28 drops integer types
    "GlobalMaxPool": (global_max_pool, {1, 22}),
    "ArgMax": (argmax, {1, 11, 12, 13}),
    "ArgMin": (argmin, {1, 11, 12, 13}),
}
