"""Importers for ONNX's integer arithmetic: Div of integers (truncating; ops_text.div hands it over), Mod (fmod 0
and 1, integers and floats) and BitShift, as the IR ops of mrt.float_ops.integer (rules: mrt.quantize.rules_integer).
Element-wise and broadcasting, so they work on either form of a tensor (one_sample.py)."""
from __future__ import annotations


def _integer(ctx, node) -> bool:
    """Whether ONNX types the node's result an integer (ONNX's type inference, ctx.integer_tensors)."""
    return node.output[0] in ctx.integer_tensors


def int_div(ctx, node, attrs):
    """Div of integers: truncation toward zero (ops_text.div calls it for an integer result)."""
    a, b = node.input
    ctx.emit("int_div", [ctx.tensor(a, node), ctx.tensor(b, node)], {}, node, out=node.output[0])


def mod(ctx, node, attrs):
    a, b = node.input
    fmod = int(attrs.get("fmod", 0))
    ctx.emit("mod", [ctx.tensor(a, node), ctx.tensor(b, node)], {"fmod": fmod, "integer": int(_integer(ctx, node))},
             node, out=node.output[0])


HANDLERS: dict = {"Mod": (mod, {10, 13, 28})}
