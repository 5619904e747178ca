"""Quantization rules of the ONNX tail's float ops (mrt.float_ops.tail). RULES: {float op: rule}.

The trigonometric functions and GridSample's pixel weights are one lookup table each over the input's proven integer range (rules._table); a power of two tensors is mrt.quantize.rules_pow's."""
from __future__ import annotations

from mrt.float_ops.tail import TRIG, grid_weight
from mrt.quantize.rules_pow import pow_
from mrt.quantize.rules import _table


def _trig(fn):
    def rule(qz, node):
        return _table(qz, node, fn)
    return rule


RULES: dict = {
    **{name: _trig(fn) for name, fn in TRIG.items()},
    "pow": pow_,  # of two tensors (mrt.quantize.rules_pow)
    "grid_weight": lambda qz, node: _table(qz, node, lambda g: grid_weight(g, **node.attrs)),
}
