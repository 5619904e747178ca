"""Importers for ONNX's integer arithmetic and for selections by computed integers: Mod (fmod 0 and 1, integers and
floats) and BitShift as the IR ops of mrt.float_ops.integer (rules: mrt.quantize.rules_integer; Div of integers is
ops_text.div's IR int_div), element-wise and broadcasting, so they work on either form of a tensor (one_sample.py);
and Gather by computed indices from an activation, as 0/1 flags (ops_index.gather)."""
from __future__ import annotations

from mrt.onnx_import import ops_index, ops_text


def _integer(ctx, node) -> bool:
    """Whether ONNX types the node's result an integer (ONNX's type inference, ctx.integer_tensors)."""
    return node.output[0] in ctx.integer_tensors


def mod(ctx, node, attrs):
    a, b = node.input
    fmod = int(attrs.get("fmod", 0))
    ctx.emit("mod", [ctx.tensor(a, node), ctx.tensor(b, node)], {"fmod": fmod, "integer": int(_integer(ctx, node))},
             node, out=node.output[0])


def gather(ctx, node, attrs):
    """Gather by computed indices from an activation, or from a constant along another axis than its rows, selects
    by flags (ops_index.gather); constant indices and an embedding lookup (a constant table's rows) are ops_text's."""
    data, idx = node.input
    axis = attrs.get("axis", 0)
    if ctx.is_const(idx) or ctx.is_const(data) and axis in (0, -len(ctx.onnx_shape(data, node))):
        return ops_text.gather(ctx, node, attrs)
    ops_index.gather(ctx, node, attrs)


HANDLERS: dict = {"Mod": (mod, {10, 13, 28}), "Gather": (gather, {13})}
