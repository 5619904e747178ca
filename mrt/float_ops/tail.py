"""Float ops of the ONNX tail (issue 30/31): {name: (run, shape, attrs, arity)}.

The inverse and hyperbolic trigonometric functions and Tan are element-wise functions of one tensor that only a
lookup table computes (mrt.quantize.rules_tail); each follows numpy's float64 function, rounded to float32. So is
grid_weight, the weight of one pixel index at a GridSample coordinate (mrt.onnx_import.ops_grid_sample).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32

TRIG = {"acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
        "atanh": np.arctanh, "tan": np.tan, "cosh": np.cosh, "sinh": np.sinh}


def _elementwise(fn):
    """A float64 function as an IR run function (float32 in and out; NaN or inf outside its domain, which the
    lookup table's rule maps to 0 or the output range)."""
    def run(x):
        with np.errstate(all="ignore"):
            return fn(np.asarray(x, np.float64)).astype(F32)
    return run


def _same(x):
    return x


def grid_weight(g, *, mode, padding_mode, align_corners, opset, size, index):
    """The weight of pixel `index` of an axis of length `size` at normalised grid coordinates g (GridSample's
    interpolation with its padding, mrt.onnx_import.ops_grid_sample): onnx's reference GridSample sampling an
    image of one row that is 1 at `index`, at the points (g, 0)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    flat = np.asarray(g, np.float32).reshape(-1)
    image = (np.arange(size) == index).astype(np.float32).reshape(1, 1, 1, size)
    grid = np.stack([flat, np.zeros_like(flat)], axis=-1).reshape(1, 1, -1, 2)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding_mode,
                            align_corners=align_corners)
    y = ReferenceEvaluator(node, opsets={"": opset}).run(None, {"x": image, "grid": grid})[0]
    return np.asarray(y, np.float64).reshape(np.shape(g))


TAIL: dict = {
    **{name: (_elementwise(fn), _same, (), (1, 1)) for name, fn in TRIG.items()},
    "grid_weight": (lambda g, **a: grid_weight(g, **a).astype(F32), lambda g, **a: g,
                    ("mode", "padding_mode", "align_corners", "opset", "size", "index"), (1, 1)),
}
