"""Importers for the ONNX ops of transformer text models: Gather on a constant table by a batched index
(an embedding: IR embed, CVM's gather), LayerNormalization (opset 17) over the last axis (IR layer_norm;
the written-out form older exporters emit is found by mrt.passes.fuse_layer_norm), and Div by a batched
divisor (mean pooling's division by the token count, an L2 normalisation, a written-out LayerNorm).
Gather with constant indices and Div by a constant keep their handlers (ops_shape, ops_core)."""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import ops_core, ops_shape
from mrt.onnx_import.attrs import where


def gather(ctx, node, attrs):
    """Gather(table, ids) with a constant table and batched indices along axis 0 is an embedding lookup;
    any other Gather goes to ops_shape.gather (constant indices)."""
    data, idx = node.input
    if ctx.is_const(idx) or not ctx.is_const(data):
        return ops_shape.gather(ctx, node, attrs)
    axis = attrs.get("axis", 0)
    table = ctx.const(data, node, "Gather table")
    if axis not in (0, -table.ndim):
        raise UnsupportedOp(f"{where(node)}: gathers batched indices along axis {axis} of the table; only rows "
                            "(axis 0, an embedding lookup) are supported")
    ctx.emit("embed", [ctx.tensor(idx, node), ctx.tensor(data, node)], {}, node, out=node.output[0])


def layer_normalization(ctx, node, attrs):
    """LayerNormalization over the axes from `axis` on: over the last axis the IR's layer_norm; over several, the
    same on the tensor reshaped to (..., their product) with the scale and bias flattened alike, reshaped back."""
    full = ctx.shape(node.input[0], node)
    axis = attrs.get("axis", -1)
    axis = axis + len(full) if axis < 0 else axis
    if not 1 <= axis < len(full):
        raise UnsupportedOp(f"{where(node)}: normalises from axis {attrs.get('axis', -1)}, which would include the "
                            "unit axis of one sample (one_sample.py imports it on the whole tensor)")
    if attrs.get("stash_type", 1) != 1:
        raise UnsupportedOp(f"{where(node)}: stash_type other than float32 is not supported")
    if any(node.output[1:]):
        _statistics(ctx, node, full, axis, float(attrs.get("epsilon", 1e-5)))
    params = []
    for k, what in ((1, "scale"), (2, "bias")):
        if len(node.input) > k and node.input[k]:
            value = np.asarray(ctx.const(node.input[k], node, f"LayerNormalization {what}"), np.float32)
            value = np.broadcast_to(value, full[axis:]).reshape(-1)
            params.append(ctx.add_const(f"{node.output[0]}/{what}", value))
    normalize(ctx, node, ctx.tensor(node.input[0], node), full, axis, params, float(attrs.get("epsilon", 1e-5)),
              node.output[0])


def _statistics(ctx, node, full, axis, epsilon):
    """LayerNormalization's optional Mean and InvStdDev outputs (the normalized axes kept as 1s): the mean, and
    1 / sqrt(mean((x - mean)^2) + epsilon) (add, sqrt and reciprocal fuse into one table)."""
    x, axes = ctx.tensor(node.input[0], node), tuple(range(axis, len(full)))
    inv_n = ctx.add_const(f"{node.output[0]}/inv_n", np.float32(1 / math.prod(full[axis:])))
    names = list(node.output) + [""] * (3 - len(node.output))
    mean = ctx.emit("mul", [ctx.emit("sum", [x], {"axes": axes, "keepdims": 1}, node), inv_n], {}, node,
                    out=names[1] or None)
    if names[2]:
        d = ctx.emit("sub", [x, mean], {}, node)
        var = ctx.emit("mul", [ctx.emit("sum", [ctx.emit("mul", [d, d], {}, node)], {"axes": axes, "keepdims": 1},
                                        node), inv_n], {}, node)
        shifted = ctx.emit("add", [var, ctx.add_const(f"{node.output[0]}/epsilon", np.float32(epsilon))], {}, node)
        ctx.emit("reciprocal", [ctx.emit("sqrt", [shifted], {}, node)], {}, node, out=names[2])


def normalize(ctx, node, x, full, axis, params, epsilon, out=None):
    """The IR layer_norm of x over its axes from `axis` on (a reshape around it where they are several)."""
    several = axis < len(full) - 1
    if several:
        x = ctx.emit("reshape", [x], {"shape": (*full[1:axis], math.prod(full[axis:]))}, node)
    y = ctx.emit("layer_norm", [x, *params], {"epsilon": epsilon}, node, out=None if several else out)
    return ctx.emit("reshape", [y], {"shape": tuple(full[1:])}, node, out=out) if several else y


def instance_normalization(ctx, node, attrs):
    """InstanceNormalization: per channel, over the spatial axes (normalize from axis 2 on), then the channels'
    scale and bias."""
    full = ctx.shape(node.input[0], node)
    if len(full) < 3:
        raise UnsupportedOp(f"{where(node)}: needs [N, C, ...] input, got rank {len(full)}")
    shape = (full[1],) + (1,) * (len(full) - 2)
    scale, bias = (np.asarray(ctx.const(node.input[k], node, what), np.float32).reshape(shape)
                   for k, what in ((1, "InstanceNormalization scale"), (2, "InstanceNormalization B")))
    z = normalize(ctx, node, ctx.tensor(node.input[0], node), full, 2, [], float(attrs.get("epsilon", 1e-5)))
    z = ctx.emit("mul", [z, ctx.add_const(f"{node.output[0]}/scale", scale)], {}, node)
    ctx.emit("add", [z, ctx.add_const(f"{node.output[0]}/bias", bias)], {}, node, out=node.output[0])


def div(ctx, node, attrs):
    """A batched divisor is an IR div_tensor (mrt.quantize.rules_text.div_tensor divides in integers)."""
    a, b = node.input
    if node.output[0] in ctx.integer_tensors and not (ctx.is_const(a) and ctx.is_const(b)):
        # ONNX truncates an integer division: IR int_div (mrt.float_ops.integer, mrt.quantize.rules_integer)
        return ctx.emit("int_div", [ctx.tensor(a, node), ctx.tensor(b, node)], {}, node, out=node.output[0])
    if ctx.is_const(b):
        return ops_core.binary("div")(ctx, node, attrs)
    if ctx.is_const(a):
        return _reciprocal(ctx, node, a, b)
    ctx.emit("div_tensor", [ctx.tensor(a, node), ctx.tensor(b, node)], {}, node, out=node.output[0])


def _reciprocal(ctx, node, a, b):
    """c / x, c a constant: a function of x alone, one lookup table (IR univariate, as
    mrt.passes.fuse_univariate writes one) of c / x, or of 1 / x multiplied by c where c is not a scalar.
    (div_tensor reads two batched tensors: given a constant numerator it failed with an internal KeyError.)"""
    c = ctx.const(a, node, "Div numerator")
    x = ctx.tensor(b, node)
    if c.size == 1:
        program = (("div", (float(c.reshape(())), "x"), ()),)
        ctx.emit("univariate", [x], {"program": program}, node, out=node.output[0])
        return
    inv = ctx.emit("univariate", [x], {"program": (("div", (1.0, "x"), ()),)}, node)
    ctx.emit("mul", [inv, ctx.tensor(a, node)], {}, node, out=node.output[0])


HANDLERS = {
    "Gather": (gather, {13}),
    "LayerNormalization": (layer_normalization, {17}),
    "InstanceNormalization": (instance_normalization, {6, 22}),
    "Div": (div, {13, 14}),
}
