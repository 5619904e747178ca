"""GridSample with a grid computed from the input (a spatial transformer's warp): its interpolation is separable,
so the output is the image times a weight matrix built from one table per pixel index and axis.

Along an axis of length S, the weight of pixel j for a normalised grid coordinate g is w_j(g): the interpolation
coefficients of the taps that land on j once the padding mode has mapped them (zeros: none outside; border:
clamped; reflection: reflected), after the coordinate itself is denormalised, rounded (nearest) and clamped or
reflected as ONNX specifies. w_j is read off onnx's reference implementation of GridSample itself, sampling a
one-pixel-high image that is 1 at j (float op `grid_weight`), so no interpolation rule is written twice; each w_j
is a lookup table over the quantized coordinate. The weights of the axes multiply into one (points x pixels)
matrix per sample, and the output is the image times that matrix (a matmul of two activations).
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import ops_linear_maps
from mrt.onnx_import.attrs import where

MAX_PIXELS = 4096  # pixels of one image: its weight matrix has points x pixels entries, one table per axis index
MAX_TABLES = 256   # tables (pixel indices, summed over the axes)


def _axis_weights(ctx, node, grid, points, rank, axis, size, attrs):
    """(B, points, size): the weights of axis `axis` (0 = the first spatial axis) for every point."""
    channel = rank - 1 - axis  # the grid's last axis lists the coordinates in reverse order (x first)
    g = ctx.emit("slice", [grid], {"axes": (rank + 1,), "starts": (channel,), "ends": (channel + 1,), "steps": (1,)},
                 node)
    g = ctx.emit("reshape", [g], {"shape": (points, 1)}, node)
    columns = [ctx.emit("grid_weight", [g], {**attrs, "size": size, "index": j}, node) for j in range(size)]
    return columns[0] if size == 1 else ctx.emit("concat", columns, {"axis": 2}, node)


def _spread(ctx, node, w, sizes, axis):
    """(B, points, size) -> (B, points, prod(sizes)): each pixel's weight along `axis` (a constant 0/1 dense)."""
    grids = np.indices(sizes).reshape(len(sizes), -1)
    spread = (np.arange(sizes[axis])[:, None] == grids[axis][None, :]).astype(np.float32)
    return ctx.emit("dense", [w, ctx.add_const(f"{node.output[0]}/spread{axis}", spread.T)], {}, node)


def grid_sample(ctx, node, attrs):
    if ctx.is_const(node.input[1]):
        return ops_linear_maps.grid_sample(ctx, node, attrs)
    full, grid_full = ctx.shape(node.input[0], node), ctx.shape(node.input[1], node)
    sizes, out = tuple(full[2:]), tuple(grid_full[1:-1])
    rank = len(sizes)
    if ctx.onnx_shape(node.input[0], node)[:1] != (1,) or grid_full[-1] != rank:
        raise UnsupportedOp(f"{where(node)}: a grid {list(grid_full)} for an input {list(full)} (one image a sample)")
    if math.prod(sizes) > MAX_PIXELS or sum(sizes) > MAX_TABLES:
        raise UnsupportedOp(f"{where(node)}: an image of {list(sizes)} pixels under a computed grid needs more than "
                            f"{MAX_PIXELS} pixels or {MAX_TABLES} tables")
    kept = {"mode": attrs.get("mode", "bilinear" if ctx.opsets.get("", 1) < 20 else "linear"),
            "padding_mode": attrs.get("padding_mode", "zeros"), "align_corners": attrs.get("align_corners", 0),
            "opset": ctx.opsets.get("", 1)}
    points, grid = math.prod(out), ctx.tensor(node.input[1], node)
    weights = None
    for axis, size in enumerate(sizes):
        w = _spread(ctx, node, _axis_weights(ctx, node, grid, points, rank, axis, size, kept), sizes, axis)
        weights = w if weights is None else ctx.emit("mul", [weights, w], {}, node)
    image = ctx.emit("reshape", [ctx.tensor(node.input[0], node)], {"shape": (full[1], math.prod(sizes))}, node)
    weights = ctx.emit("transpose", [weights], {"perm": (0, 2, 1)}, node)
    y = ctx.emit("matmul", [image, weights], {}, node)
    ctx.emit("reshape", [y], {"shape": (full[1], *out)}, node, out=node.output[0])


HANDLERS = {"GridSample": (grid_sample, {16, 20, 22})}
