"""Importers for the ONNX ops of transformer text models: Gather on a constant table by a batched index
(an embedding: IR embed, CVM's gather), LayerNormalization (opset 17) over the last axis (IR layer_norm;
the written-out form older exporters emit is found by mrt.passes.fuse_layer_norm), and Div by a batched
divisor (mean pooling's division by the token count, an L2 normalisation, a written-out LayerNorm).
Gather with constant indices and Div by a constant keep their handlers (ops_shape, ops_core)."""
from __future__ import annotations

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
    full = ctx.shape(node.input[0], node)
    axis = attrs.get("axis", -1)
    if axis not in (-1, len(full) - 1):
        raise UnsupportedOp(f"{where(node)}: normalises from axis {axis}; only the last axis is supported")
    if attrs.get("stash_type", 1) != 1:
        raise UnsupportedOp(f"{where(node)}: stash_type other than float32 is not supported")
    if len(node.output) > 1 and any(node.output[1:]):
        for name in node.output[1:]:
            if name:
                ctx.drop(name, "LayerNormalization's mean and inverse std outputs are not computed")
    params = []
    for k, what in ((1, "scale"), (2, "bias")):
        if len(node.input) > k and node.input[k]:
            value = np.asarray(ctx.const(node.input[k], node, f"LayerNormalization {what}"), np.float32)
            params.append(ctx.add_const(f"{node.output[0]}/{what}", value.reshape(-1)))
    ctx.emit("layer_norm", [ctx.tensor(node.input[0], node), *params], {"epsilon": float(attrs.get("epsilon", 1e-5))},
             node, out=node.output[0])


def div(ctx, node, attrs):
    """A batched divisor is an IR div_tensor (mrt.quantize.rules_text.div_tensor divides in integers)."""
    a, b = node.input
    if node.output[0] in ctx.integer_tensors and not (ctx.is_const(a) and ctx.is_const(b)):
        raise UnsupportedOp(f"{where(node)}: integer division (ONNX truncates it) is not supported")
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
    "Div": (div, {13, 14}),
}
