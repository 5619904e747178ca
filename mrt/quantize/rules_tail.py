"""Quantization rules of the ONNX tail's float ops (mrt.float_ops.tail). RULES: {float op: rule}.

A Cast of a float to an integer reads each quantized value at its interval's end away from zero
(_toward_magnitude). The trigonometric functions and GridSample's pixel weights are one lookup table each over the input's proven integer range (rules._table); a power of two tensors is mrt.quantize.rules_pow's."""
from __future__ import annotations

import numpy as np

from mrt.float_ops.tail import TRIG, grid_weight
from mrt.float_ops.unary import UNARY_FUNCTIONS
from mrt.quantize.rules_pow import pow_
from mrt.quantize import rules
from mrt.quantize.rules import _table


CASTS = ("trunc", "wrap_int")  # a float cast to an integer type (mrt.onnx_import.ops_core._cast_to)


def _toward_magnitude(fn, **attrs):
    """A Cast of a float to an integer (trunc; wrap_int for 4- and 2-bit types) as a table whose entry for each
    quantized value is fn at the end of that value's rounding interval away from zero (just inside) rather than at
    its centre: an integer-valued input (ids, counts held as floats) then truncates to itself, where the centre
    of k quantized at a scale that does not divide it (7 at 15/127: 6.97) truncated to k - 1; for other inputs
    either point of the interval is as likely the true value."""
    def at(v):
        v = np.asarray(v, np.float64)
        step = float(v[1] - v[0]) if v.size > 1 else 0.0
        return fn(v + np.sign(v) * 0.499 * step, **attrs)
    return at


def _cast_rule(fn):
    def rule(qz, node):
        return _table(qz, node, _toward_magnitude(fn, **node.attrs))
    return rule


def univariate(qz, node):
    """A fused program that is one Cast to an integer reads its values as _cast_rule does; any other program is
    rules.univariate's."""
    program = node.attrs["program"]
    if len(program) == 1 and program[0][0] in CASTS and program[0][1] == ("x",):
        return _table(qz, node, _toward_magnitude(UNARY_FUNCTIONS[program[0][0]], **dict(program[0][2])))
    return rules.univariate(qz, node)


def _trig(fn):
    def rule(qz, node):
        return _table(qz, node, fn)
    return rule


RULES: dict = {
    **{name: _trig(fn) for name, fn in TRIG.items()},
    "pow": pow_,  # of two tensors (mrt.quantize.rules_pow)
    **{name: _cast_rule(UNARY_FUNCTIONS[name]) for name in CASTS}, "univariate": univariate,
    "grid_weight": lambda qz, node: _table(qz, node, lambda g: grid_weight(g, **node.attrs)),
}
