"""Importers for ONNX ops that select or accumulate along fixed positions of one sample's tensor: GatherND with
constant indices (Hugging Face's attention masks pick mask entries this way) and CumSum (RoBERTa's position ids
are the cumulative sum of the mask). Both work on the whole tensor (mrt.onnx_import.forms), so every ONNX axis,
axis 0 included, may be the one they read.
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where
from mrt.onnx_import.forms import WHOLE, form, set_form, stored
from mrt.onnx_import.ops_shape import _pick


def gather_nd(ctx, node, attrs):
    """GatherND(data, indices), batch_dims 0: with constant indices, the indexed rows of data flattened over its
    first k axes (k = indices.shape[-1]), picked by their flat positions; computed indices select by flags."""
    if attrs.get("batch_dims", 0):
        raise UnsupportedOp(f"{where(node)}: batch_dims {attrs.get('batch_dims')} is not supported (0)")
    data = node.input[0]
    s = ctx.onnx_shape(data, node)
    if not ctx.is_const(node.input[1]):
        _gather_nd_computed(ctx, node, s)
        return
    idx = np.asarray(ctx.const(node.input[1], node, "GatherND indices")).astype(np.int64)
    k = idx.shape[-1] if idx.ndim else 0
    if not 1 <= k <= len(s):
        raise UnsupportedOp(f"{where(node)}: indices of depth {k} for data of rank {len(s)}")
    rows = idx.reshape(-1, k)
    rows = np.where(rows < 0, rows + np.asarray(s[:k]), rows)
    if rows.size == 0 or (rows < 0).any() or (rows >= np.asarray(s[:k])).any():
        raise UnsupportedOp(f"{where(node)}: indices out of range for data of shape {list(s)}")
    flat = np.ravel_multi_index(tuple(rows.T), s[:k]).tolist()
    rest = tuple(s[k:])
    x = ctx.emit("reshape", [stored(ctx, data, node, WHOLE)], {"shape": (math.prod(s[:k]), *rest)}, node)
    picked = _pick(ctx, node, x, 1, flat)
    ctx.emit("reshape", [picked], {"shape": (*idx.shape[:-1], *rest)}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def _gather_nd_computed(ctx, node, s):
    """GatherND by computed indices (CLIP's pooled end-of-text token): each index row's flat position f (a dense
    layer by the strides) is compared with every position, and the 0/1 flags select the data's rows by a matrix
    product (one nonzero term per output: exact). Costs one product per position, so it is for short axes."""
    data, idx = node.input
    ishape = ctx.onnx_shape(idx, node)
    k = ishape[-1]
    if not 1 <= k <= len(s):
        raise UnsupportedOp(f"{where(node)}: indices of depth {k} for data of rank {len(s)}")
    positions, rest = math.prod(s[:k]), tuple(s[k:])
    rows = math.prod(ishape[:-1])
    strides = np.asarray([math.prod(s[d + 1:k]) for d in range(k)], np.float32).reshape(1, k)
    flat = ctx.emit("dense", [stored(ctx, idx, node, WHOLE), ctx.add_const(f"{node.output[0]}/strides", strides)],
                    {}, node)
    where_ = ctx.add_const(f"{node.output[0]}/positions", np.arange(positions, dtype=np.float32))
    flags = ctx.emit("reshape", [ctx.emit("equal", [flat, where_], {}, node)], {"shape": (rows, positions)}, node)
    table = (math.prod(rest) if rest else 1)
    if ctx.is_const(data):
        w = np.asarray(ctx.consts[data], np.float32).reshape(positions, table).T
        picked = ctx.emit("dense", [flags, ctx.add_const(f"{node.output[0]}/table", w)], {}, node)
    else:
        values = ctx.emit("reshape", [stored(ctx, data, node, WHOLE)], {"shape": (positions, table)}, node)
        picked = ctx.emit("matmul", [flags, values], {}, node)
    ctx.emit("reshape", [picked], {"shape": (*ishape[:-1], *rest)}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def cumsum(ctx, node, attrs):
    """CumSum along a constant axis: a dense layer by a 0/1 triangular matrix (exact on integers), the axis moved
    last and back by transposes where it is not last."""
    x = node.input[0]
    s = ctx.onnx_shape(x, node)
    axis = int(np.asarray(ctx.const(node.input[1], node, "CumSum axis")).reshape(()))
    axis = axis + len(s) if axis < 0 else axis
    if not 0 <= axis < len(s):
        raise UnsupportedOp(f"{where(node)}: axis {axis} out of range for rank {len(s)}")
    n = s[axis]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")  # w[j, i]: output j reads input i
    take = (i <= j) if not attrs.get("reverse", 0) else (i >= j)
    if attrs.get("exclusive", 0):
        take &= i != j
    w = ctx.add_const(f"{node.output[0]}/triangle", take.T.astype(np.float32))
    t = stored(ctx, x, node, WHOLE)
    last = len(s) - 1
    perm = [0] + [a + 1 for a in range(len(s)) if a != axis] + [axis + 1]
    if axis != last:
        t = ctx.emit("transpose", [t], {"perm": tuple(perm)}, node)
    y = ctx.emit("dense", [t, w], {}, node, out=node.output[0] if axis == last else None)
    if axis != last:
        ctx.emit("transpose", [y], {"perm": tuple(int(p) for p in np.argsort(perm))}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def gather_elements(ctx, node, attrs):
    """GatherElements(data, indices) along `axis`: out[p] = data[p with indices[p] on that axis]. A constant table
    whose axes other than `axis` have size 1 (a position buffer broadcast along them) read by computed indices is an
    embedding lookup (the indices rounded to integers, mrt.quantize.rules_text.embed); anything else is the IR's
    take_along on the data cut to the indices' size along the other axes."""
    data, idx = node.input
    s, d = ctx.onnx_shape(idx, node), ctx.onnx_shape(data, node)
    axis = attrs.get("axis", 0)
    axis = axis + len(d) if axis < 0 else axis
    if len(d) != len(s) or not 0 <= axis < len(d) or any(q > n for a, (q, n) in enumerate(zip(s, d)) if a != axis):
        raise UnsupportedOp(f"{where(node)}: indices of shape {list(s)} for data of shape {list(d)} on axis {axis}")
    if ctx.is_const(data) and not ctx.is_const(idx) and all(n == 1 for a, n in enumerate(d) if a != axis):
        table = np.asarray(ctx.consts[data], np.float32)
        rows = ctx.add_const(f"{node.output[0]}/table", table.reshape(-1, 1))
        looked = ctx.emit("embed", [stored(ctx, idx, node, WHOLE), rows], {}, node)
        ctx.emit("reshape", [looked], {"shape": tuple(s)}, node, out=node.output[0])
    else:
        cut = tuple(n if a == axis else q for a, (q, n) in enumerate(zip(s, d)))
        _take_along(ctx, node, _cut(ctx, node, data, d, cut), _whole(ctx, node, idx), axis, math.prod(s), d[axis],
                    node.output[0])
    set_form(ctx, node.output[0], WHOLE)


MAX_TAKE = 1 << 20  # one sample's products in a selection by computed indices (take_along compares each index
# with every position along its axis)


def _whole(ctx, node, name, shape=None):
    """An input as an IR tensor of the whole ONNX tensor (reshaped to `shape`): an activation stored whole, a
    constant with a leading 1 for the batch axis."""
    if ctx.is_const(name):
        value = np.asarray(ctx.consts[name], np.float32)
        return ctx.add_const(f"{node.output[0]}/{name}", value.reshape(1, *(shape or value.shape)))
    x = stored(ctx, name, node, WHOLE)
    return x if shape is None else ctx.emit("reshape", [x], {"shape": tuple(shape)}, node)


def _cut(ctx, node, data, d, cut):
    """The data cut to the ONNX shape `cut` (each axis from its start)."""
    if ctx.is_const(data):
        value = np.asarray(ctx.consts[data], np.float32)[tuple(slice(0, q) for q in cut)]
        return ctx.add_const(f"{node.output[0]}/table", value.reshape(1, *cut))
    x = stored(ctx, data, node, WHOLE)
    axes = tuple(a + 1 for a in range(len(d)) if cut[a] != d[a])
    if not axes:
        return x
    return ctx.emit("slice", [x], {"axes": axes, "starts": (0,) * len(axes), "ends": tuple(cut[a - 1] for a in axes),
                                   "steps": (1,) * len(axes)}, node)


def _take_along(ctx, node, x, idx, axis, size, n, out):
    """IR take_along of whole tensors x and idx along ONNX axis `axis` (n positions) for an output of `size`
    elements, within MAX_TAKE."""
    if size * n > MAX_TAKE:
        raise UnsupportedOp(f"{where(node)}: selecting by computed indices compares each index with every position "
                            f"along the axis: {size} x {n} products, over {MAX_TAKE}")
    return ctx.emit("take_along", [x, idx], {"axis": axis + 1, "integer": int(node.output[0] in ctx.integer_tensors)},
                    node, out=out)


def gather(ctx, node, attrs):
    """Gather(data, indices) along `axis` by computed indices from an activation (or from a constant along another
    axis than its rows): take_along of data as (pre, n, post) by the flattened indices as (1, Q, 1), reshaped to
    data.shape[:axis] + indices.shape + data.shape[axis + 1:]. Called on either form (one_sample.py), it works on
    whole tensors; the whole-tensor import gives an activation's axis + 1."""
    data, idx = node.input
    d, s = ctx.onnx_shape(data, node), ctx.onnx_shape(idx, node)
    axis = attrs.get("axis", 0)
    if not ctx.is_const(data) and form(ctx, data) is WHOLE:  # one_sample's whole-tensor import: the axis + 1
        axis = (axis + len(d) + 1 if axis < 0 else axis) - 1
    else:
        axis = axis + len(d) if axis < 0 else axis
    if not 0 <= axis < len(d):
        raise UnsupportedOp(f"{where(node)}: axis {attrs.get('axis', 0)} out of range for data of rank {len(d)}")
    out = (*d[:axis], *s, *d[axis + 1:])
    if not out:
        raise UnsupportedOp(f"{where(node)}: the result is a scalar (CVM has no rank-0 sample)")
    x = _whole(ctx, node, data, (math.prod(d[:axis]), d[axis], math.prod(d[axis + 1:])))
    picked = _take_along(ctx, node, x, _whole(ctx, node, idx, (1, math.prod(s), 1)), 1, math.prod(out), d[axis], None)
    ctx.emit("reshape", [picked], {"shape": out}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def one_hot(ctx, node, attrs):
    """OneHot(indices, depth, values): flags [indices == k] + [indices == k - depth] (a negative index counts from
    the end; one out of range finds no position) for k < depth on a new axis, as values[0] + flags * (values[1] -
    values[0]) (comparison flags are exact 0/1)."""
    idx = node.input[0]
    depth = int(np.asarray(ctx.const(node.input[1], node, "OneHot depth")).reshape(-1)[0])
    off, on = (float(v) for v in np.asarray(ctx.const(node.input[2], node, "OneHot values")).reshape(-1)[:2])
    s = ctx.onnx_shape(idx, node)
    axis = attrs.get("axis", -1)
    axis = axis + len(s) + 1 if axis < 0 else axis
    grown = (*s[:axis], 1, *s[axis:])
    x = ctx.emit("reshape", [stored(ctx, idx, node, WHOLE)], {"shape": grown}, node)
    positions = np.arange(depth, dtype=np.float32).reshape((depth,) + (1,) * (len(s) - axis))
    flags = ctx.emit("add", [ctx.emit("equal", [x, ctx.add_const(f"{node.output[0]}/{name}", where_)], {}, node)
                             for name, where_ in (("positions", positions), ("from_end", positions - depth))],
                     {}, node)
    scaled = ctx.emit("mul", [flags, ctx.add_const(f"{node.output[0]}/on_off", np.float32(on - off))], {}, node)
    ctx.emit("add", [scaled, ctx.add_const(f"{node.output[0]}/off", np.float32(off))], {}, node, out=node.output[0])
    set_form(ctx, node.output[0], WHOLE)


def never(ctx, node, attrs):
    """IsNaN / IsInf of an activation: all false. MRT's float graph runs on finite data (calibration and
    Model.quantize_input refuse NaN and infinity) and the integer model holds integers, never NaN or infinite;
    the exporters write these checks to clean up a fully masked attention row."""
    attrs.ignore("detect_negative", "detect_positive")
    ctx.consts[node.output[0]] = np.zeros(ctx.onnx_shape(node.input[0], node), bool)


# these handlers choose their tensors' forms themselves (forms.stored): one_sample calls them as they are
HANDLERS = {"GatherND": (gather_nd, {11, 12, 13}), "GatherElements": (gather_elements, {11, 13}),
            "CumSum": (cumsum, {11, 14}), "IsNaN": (never, {9, 13, 20}), "IsInf": (never, {10, 20}),
            "OneHot": (one_hot, {11, 28})}  # OneHot 28 adds bfloat16
