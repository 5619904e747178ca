"""ONNX's quantized-integer ops as chains of ONNX ops (decompose.DECOMPOSE), their scales and zero points constants:

- QuantizeLinear: y = clip(round(x / scale) + zero_point, lo, hi) of the output type (int8/uint8, int16/uint16,
  int4/uint4, int2/uint2), per tensor, axis or block: Div by the constant, Clip (to lo - z..hi - z before the Add
  of a per-tensor zero point z, so that it reads the output's range only), Add. No Round: a Round is a table of
  the activation-bit value, whose output is quantized again at the activation bits, and moves integers that the
  rest of the chain keeps; ONNX types the result an integer, so it is rounded where it is read as one (a graph
  output at scale 1, half up where ONNX rounds half to even; an integer op's operand), and a float reader (a
  DequantizeLinear) reads it unrounded, within half a step. No Cast follows (a Cast of a float tensor truncates).
- MatMulInteger / ConvInteger: (a - a_zero_point) @ (b - b_zero_point), Cast to float, Sub, MatMul or Conv.
- QLinearMatMul / QLinearConv: DequantizeLinear of the operands, MatMul or Conv (the int32 bias at scale
  x_scale * w_scale), QuantizeLinear of the result.
- DynamicQuantizeLinear is refused by name: its scale and zero point come from the data's min and max.

The chain is float arithmetic the converter then quantizes like any other: the integers come out exact where every
intermediate value stays within what the activation bits resolve (a rounding of a quantized value may move one step
from ONNX's at a tie), and approximate otherwise: CVM's matmul and conv read activations at the activation bits and
weights at the weight bits, not at scale 1.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where

RANGES = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127), TensorProto.UINT16: (0, 65535),
          TensorProto.INT16: (-32768, 32767), TensorProto.UINT4: (0, 15), TensorProto.INT4: (-8, 7),
          TensorProto.UINT2: (0, 3), TensorProto.INT2: (-2, 1)}  # QuantizeLinear's integer output types
CONV_ATTRS = ("group", "pads", "strides", "dilations", "kernel_shape", "auto_pad")


def along(node, value, shape, axis: int, block: int, what: str) -> np.ndarray:
    """A per-tensor, per-axis or per-block constant broadcast to x's ONNX shape."""
    value = np.asarray(value, np.float64)
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    if block:
        value = np.repeat(value, block, axis=axis)
        value = value[tuple(slice(0, d) for d in shape)]
        if value.shape != tuple(shape):
            raise UnsupportedOp(f"{where(node)}: the {what} blocks of {block} do not cover the input {tuple(shape)}")
        return value
    if value.ndim != 1 or value.size != shape[axis]:
        raise UnsupportedOp(f"{where(node)}: a {what} of shape {value.shape} for axis {axis} of {tuple(shape)}")
    return value.reshape([-1 if k == axis else 1 for k in range(len(shape))])


def _attrs(node, allowed) -> dict:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    unknown = sorted(set(attrs) - set(allowed))
    if unknown:
        raise UnsupportedOp(f"{where(node)}: unsupported attribute(s) {unknown}")
    return attrs


def _value(ctx, node, k, what, required=True):
    """Input k as a constant numpy array (None where absent and optional); a computed one is refused by name."""
    name = node.input[k] if len(node.input) > k and node.input[k] else None
    if name is None:
        if required:
            raise UnsupportedOp(f"{where(node)}: the {what} is missing")
        return None
    if not ctx.is_const(name):
        raise UnsupportedOp(f"{where(node)}: the {node.op_type} {what} must be a constant (a scale or zero point "
                            "computed from the data is not an integer model's)")
    return np.asarray(ctx.consts[name])


def _shape(ctx, node, name):
    return tuple(np.shape(ctx.consts[name])) if ctx.is_const(name) else tuple(ctx.onnx_shape(name, node))


def _const(ctx, node, hint, value) -> str:
    key = f"{node.output[0]}/{hint}"
    ctx.consts[key] = np.asarray(value, np.float32)
    return key


def _output_type(node, zero_point, attrs) -> int:
    if zero_point is not None:
        return helper.np_dtype_to_tensor_dtype(zero_point.dtype)
    return attrs.get("output_dtype") or TensorProto.UINT8


def quantize_linear(ctx, node) -> list:
    attrs = _attrs(node, ("axis", "block_size", "output_dtype", "saturate", "precision"))
    x, out = node.input[0], node.output[0]
    scale, zero = _value(ctx, node, 1, "scale"), _value(ctx, node, 2, "zero point", required=False)
    to = _output_type(node, zero, attrs)
    if to not in RANGES:
        raise UnsupportedOp(f"{where(node)}: QuantizeLinear to {TensorProto.DataType.Name(to)} (MRT quantizes to "
                            "8-, 16-, 4- and 2-bit integers, not to float types)")
    shape = _shape(ctx, node, x)
    axis = attrs.get("axis", 1)
    axis, block = axis + len(shape) if axis < 0 else axis, attrs.get("block_size", 0)
    scale = along(node, scale, shape, axis, block, "scale")
    if not np.all(scale > 0) or not np.all(np.isfinite(scale)):
        raise UnsupportedOp(f"{where(node)}: a QuantizeLinear scale that is not finite and positive")
    lo, hi = RANGES[to]
    zero = np.zeros(()) if zero is None else along(node, zero, shape, axis, block, "zero point")
    scaled = f"{out}/scaled"
    nodes = [helper.make_node("Div", [x, _const(ctx, node, "scale", scale)], [scaled], name=f"{node.name}/scale")]
    if not np.any(zero):
        return nodes + [_clip(ctx, node, scaled, out, lo, hi)]
    if zero.ndim == 0:  # clip(u + z, lo, hi) = clip(u, lo - z, hi - z) + z: the clip reads the output's range only
        nodes.append(_clip(ctx, node, scaled, f"{out}/saturated", lo - zero, hi - zero))
        return nodes + [helper.make_node("Add", [f"{out}/saturated", _const(ctx, node, "zero_point", zero)], [out],
                                         name=f"{node.name}/zero_point")]
    nodes.append(helper.make_node("Add", [scaled, _const(ctx, node, "zero_point", zero)], [f"{out}/shifted"],
                                  name=f"{node.name}/zero_point"))
    return nodes + [_clip(ctx, node, f"{out}/shifted", out, lo, hi)]


def _clip(ctx, node, x, y, lo, hi) -> helper.NodeProto:
    tag = y.rsplit("/", 1)[-1] if y != node.output[0] else "saturate"
    bounds = [_const(ctx, node, f"{tag}_lo", lo), _const(ctx, node, f"{tag}_hi", hi)]
    return helper.make_node("Clip", [x, *bounds], [y], name=f"{node.name}/{tag}")


def _centred(ctx, node, k, zero, name_hint) -> tuple[list, str]:
    """Cast(input k) - zero (a constant of the input's broadcast shape): (nodes, the name of the result)."""
    name = node.input[k]
    if ctx.is_const(name):
        value = np.asarray(ctx.consts[name], np.float64) - (0 if zero is None else zero)
        return [], _const(ctx, node, name_hint, value)
    cast = f"{node.output[0]}/{name_hint}"
    nodes = [helper.make_node("Cast", [name], [cast], to=TensorProto.FLOAT, name=f"{node.name}/{name_hint}")]
    if zero is not None and np.any(zero):
        nodes.append(helper.make_node("Sub", [cast, _const(ctx, node, f"{name_hint}_zero_point", zero)],
                                      [f"{cast}/centred"], name=f"{node.name}/{name_hint}_zero_point"))
        cast = f"{cast}/centred"
    return nodes, cast


def _matmul_zero(ctx, node, k, what, rows: bool):
    """A MatMulInteger zero point as a constant broadcasting to its operand: a scalar, one per row of a (M -> M x 1)
    or per column of b (N), or the N-D form ONNX gives ([..., M, 1] / [..., 1, N])."""
    zero = _value(ctx, node, k, what, required=False)
    if zero is None:
        return None
    zero = np.asarray(zero, np.float64)
    if zero.size == 1:
        return zero.reshape(())
    return zero.reshape(-1, 1) if rows and zero.ndim == 1 else zero


def matmul_integer(ctx, node) -> list:
    _attrs(node, ())
    a_nodes, a = _centred(ctx, node, 0, _matmul_zero(ctx, node, 2, "a zero point", rows=True), "a")
    b_nodes, b = _centred(ctx, node, 1, _matmul_zero(ctx, node, 3, "b zero point", rows=False), "b")
    return a_nodes + b_nodes + [helper.make_node("MatMul", [a, b], [node.output[0]], name=f"{node.name}/matmul")]


def _per_channel(value, rank: int):
    """A per-tensor or per-output-channel constant of a conv's weights (M,) as (M, 1, ..., 1)."""
    if value is None:
        return None
    value = np.asarray(value, np.float64)
    return value.reshape(()) if value.size == 1 else value.reshape((-1,) + (1,) * (rank - 1))


def conv_integer(ctx, node) -> list:
    attrs = _attrs(node, CONV_ATTRS)
    x_zero = _value(ctx, node, 2, "x zero point", required=False)
    x_nodes, x = _centred(ctx, node, 0, None if x_zero is None else np.asarray(x_zero, np.float64).reshape(()), "x")
    w_zero = _per_channel(_value(ctx, node, 3, "w zero point", required=False), len(_shape(ctx, node, node.input[1])))
    w_nodes, w = _centred(ctx, node, 1, w_zero, "w")
    return x_nodes + w_nodes + [helper.make_node("Conv", [x, w], [node.output[0]], name=f"{node.name}/conv", **attrs)]


def _dequantized(node, k, axis, hint) -> tuple[list, str]:
    """DequantizeLinear of input k with its scale and zero point (inputs k + 1, k + 2) along `axis`."""
    out = f"{node.output[0]}/{hint}"
    return [helper.make_node("DequantizeLinear", list(node.input[k:k + 3]), [out], axis=axis,
                             name=f"{node.name}/{hint}")], out


def _requantized(ctx, node, y, k, rank) -> helper.NodeProto:
    """QuantizeLinear of float y by inputs k (scale) and k + 1 (zero point) into the node's output."""
    scale = _value(ctx, node, k, "y scale")
    axis = rank - 2 if scale.size > 1 else 1  # one scale per row of a QLinearMatMul's output
    return helper.make_node("QuantizeLinear", [y, *node.input[k:k + 2]], [node.output[0]], axis=axis,
                            name=f"{node.name}/quantize")


def qlinear_matmul(ctx, node) -> list:
    _attrs(node, ())
    for k, what in ((1, "a scale"), (2, "a zero point"), (4, "b scale"), (5, "b zero point"), (6, "y scale")):
        _value(ctx, node, k, what, required=k in (1, 4, 6))
    rank_a, rank_b = len(_shape(ctx, node, node.input[0])), len(_shape(ctx, node, node.input[3]))
    a_nodes, a = _dequantized(node, 0, max(rank_a - 2, 0), "a")
    b_nodes, b = _dequantized(node, 3, rank_b - 1, "b")
    y = f"{node.output[0]}/float"
    matmul = helper.make_node("MatMul", [a, b], [y], name=f"{node.name}/matmul")
    return a_nodes + b_nodes + [matmul, _requantized(ctx, node, y, 6, max(rank_a, rank_b))]


def qlinear_conv(ctx, node) -> list:
    attrs = _attrs(node, CONV_ATTRS)
    x_scale, w_scale = _value(ctx, node, 1, "x scale"), _value(ctx, node, 4, "w scale")
    for k, what in ((2, "x zero point"), (5, "w zero point")):
        _value(ctx, node, k, what, required=False)
    x_nodes, x = _dequantized(node, 0, 1, "x")
    w_nodes, w = _dequantized(node, 3, 0, "w")
    inputs = [x, w]
    bias = _value(ctx, node, 8, "bias", required=False)
    if bias is not None:  # int32 at scale x_scale * w_scale per output channel, zero point 0
        inputs.append(_const(ctx, node, "bias", np.asarray(bias, np.float64) * float(x_scale.reshape(-1)[0])
                             * np.asarray(w_scale, np.float64).reshape(-1)))
    y = f"{node.output[0]}/float"
    conv = helper.make_node("Conv", inputs, [y], name=f"{node.name}/conv", **attrs)
    return x_nodes + w_nodes + [conv, _requantized(ctx, node, y, 6, len(_shape(ctx, node, node.input[0])))]


def dynamic_quantize_linear(ctx, node) -> list:
    raise UnsupportedOp(f"{where(node)}: DynamicQuantizeLinear computes its scale and zero point from the data "
                        "(the input's min and max): a data-dependent scale an integer model cannot express")


DECOMPOSE = {"QuantizeLinear": quantize_linear, "MatMulInteger": matmul_integer, "ConvInteger": conv_integer,
             "QLinearMatMul": qlinear_matmul, "QLinearConv": qlinear_conv,
             "DynamicQuantizeLinear": dynamic_quantize_linear}
