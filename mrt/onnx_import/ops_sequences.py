"""Importers for ONNX ops that move values along a sequence axis by per-row lengths or positions, read from a
tensor (computed, or constant): ReverseSequence and TensorScatter. Each is a selection by 0/1 flags, `equal` of
the lengths or positions with a constant of (position, step) pairs, products with the data and a sum over the
steps: exact where the lengths are integers, and constants where they are constant.

- ReverseSequence: y[b, t] = sum_s x[b, s] [L_b == s + t + 1] + x[b, t] [L_b <= t] (rank-2 data on whole
  tensors: the batch_axis is then a per-sample axis).
- TensorScatter: y[b, p] = sum_i u[b, i] [w_b == (p - i) (mod M for circular)] + cache[b, p] (1 - hits), the
  sequence axis moved last and back.
"""
from __future__ import annotations

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import batch_major, whole_form
from mrt.onnx_import.attrs import where


def _flags(ctx, node, name, per_sample, table):
    """[value == table], the value (lengths or positions, per-sample shape `per_sample`) reshaped to broadcast
    against the constant table's trailing axes; a constant value gives constant flags."""
    if ctx.is_const(name):
        v = np.asarray(ctx.consts[name], np.float64).reshape(per_sample)
        return ctx.add_const(f"{node.output[0]}/flags", (v == table).astype(np.float32))
    v = ctx.emit("reshape", [ctx.tensor(name, node)], {"shape": per_sample}, node)
    return ctx.emit("equal", [v, ctx.add_const(f"{node.output[0]}/steps", table.astype(np.float32))], {}, node)


def _swap_last(ctx, node, x, axis):
    """x with `axis` swapped with the last one (an involution), or x itself."""
    rank = len(ctx.full[x])
    if axis == rank - 1:
        return x
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return ctx.emit("transpose", [x], {"perm": tuple(perm)}, node)


def reverse_sequence(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    b_axis, t_axis = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
    if len(full) != 3 or 0 in (b_axis, t_axis):
        raise UnsupportedOp(f"{where(node)}: ReverseSequence reads per-row lengths along a per-sample batch axis "
                            f"(rank-2 data on whole tensors), got {list(full)}")
    x = _swap_last(ctx, node, ctx.tensor(node.input[0], node), 1) if t_axis == 1 else ctx.tensor(node.input[0], node)
    rows, steps = full[b_axis], full[t_axis]
    t, s = np.arange(steps)[:, None], np.arange(steps)[None, :]
    pick = _flags(ctx, node, node.input[1], (rows, 1, 1), (s + t + 1).astype(np.float64))  # [b, t, s]
    moved = ctx.emit("reshape", [x], {"shape": (rows, 1, steps)}, node)
    reversed_ = ctx.emit("sum", [ctx.emit("mul", [pick, moved], {}, node)], {"axes": (3,), "keepdims": 0}, node)
    beyond = _at_least(ctx, node, node.input[1], rows, steps)
    y = ctx.emit("add", [reversed_, ctx.emit("mul", [x, beyond], {}, node)], {}, node,
                 out=None if t_axis == 1 else node.output[0])
    if t_axis == 1:
        ctx.emit("identity", [_swap_last(ctx, node, y, 1)], {}, node, out=node.output[0])


def _at_least(ctx, node, name, rows, steps):
    """[L_b <= t] of shape [rows, steps]."""
    t = np.arange(steps, dtype=np.float64)[None, :]
    if ctx.is_const(name):
        v = np.asarray(ctx.consts[name], np.float64).reshape(rows, 1)
        return ctx.add_const(f"{node.output[0]}/kept", (v <= t).astype(np.float32))
    v = ctx.emit("reshape", [ctx.tensor(name, node)], {"shape": (rows, 1)}, node)
    return ctx.emit("less_equal", [v, ctx.add_const(f"{node.output[0]}/times", t.astype(np.float32))], {}, node)


def tensor_scatter(ctx, node, attrs):
    cache, update, positions = node.input[0], node.input[1], node.input[2] if len(node.input) > 2 else ""
    onnx_rank, full = len(ctx.onnx_shape(cache, node)), ctx.shape(cache, node)
    axis = int(attrs.get("axis", -2))
    axis = len(full) + (axis - onnx_rank if axis >= 0 else axis)
    mode = attrs.get("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular") or not positions or not 0 < axis < len(full):
        raise UnsupportedOp(f"{where(node)}: TensorScatter mode {mode!r}, axis {axis}, write_indices {positions!r}")
    size, count = full[axis], ctx.shape(update, node)[axis]
    p, i = np.arange(size)[:, None], np.arange(count)[None, :]
    table = ((p - i) % size if mode == "circular" else p - i).astype(np.float64)  # [p, i]
    c = _swap_last(ctx, node, ctx.tensor(cache, node), axis)
    u = _swap_last(ctx, node, ctx.tensor(update, node), axis)
    lead = ctx.full[c][1:-1]
    rows = (full[1],) if len(full) == onnx_rank + 1 else ()  # whole: the rows a per-sample axis; else the batch
    w_shape = rows + (1,) * (len(lead) - len(rows))
    flags = _flags(ctx, node, positions, (*w_shape, 1, 1), table)  # [b, 1..., p, i]
    u = ctx.emit("reshape", [u], {"shape": (*lead, 1, count)}, node)
    written = ctx.emit("sum", [ctx.emit("mul", [flags, u], {}, node)], {"axes": (len(full),), "keepdims": 0}, node)
    if ctx.is_const(positions):
        kept = ctx.add_const(f"{node.output[0]}/kept", 1 - ctx.initializers[flags].sum(axis=-1))
    else:
        hits = ctx.emit("sum", [flags], {"axes": (len(full),), "keepdims": 0}, node)
        kept = ctx.emit("univariate", [hits], {"program": (("mul", ("x", -1.0), ()), ("add", (0, 1.0), ()))}, node)
    y = ctx.emit("add", [written, ctx.emit("mul", [c, kept], {}, node)], {}, node)
    ctx.emit("identity", [_swap_last(ctx, node, y, axis)], {}, node, out=node.output[0])


def reverse_sequence_whole(ctx, node, a):
    """ReverseSequence on whole tensors: both axes past the batch axis."""
    lifted = whole_form._lifted(ctx, node)
    return batch_major._with(lifted, batch_axis=int(a.get("batch_axis", 1)) + 1,
                             time_axis=int(a.get("time_axis", 0)) + 1)


WHOLE_FORMS = {"ReverseSequence": reverse_sequence_whole, "TensorScatter": whole_form._same}

HANDLERS = {
    "ReverseSequence": (reverse_sequence, {10, 28}),
    "TensorScatter": (tensor_scatter, {24}),
}
