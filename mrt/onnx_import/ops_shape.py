"""Importers for ONNX ops that select, copy or reduce along non-batch axes: Slice, Split, Gather with
constant indices, Squeeze, Unsqueeze, Expand, Tile, the Reduce family, GlobalMaxPool, and Pad's
reflect and edge modes. Each becomes IR ops MRT already quantizes exactly (slice, concat, reshape,
sum, reduce_max, element-wise ops), so none needs a CVM op of its own: a gather of constant indices is
a concatenation of slices, a reflection is a concatenation of one-element slices.
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.float_ops import OPS
from mrt.onnx_import.attrs import optional_input, where

BIG = 1 << 62  # larger than any dimension: an "until the end" bound in ONNX's int64 starts/ends


def _axes(node, axes, rank):
    out = []
    for a in axes:
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            raise UnsupportedOp(f"{where(node)}: axis {a} out of range for rank {rank}")
        if a == 0:
            raise UnsupportedOp(f"{where(node)}: works along axis 0, the batch axis")
        out.append(a)
    if len(set(out)) != len(out):
        raise UnsupportedOp(f"{where(node)}: repeated axes {list(axes)}")
    return out


def _const_ints(ctx, node, k, what, default=None):
    name = optional_input(node, k)
    return default if name is None else [int(v) for v in np.asarray(ctx.const(name, node, what)).reshape(-1)]


def _reshape(ctx, node, x, per_sample, out):
    return ctx.emit("reshape", [x], {"shape": tuple(per_sample)}, node, out=out)


def _pick(ctx, node, x, axis, indices, out=None):
    """x's positions `indices` (a list, in order, repeats allowed) along `axis`: one slice for a forward
    arithmetic run, else a concatenation of the runs."""
    runs, k = [], 0
    while k < len(indices):
        step = indices[k + 1] - indices[k] if k + 1 < len(indices) and indices[k + 1] > indices[k] else 1
        end = k + 1
        while end < len(indices) and indices[end] - indices[end - 1] == step:
            end += 1
        runs.append((indices[k], indices[end - 1] + 1, step))
        k = end
    dim = ctx.full[x][axis]
    parts = [x if (s, e, st) == (0, dim, 1) else
             ctx.emit("slice", [x], {"axes": (axis,), "starts": (s,), "ends": (e,), "steps": (st,)}, node,
                      out=out if len(runs) == 1 else None) for s, e, st in runs]
    if len(parts) == 1:
        return parts[0] if parts[0] != x or out is None else ctx.emit("identity", [x], {}, node, out=out)
    most = OPS["concat"].arity[1]  # a long reflection (a 64-sample STFT pad) has more runs: concat in groups
    while len(parts) > most:
        parts = [ctx.emit("concat", parts[i:i + most], {"axis": axis}, node) if len(parts[i:i + most]) > 1
                 else parts[i] for i in range(0, len(parts), most)]
    return ctx.emit("concat", parts, {"axis": axis}, node, out=out)


def slice_(ctx, node, attrs):
    x = ctx.tensor(node.input[0], node)
    full = ctx.shape(node.input[0], node)
    starts, ends = _const_ints(ctx, node, 1, "Slice starts"), _const_ints(ctx, node, 2, "Slice ends")
    axes = _const_ints(ctx, node, 3, "Slice axes", list(range(len(starts))))
    steps = _const_ints(ctx, node, 4, "Slice steps", [1] * len(starts))
    value = x
    for a, s, e, k in zip(axes, starts, ends, steps):
        a = a + len(full) if a < 0 else a
        if a == 0:
            if (s, k) == (0, 1) and e >= BIG // 4:
                continue  # the whole batch axis
            raise UnsupportedOp(f"{where(node)}: slices axis 0, the batch axis")
        picked = list(range(*slice(s, e, k).indices(full[_axes(node, [a], len(full))[0]])))
        if not picked:
            raise UnsupportedOp(f"{where(node)}: slice [{s}:{e}:{k}] of axis {a} is empty")
        value = _pick(ctx, node, value, a, picked)
    ctx.emit("identity", [value], {}, node, out=node.output[0])


def _empty(ctx, node, out):
    """`out`, the empty piece of a Split, as an empty constant of its ONNX shape: CVM has no empty tensor, and
    the ops that read one (Concat) leave it out."""
    shape = list(ctx.onnx_shape(node.input[0], node))
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    shape[axis] = 0
    ctx.consts[out] = np.zeros(shape, np.float32)


def split(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, [attrs.get("axis", 0)], len(full))[0]
    sizes = _const_ints(ctx, node, 1, "Split split") or attrs.get("split")
    n = attrs.get("num_outputs", len(node.output))
    if not sizes:
        chunk = -(-full[axis] // n)
        sizes = [min(chunk, full[axis] - k * chunk) for k in range(n)]
    if sum(sizes) != full[axis] or len(sizes) != len(node.output):
        raise UnsupportedOp(f"{where(node)}: split sizes {sizes} do not divide axis {axis} of {full}")
    if min(sizes) < 0:
        raise UnsupportedOp(f"{where(node)}: split sizes {sizes} are negative")
    x, start = ctx.tensor(node.input[0], node), 0
    for size, out in zip(sizes, node.output):
        if size == 0:  # an empty piece (RotaryEmbedding's unrotated part of a fully rotated head): a constant
            _empty(ctx, node, out)
            continue
        ctx.emit("slice", [x], {"axes": (axis,), "starts": (start,), "ends": (start + size,), "steps": (1,)},
                 node, out=out)
        start += size


def gather(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, [attrs.get("axis", 0)], len(full))[0]
    idx = np.asarray(ctx.const(node.input[1], node, "Gather indices")).astype(np.int64)
    idx = np.where(idx < 0, idx + full[axis], idx)
    if idx.size == 0 or idx.min() < 0 or idx.max() >= full[axis]:
        raise UnsupportedOp(f"{where(node)}: indices out of range for axis {axis} of size {full[axis]}")
    per_sample = [*full[1:axis], *idx.shape, *full[axis + 1:]]
    picked = _pick(ctx, node, ctx.tensor(node.input[0], node), axis, idx.reshape(-1).tolist())
    _reshape(ctx, node, picked, per_sample, node.output[0])


def squeeze(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axes = _const_ints(ctx, node, 1, "Squeeze axes") or attrs.get("axes")
    axes = _axes(node, axes, len(full)) if axes else [a for a in range(1, len(full)) if full[a] == 1]
    if any(full[a] != 1 for a in axes):
        raise UnsupportedOp(f"{where(node)}: squeezes axes {axes} of {full}, not all of size 1")
    keep = [d for a, d in enumerate(full) if a > 0 and a not in axes]
    if not keep:
        raise UnsupportedOp(f"{where(node)}: would leave each sample a scalar")
    _reshape(ctx, node, ctx.tensor(node.input[0], node), keep, node.output[0])


def unsqueeze(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axes = _const_ints(ctx, node, 1, "Unsqueeze axes") or attrs.get("axes")
    rank = len(full) + len(axes)
    axes = _axes(node, axes, rank)
    dims, rest = [], iter(full[1:])
    for a in range(1, rank):
        dims.append(1 if a in axes else next(rest))
    _reshape(ctx, node, ctx.tensor(node.input[0], node), dims, node.output[0])


def expand(ctx, node, attrs):
    """Expand = add a zero constant of the broadcast shape (exact in integers too). The target may not
    have more axes than the input: the extra ones would go before the batch axis."""
    full = ctx.shape(node.input[0], node)
    target = _const_ints(ctx, node, 1, "Expand shape")
    if len(target) > len(full):
        raise UnsupportedOp(f"{where(node)}: target {target} has more axes than the batched input {full}, "
                            "which would move the batch axis")
    t_dims = [1] * (len(full) - len(target)) + target
    if t_dims[0] != 1:
        raise UnsupportedOp(f"{where(node)}: expands the batch axis to {t_dims[0]}")
    zeros = [1] + [t if d == 1 else 1 for d, t in zip(full[1:], t_dims[1:])]
    x = ctx.tensor(node.input[0], node)
    if math.prod(zeros) == 1:
        ctx.emit("identity", [x], {}, node, out=node.output[0])
        return
    ctx.emit("add", [x, ctx.add_const(f"{node.output[0]}/zeros", np.zeros(zeros, np.float32))], {}, node,
             out=node.output[0])


def tile(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    repeats = _const_ints(ctx, node, 1, "Tile repeats")
    if len(repeats) != len(full) or repeats[0] != 1 or min(repeats) < 1:
        raise UnsupportedOp(f"{where(node)}: repeats {repeats} must be >= 1 and 1 on the batch axis")
    value = ctx.tensor(node.input[0], node)
    for a, r in enumerate(repeats):
        if r > 1:
            value = ctx.emit("concat", [value] * r, {"axis": a}, node)
    ctx.emit("identity", [value], {}, node, out=node.output[0])


def _rearrange(ctx, node, steps, out_shape):
    """A reshape, a transpose and a reshape of one image (axis 0 of every shape here is the batch)."""
    x = ctx.tensor(node.input[0], node)
    x = ctx.emit("reshape", [x], {"shape": tuple(steps[0][1:])}, node)
    x = ctx.emit("transpose", [x], {"perm": tuple(steps[1])}, node)
    ctx.emit("reshape", [x], {"shape": tuple(out_shape[1:])}, node, out=node.output[0])


def depth_to_space(ctx, node, attrs):
    """DepthToSpace: channel blocks moved to b x b pixels (DCR: depth-column-row order; CRD: column-row-depth)."""
    n, c, h, w = _image(ctx, node)
    b = attrs.get("blocksize")
    if not b or c % (b * b):
        raise UnsupportedOp(f"{where(node)}: blocksize {b} does not divide {c} channels into b x b blocks")
    if attrs.get("mode", "DCR") == "DCR":
        steps = ([n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2])
    else:
        steps = ([n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3])
    _rearrange(ctx, node, steps, [n, c // (b * b), h * b, w * b])


def space_to_depth(ctx, node, attrs):
    """SpaceToDepth: b x b pixel blocks moved to channels (DepthToSpace's inverse, DCR or, since opset 28, CRD)."""
    n, c, h, w = _image(ctx, node)
    b = attrs.get("blocksize")
    if not b or h % b or w % b:
        raise UnsupportedOp(f"{where(node)}: blocksize {b} does not divide the image {h} x {w}")
    perm = [0, 3, 5, 1, 2, 4] if attrs.get("mode", "DCR") == "DCR" else [0, 1, 3, 5, 2, 4]
    _rearrange(ctx, node, ([n, c, h // b, b, w // b, b], perm), [n, c * b * b, h // b, w // b])


def _image(ctx, node):
    full = ctx.shape(node.input[0], node)
    if len(full) != 4:
        raise UnsupportedOp(f"{where(node)}: needs an [N, C, H, W] input, got rank {len(full)}")
    return full


HANDLERS = {
    "DepthToSpace": (depth_to_space, {13, 28}),  # 28 changes no semantics
    "SpaceToDepth": (space_to_depth, {13, 28}),  # 28 adds mode (CRD)
    "Slice": (slice_, {13}),
    "Split": (split, {13, 18}),
    "Gather": (gather, {13}),
    "Squeeze": (squeeze, {13, 21, 23, 24, 25}),
    "Unsqueeze": (unsqueeze, {13, 21, 23, 24, 25}),
    "Expand": (expand, {13}),
    "Tile": (tile, {13}),
}
