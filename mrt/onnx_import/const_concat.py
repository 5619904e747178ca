"""Concat of batched tensors with constants, such as ViT's class token before the patch tokens.

The IR's concat takes batched inputs only (a constant has no batch axis to concatenate along). A constant
operand whose batch axis is 1 is the same for every sample, so the concat is written exactly as: each
batched operand zero-padded along the axis over the constants that follow it (those before the first
batched operand pad its front), the padded operands concatenated, and one constant added that holds the
constants' values at their places and zeros elsewhere. Zero padding and adding zeros are exact.
"""
from __future__ import annotations

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import ops_core as core
from mrt.onnx_import.attrs import where


def concat(ctx, node, attrs):
    inputs = [i for i in node.input if i and not (ctx.is_const(i) and ctx.consts[i].size == 0)]  # empty pieces
    if len(inputs) == 1 and not ctx.is_const(inputs[0]):
        attrs.get("axis")
        return ctx.emit("identity", [ctx.tensor(inputs[0], node)], {}, node, out=node.output[0])
    if all(not ctx.is_const(i) for i in inputs):
        axis = core._axis(node, attrs.get("axis"), len(ctx.shape(inputs[0], node)))
        return ctx.emit("concat", [ctx.tensor(i, node) for i in inputs], {"axis": axis}, node, out=node.output[0])
    full = ctx.shape(next(i for i in inputs if not ctx.is_const(i)), node)
    rank = len(full)
    axis = core._axis(node, attrs.get("axis"), rank)
    if axis == 0:
        raise UnsupportedOp(f"{where(node)}: Concat of a constant along the batch axis")
    consts = {}
    for i in inputs:
        if ctx.is_const(i):
            c = np.asarray(ctx.consts[i])
            if c.dtype.kind in "iub" and c.size and np.abs(c.astype(np.float64)).max() <= 2 ** 24:
                c = c.astype(np.float32)  # an integer operand (an index) float32 holds exactly
            if c.dtype.kind != "f" or c.ndim != rank or c.shape[0] != 1 or \
                    c.shape[1:axis] + c.shape[axis + 1:] != tuple(full[1:axis]) + tuple(full[axis + 1:]):
                raise UnsupportedOp(f"{where(node)}: a constant operand of shape {c.shape} does not match the "
                                    f"batched operands {tuple(full)} outside axis {axis} with one sample")
            consts[i] = c.astype(np.float32)
    widths = [consts[i].shape[axis] if i in consts else ctx.shape(i, node)[axis] for i in inputs]
    batched = [n for n, i in enumerate(inputs) if i not in consts]
    pieces = []
    for b, n in enumerate(batched):
        front = sum(widths[:n]) if b == 0 else 0
        end = batched[b + 1] if b + 1 < len(batched) else len(inputs)
        back = sum(widths[n + 1:end])
        x = ctx.tensor(inputs[n], node)
        if front or back:
            pads = [0] * (2 * rank)
            pads[axis], pads[rank + axis] = front, back
            x = ctx.emit("pad", [x], {"pads": pads, "value": 0.0}, node)
        pieces.append(x)
    joined = pieces[0] if len(pieces) == 1 else ctx.emit("concat", pieces, {"axis": axis}, node)
    table = np.concatenate([consts[i] if i in consts else
                            np.zeros((1, *full[1:axis], widths[n], *full[axis + 1:]), np.float32)
                            for n, i in enumerate(inputs)], axis=axis)
    ctx.emit("add", [joined, ctx.add_const(f"{node.output[0]}/constants", table)], {}, node, out=node.output[0])
