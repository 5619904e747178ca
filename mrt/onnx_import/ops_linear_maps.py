"""Importers for ONNX ops that are a constant affine map of their input: Resize in the modes ops_vision leaves
(cubic, antialiased linear, tf_crop_and_resize, keep_aspect_ratio_policy), GridSample on a constant grid, DFT
(opset 17, and 20 with a constant axis), STFT with a constant step and window, and Col2Im with constant shapes.

Each maps one item (an image's channel, one signal) by the same y = M x + b, so M and b are read off onnx's
reference implementation of the op itself, run once on a batch of probes (every basis vector, and zeros for b):
no interpolation or transform is written twice. The map becomes a dense layer over the item's flattened values
between two reshapes (and transposes, for DFT's axis), which MRT quantizes as any dense layer. M has
(values in) x (values out) entries, refused past MAX_WEIGHTS (a computed grid, or a large image, is refused).
"""
from __future__ import annotations

import math

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from mrt.errors import UnsupportedOp
from mrt.onnx_import import ops_vision
from mrt.onnx_import.attrs import optional_input, where

MAX_WEIGHTS = 1 << 22  # entries of one map's matrix


def _run(ctx, node, feeds):
    """The node's first output from onnx's reference evaluator, on `feeds` (every input by name)."""
    inputs = [i for i in node.input if i]
    probe = helper.make_node(node.op_type, list(node.input), [node.output[0]], **{
        a.name: helper.get_attribute_value(a) for a in node.attribute})
    ref = ReferenceEvaluator(probe, opsets={"": ctx.opsets.get("", 1)})
    return np.asarray(ref.run(None, {i: feeds[i] for i in inputs})[0], np.float64)


def emit_map(ctx, node, x, keep, item, fn, out):
    """x [N, *keep, *item] (IR) through the affine map fn (probes [m, *item] -> [m, *item_out]) of each item, as
    reshape -> dense -> reshape to [N, *keep, *item_out]."""
    n = math.prod(item)
    probes = np.concatenate([np.eye(n), np.zeros((1, n))]).reshape(n + 1, *item)
    result = fn(probes)
    out_item, flat = result.shape[1:], result.reshape(n + 1, -1)
    if n * flat.shape[1] > MAX_WEIGHTS:
        raise UnsupportedOp(f"{where(node)}: as a linear map of {n} values to {flat.shape[1]} it needs more than "
                            f"{MAX_WEIGHTS} weights")
    bias = flat[-1]
    hint = node.output[0]
    inputs = [ctx.emit("reshape", [x], {"shape": (*keep, n)}, node), ctx.add_const(f"{hint}/map", (flat[:-1] - bias).T)]
    if np.any(bias):
        inputs.append(ctx.add_const(f"{hint}/map_bias", bias))
    y = ctx.emit("dense", inputs, {}, node)
    return ctx.emit("reshape", [y], {"shape": (*keep, *out_item)}, node, out=out)


def _consts(ctx, node, skip=(0,)):
    """{input name: value} of every input but those at positions `skip` (constants, refused otherwise)."""
    return {i: np.asarray(ctx.const(i, node, f"{node.op_type} input {k}"))
            for k, i in enumerate(node.input) if i and k not in skip}


# -- Resize ---------------------------------------------------------------------------------------------------

def _by_vision(mode, attrs):
    return (mode in ("nearest", "linear") and not (attrs.get("antialias", 0) and mode == "linear")
            and attrs.get("keep_aspect_ratio_policy", "stretch") == "stretch"
            and attrs.get("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize")


def resize(ctx, node, attrs):
    """Resize: nearest and linear as ops_vision has them; every other form as a map of each channel's image."""
    mode = attrs.get("mode", "nearest")
    if len(node.input) == 2 or _by_vision(mode, attrs):
        return ops_vision.resize(ctx, node, attrs)
    attrs.ignore(*[a.name for a in node.attribute])  # the reference evaluator reads them all
    full, feeds = ctx.shape(node.input[0], node), _consts(ctx, node)
    rank, axes = len(full), attrs.get("axes")
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    scales, sizes = optional_input(node, 2), optional_input(node, 3)
    for k, a in enumerate(axes):
        if a < 2 and scales and feeds[scales].size and float(feeds[scales][k]) != 1:
            raise UnsupportedOp(f"{where(node)}: resizes axis {a} (the batch or channel axis)")
        if a < 2 and sizes and int(feeds[sizes][k]) != (1 if a == 0 else full[1]):
            raise UnsupportedOp(f"{where(node)}: resizes axis {a} (the batch or channel axis)")

    def fn(probes):  # the probes as the batch of one channel each
        given = dict(feeds)
        if sizes:
            given[sizes] = np.array([len(probes) if a == 0 else 1 if a == 1 else v
                                     for a, v in zip(axes, feeds[sizes])], np.int64)
        given[node.input[0]] = probes[:, None].astype(np.float32)
        return _run(ctx, node, given)[:, 0]
    emit_map(ctx, node, ctx.tensor(node.input[0], node), full[1:2], full[2:], fn, node.output[0])


# -- GridSample, Col2Im, DFT ----------------------------------------------------------------------------------

def grid_sample(ctx, node, attrs):
    """GridSample with a constant grid: each channel's image resampled by a fixed map."""
    attrs.ignore("align_corners", "mode", "padding_mode")
    full, feeds = ctx.shape(node.input[0], node), _consts(ctx, node)
    grid = feeds[node.input[1]]
    if grid.shape[0] != 1:
        raise UnsupportedOp(f"{where(node)}: a grid of {grid.shape[0]} samples for one input")

    def fn(probes):  # the probes as the channels of one image
        return _run(ctx, node, {**feeds, node.input[0]: probes[None].astype(np.float32)})[0]
    emit_map(ctx, node, ctx.tensor(node.input[0], node), full[1:2], full[2:], fn, node.output[0])


def col2im(ctx, node, attrs):
    """Col2Im with constant image and block shapes: each channel's K x L columns summed into its image."""
    attrs.ignore("dilations", "pads", "strides")
    full, feeds = ctx.shape(node.input[0], node), _consts(ctx, node)
    k = math.prod(int(v) for v in feeds[node.input[2]].reshape(-1))
    if len(full) != 3 or full[1] % k:
        raise UnsupportedOp(f"{where(node)}: input {list(full)} is not [N, C * {k}, L]")
    x = ctx.emit("reshape", [ctx.tensor(node.input[0], node)], {"shape": (full[1] // k, k, full[2])}, node)

    def fn(probes):  # the probes as a batch of one-channel inputs
        return _run(ctx, node, {**feeds, node.input[0]: probes.astype(np.float32)})[:, 0]
    emit_map(ctx, node, x, (full[1] // k,), (k, full[2]), fn, node.output[0])


def dft(ctx, node, attrs):
    """DFT along a constant axis: each signal (its values and real/imaginary parts) by a fixed map, the axis moved
    next to the last one and back."""
    attrs.ignore("inverse", "onesided")
    full = ctx.shape(node.input[0], node)
    axis = attrs.get("axis", 1) if ctx.opsets.get("", 1) < 20 else -2
    if optional_input(node, 2):
        axis = int(np.asarray(ctx.const(node.input[2], node, "DFT axis")).reshape(()))
    axis = axis + len(full) if axis < 0 else axis
    if not 0 < axis < len(full) - 1:
        raise UnsupportedOp(f"{where(node)}: transforms axis {axis} of {list(full)}")
    feeds = _consts(ctx, node, skip=(0, 2))
    kept = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "axis"}
    length = optional_input(node, 1) or ""  # the probes' signal axis is 1: the attribute's default before opset 20,
    probe = helper.make_node("DFT", [node.input[0], length], [node.output[0]], **kept)  # -2 (of 3 axes) from it on
    perm = [a for a in range(len(full) - 1) if a != axis] + [axis, len(full) - 1]
    x = ctx.emit("transpose", [ctx.tensor(node.input[0], node)], {"perm": tuple(perm)}, node)

    def fn(probes):
        return _run(ctx, probe, {**feeds, node.input[0]: probes.astype(np.float32)})
    y = emit_map(ctx, node, x, tuple(full[a] for a in perm[1:-2]), (full[axis], full[-1]), fn, None)
    ctx.emit("transpose", [y], {"perm": tuple(int(i) for i in np.argsort(perm))}, node, out=node.output[0])


def stft(ctx, node, attrs):
    """STFT with a constant step, window and frame length: each signal's frames and bins by a fixed map."""
    attrs.ignore("onesided")
    full, feeds = ctx.shape(node.input[0], node), _consts(ctx, node)

    def fn(probes):  # the probes as a batch of signals
        return _run(ctx, node, {**feeds, node.input[0]: probes.astype(np.float32)})
    emit_map(ctx, node, ctx.tensor(node.input[0], node), (), full[1:], fn, node.output[0])


HANDLERS = {
    "Resize": (resize, {10, 11, 13, 18, 19}),
    "Col2Im": (col2im, {18}),
    "DFT": (dft, {17, 20}),
    "STFT": (stft, {17}),
}
