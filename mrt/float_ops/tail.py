"""Float ops of the ONNX tail (issue 30/31): {name: (run, shape, attrs, arity)}.

The inverse and hyperbolic trigonometric functions and Tan are element-wise functions of one tensor that only a
lookup table computes (mrt.quantize.rules_tail); each follows numpy's float64 function, rounded to float32.
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


TAIL: dict = {
    **{name: (_elementwise(fn), _same, (), (1, 1)) for name, fn in TRIG.items()},
}
