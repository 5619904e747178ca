"""Importers for ONNX element-wise functions that MRT computes as lookup tables (mrt.float_ops.unary):
activations (Elu, Selu, HardSwish, Mish, Gelu, ...), math (Exp, Log, Sqrt, Pow, Erf, ...), Min/Max,
comparisons and Where. The univariate fusion pass merges whatever chain of them acts on one tensor
into one table; PRelu with per-channel slopes is written with rules MRT has (relu, clip, mul, add).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from mrt.errors import UnsupportedOp
from mrt.float_ops.unary import SELU_ALPHA, SELU_GAMMA
from mrt.onnx_import.attrs import where
from mrt.onnx_import.ops_core import cast

_UNARY = {"Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "neg", "Abs": "abs",
          "Erf": "erf", "Softplus": "softplus", "Softsign": "softsign", "Sin": "sin", "Cos": "cos",
          "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign", "Not": "not", "Mish": "mish",
          "HardSwish": "hard_swish"}
_BINARY = {"Pow": "pow", "Greater": "greater", "Less": "less", "GreaterOrEqual": "greater_equal",
           "LessOrEqual": "less_equal", "Equal": "equal", "And": "and", "Or": "or", "Xor": "xor"}
# inverse and hyperbolic trigonometric functions: float ops of mrt.float_ops.tail, each one table
TRIG = {"Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh", "Atan": "atan", "Atanh": "atanh",
        "Tan": "tan", "Cosh": "cosh", "Sinh": "sinh"}


def _input(ctx, node, name):
    """An IR tensor for an input; a non-float constant (an integer exponent, a boolean mask) becomes
    float32 first, since every IR tensor is float32."""
    if ctx.is_const(name) and ctx.consts[name].dtype != np.float32:
        value = ctx.consts[name]
        if value.dtype.kind not in "biuf":
            raise UnsupportedOp(f"{where(node)}: constant {name!r} of dtype {value.dtype} is not numeric")
        return ctx.add_const(name, value.astype(np.float32))
    return ctx.tensor(name, node)


def unary(op, **defaults):
    def handler(ctx, node, attrs):
        values = {k: attrs.get(k, v) for k, v in defaults.items()}
        ctx.emit(op, [_input(ctx, node, node.input[0])], values, node, out=node.output[0])
    return handler


def binary(op):
    def handler(ctx, node, attrs):
        ctx.emit(op, [_input(ctx, node, i) for i in node.input], {}, node, out=node.output[0])
    return handler


def min_max(op):
    """Min/Max of any number of inputs, as a chain of two-input minimum/maximum."""
    def handler(ctx, node, attrs):
        value = _input(ctx, node, node.input[0])
        rest = node.input[1:]
        if not rest:
            ctx.emit("identity", [value], {}, node, out=node.output[0])
        for k, name in enumerate(rest):
            value = ctx.emit(op, [value, _input(ctx, node, name)], {}, node,
                             out=node.output[0] if k == len(rest) - 1 else None)
    return handler


def mean(ctx, node, attrs):
    """Mean of any number of inputs: their sum times 1/n."""
    value = _input(ctx, node, node.input[0])
    for name in node.input[1:]:
        value = ctx.emit("add", [value, _input(ctx, node, name)], {}, node)
    scale = ctx.add_const(f"{node.output[0]}/1_n", np.asarray(1.0 / len(node.input), np.float32))
    ctx.emit("mul", [value, scale], {}, node, out=node.output[0])


def trilu(ctx, node, attrs):
    """Trilu keeps the upper (or lower) triangle of the last two axes from diagonal k: a product with a constant
    0/1 mask (exact)."""
    full = ctx.shape(node.input[0], node)
    if len(full) < 3:
        raise UnsupportedOp(f"{where(node)}: Trilu needs a matrix per sample, got {len(full) - 1} axis")
    k = int(ctx.const(node.input[1], node, "Trilu k").reshape(())) if len(node.input) > 1 and node.input[1] else 0
    rows, cols = full[-2], full[-1]
    mask = (np.triu if attrs.get("upper", 1) else np.tril)(np.ones((rows, cols), np.float32), k)
    ctx.emit("mul", [ctx.tensor(node.input[0], node), ctx.add_const(f"{node.output[0]}/mask", mask)], {}, node,
             out=node.output[0])


def where_(ctx, node, attrs):
    ctx.emit("where", [_input(ctx, node, i) for i in node.input], {}, node, out=node.output[0])


def gelu(ctx, node, attrs):
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise UnsupportedOp(f"{where(node)}: Gelu approximate={approximate!r} is not 'none' or 'tanh'")
    ctx.emit("gelu", [_input(ctx, node, node.input[0])], {"approximate": approximate}, node, out=node.output[0])


def cast_bool(ctx, node, attrs):
    """Cast to BOOL is x != 0 (as 0.0 / 1.0); every other target goes to the float Cast handler."""
    if attrs.get("to") != TensorProto.BOOL:
        return cast(ctx, node, attrs)
    attrs.ignore("saturate", "round_mode")
    x = ctx.emit("not", [_input(ctx, node, node.input[0])], {}, node)
    ctx.emit("not", [x], {}, node, out=node.output[0])


def prelu(ctx, node, attrs):
    """PRelu(x, slope) = relu(x) + slope * min(x, 0); a single slope is leaky_relu."""
    x, slope_name = node.input
    slope = ctx.const(slope_name, node, "PRelu slope")
    if slope.size == 1:
        ctx.emit("leaky_relu", [ctx.tensor(x, node)], {"alpha": float(slope.reshape(()))}, node, out=node.output[0])
        return
    pos = ctx.emit("relu", [ctx.tensor(x, node)], {}, node)
    neg = ctx.emit("clip", [ctx.tensor(x, node)], {"min": -np.inf, "max": 0.0}, node)
    scaled = ctx.emit("mul", [neg, _input(ctx, node, slope_name)], {}, node)
    ctx.emit("add", [pos, scaled], {}, node, out=node.output[0])


# op_type -> (handler, since_versions of the op schema it implements)
HANDLERS = {
    **{onnx_op: (unary(op), {1, 6, 9, 11, 12, 13, 14, 18, 20, 22}) for onnx_op, op in _UNARY.items()},
    **{onnx_op: (binary(op), {1, 7, 9, 11, 12, 13, 15, 16, 19}) for onnx_op, op in _BINARY.items()},
    **{onnx_op: (unary(op), {7, 9, 22}) for onnx_op, op in TRIG.items()},
    "Elu": (unary("elu", alpha=1.0), {6, 22}),
    "Celu": (unary("celu", alpha=1.0), {12, 28}),  # 28 adds float16, double, bfloat16 types
    "Selu": (unary("selu", alpha=SELU_ALPHA, gamma=SELU_GAMMA), {6, 22}),
    "ThresholdedRelu": (unary("thresholded_relu", alpha=1.0), {10, 22}),
    "Gelu": (gelu, {20}),
    "Min": (min_max("minimum"), {8, 12, 13}),
    "Max": (min_max("maximum"), {8, 12, 13}),
    "Where": (where_, {9, 16}),
    "Mean": (mean, {8, 13}),
    "Trilu": (trilu, {14}),
    "PRelu": (prelu, {9, 16}),
    "Cast": (cast_bool, {13, 19, 21, 23, 24, 25, 28}),  # 28 adds float6 types
}
