"""ONNX ops whose meaning is a short chain of other ONNX ops once their constant operands are known, imported as
that chain (the importer imports the nodes `DECOMPOSE[op](ctx, node)` gives, as it does a function body).

DequantizeLinear (a QDQ model's weights and inputs, and the integer inputs of a model quantized elsewhere):
y = (x - zero_point) * scale, with scale and zero_point constants per tensor, per axis or per block, is
Cast(x) - zero_point, times scale, each broadcast to x's shape. Its result is a float tensor like any other, which
the converter then quantizes on its own terms. The other quantized-integer ops (QuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul, QLinearConv; DynamicQuantizeLinear refused) are decompose_qlinear's.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where
from mrt.onnx_import.decompose_qlinear import DECOMPOSE as QLINEAR, along


def _constant(ctx, node, hint, value):
    key = f"{node.output[0]}/{hint}"
    ctx.consts[key] = np.asarray(value, np.float32)
    return key


def dequantize_linear(ctx, node) -> list:
    x = node.input[0]
    shape = ctx.consts[x].shape if ctx.is_const(x) else ctx.onnx_shape(x, node)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis = attrs.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    block = attrs.get("block_size", 0)
    operands = {}
    for k, what in ((1, "scale"), (2, "zero point")):
        if len(node.input) > k and node.input[k]:
            if not ctx.is_const(node.input[k]):
                raise UnsupportedOp(f"{where(node)}: the DequantizeLinear {what} must be a constant")
            operands[what] = along(node, ctx.consts[node.input[k]], shape, axis, block, what)
    cast = f"{node.output[0]}/float"
    nodes = [helper.make_node("Cast", [x], [cast], to=TensorProto.FLOAT, name=f"{node.name}/cast")]
    if "zero point" in operands and np.any(operands["zero point"]):
        centred = f"{node.output[0]}/centred"
        nodes.append(helper.make_node("Sub", [cast, _constant(ctx, node, "zero_point", operands["zero point"])],
                                      [centred], name=f"{node.name}/zero_point"))
        cast = centred
    nodes.append(helper.make_node("Mul", [cast, _constant(ctx, node, "scale", operands["scale"])],
                                  [node.output[0]], name=f"{node.name}/scale"))
    return nodes


DECOMPOSE = {"DequantizeLinear": dequantize_linear, **QLINEAR}
