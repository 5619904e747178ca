"""Importers for ONNX's integer arithmetic and for selections by computed integers: Mod (fmod 0 and 1, integers and
floats) and BitShift as the IR ops of mrt.float_ops.integer (rules: mrt.quantize.rules_integer; Div of integers is
ops_text.div's IR int_div), element-wise and broadcasting, so they work on either form of a tensor (one_sample.py);
Gather by computed indices from an activation, as 0/1 flags (ops_index.gather); the Bitwise ops; and, from
ops_scatter, ScatterElements, ScatterND and TopK."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from mrt.errors import UnsupportedOp
from mrt.onnx_import import ops_index, ops_scatter, ops_text
from mrt.onnx_import.attrs import where

WIDTHS = {TensorProto.INT8: (8, 1), TensorProto.INT16: (16, 1), TensorProto.INT32: (32, 1), TensorProto.INT64: (64, 1),
          TensorProto.UINT8: (8, 0), TensorProto.UINT16: (16, 0), TensorProto.UINT32: (32, 0),
          TensorProto.UINT64: (64, 0)}  # ONNX integer type -> (bits, signed)


def _integer(ctx, node) -> bool:
    """Whether ONNX types the node's result an integer (ONNX's type inference, ctx.integer_tensors)."""
    return node.output[0] in ctx.integer_tensors


def mod(ctx, node, attrs):
    a, b = node.input
    fmod = int(attrs.get("fmod", 0))
    ctx.emit("mod", [ctx.tensor(a, node), ctx.tensor(b, node)], {"fmod": fmod, "integer": int(_integer(ctx, node))},
             node, out=node.output[0])


def _width(ctx, node) -> tuple[int, int]:
    """(bits, signed) of the integer type T of a node whose operands and result share it: a constant operand's
    dtype, else the result's type as the model declares it or ONNX's type inference gives it (where the import
    keeps the model, ctx.onnx_model), else (0, 1): not known."""
    for name in node.input:
        if ctx.is_const(name) and np.asarray(ctx.consts[name]).dtype.kind in "iu":
            dtype = np.asarray(ctx.consts[name]).dtype
            return dtype.itemsize * 8, int(dtype.kind == "i")
    model = getattr(ctx, "onnx_model", None)
    if model is None:
        return 0, 1
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in [*g.input, *g.output, *g.value_info]}
    if node.output[0] not in types:
        try:
            g = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # noqa: BLE001 - a model inference cannot read: the type stays unknown
            return 0, 1
        types = {vi.name: vi.type.tensor_type.elem_type for vi in [*g.value_info, *g.output]}
    return WIDTHS.get(types.get(node.output[0]), (0, 1))


def bit_shift(ctx, node, attrs):
    direction = attrs.get("direction")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    bits, signed = _width(ctx, node) if direction == "LEFT" else (0, 1)  # a right shift needs no width
    ctx.emit("bit_shift", [ctx.tensor(i, node) for i in node.input],
             {"direction": direction, "bits": bits, "signed": signed}, node, out=node.output[0])


MAX_NOT_BITS = 30  # an unsigned Not is 2^bits - 1 - x: an int32 value up to this width


def bitwise(ctx, node, attrs):
    """BitwiseAnd / Or / Xor of two's-complement integers (no width needed: the result's bits above the inputs'
    repeat their sign bits); BitwiseNot is -x - 1 for a signed type and 2^bits - 1 - x for an unsigned one, whose
    width comes from the model's types (_width)."""
    op = node.op_type[len("Bitwise"):].lower()
    bits, signed = _width(ctx, node) if op == "not" else (0, 1)
    if op == "not" and (not bits or not signed and bits > MAX_NOT_BITS):
        raise UnsupportedOp(f"{where(node)}: BitwiseNot of " + (f"uint{bits} gives values past CVM's int32" if bits
                                                                 else "a type the import did not learn"))
    ctx.emit("bitwise", [ctx.tensor(i, node) for i in node.input], {"op": op, "bits": bits, "signed": signed}, node,
             out=node.output[0])


def gather(ctx, node, attrs):
    """Gather by computed indices from an activation, or from a constant along another axis than its rows, selects
    by flags (ops_index.gather); constant indices and an embedding lookup (a constant table's rows) are ops_text's."""
    data, idx = node.input
    axis = attrs.get("axis", 0)
    if ctx.is_const(idx) or ctx.is_const(data) and axis in (0, -len(ctx.onnx_shape(data, node))):
        return ops_text.gather(ctx, node, attrs)
    ops_index.gather(ctx, node, attrs)


HANDLERS: dict = {"Mod": (mod, {10, 13, 28}), "BitShift": (bit_shift, {11, 28}), "Gather": (gather, {13}),
                  **{f"Bitwise{op}": (bitwise, {18}) for op in ("And", "Or", "Xor", "Not")}, **ops_scatter.HANDLERS}
