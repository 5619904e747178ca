"""Element-wise float functions with no integer rule of their own, and `univariate`, the node the
univariate fusion pass (mrt.passes.fuse_univariate) makes of any chain of element-wise ops on one
tensor: the quantizer turns it into one lookup table over the input's proven integer range.

The functions follow ONNX's definitions (Gelu's two forms, Selu's constants, Mish = x tanh(softplus x),
HardSwish = x relu6(x + 3) / 6); comparisons give 0.0 / 1.0 and `where` takes any non-zero as true, so
boolean tensors live in float32 like every other IR tensor.
"""
from __future__ import annotations

import math
from types import MappingProxyType

import ml_dtypes
import numpy as np
from scipy import special

from mrt.errors import GraphError
from mrt.float_ops.elementwise import ELEMENTWISE
from mrt.float_ops.shapes import broadcast

F32 = np.float32
SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875  # ONNX's defaults


def _f(fn):
    """A float64 function as an IR run function (float32 in and out; no warnings for
    out-of-domain inputs, whose NaN/inf the lookup-table rule handles)."""
    def run(*xs, **attrs):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*(np.asarray(x, np.float64) for x in xs), **attrs)).astype(F32)
    return run


def _softplus(x):
    return np.logaddexp(0.0, x)


def _gelu(x, *, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + special.erf(x / math.sqrt(2)))


UNARY_FUNCTIONS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "reciprocal": lambda x: 1 / x, "neg": np.negative,
    "abs": np.abs, "erf": special.erf, "softplus": _softplus, "softsign": lambda x: x / (1 + np.abs(x)),
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "trunc": np.trunc,  # Cast of a float to an integer type
    "not": lambda x: (x == 0).astype(np.float64),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "elu": lambda x, *, alpha: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
    "celu": lambda x, *, alpha: np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha)),
    "selu": lambda x, *, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
    "thresholded_relu": lambda x, *, alpha: np.where(x > alpha, x, 0.0),
    "gelu": _gelu,
}
def _narrow_float(x, format, saturate):
    """Cast to an ONNX 8- or 4-bit float (ml_dtypes' `format`) and back: rounded to its grid from float32, to
    nearest even; saturate clips to its largest finite value first (ONNX's default)."""
    narrow = getattr(ml_dtypes, format)
    if saturate:
        big = float(ml_dtypes.finfo(narrow).max)
        x = np.clip(x, -big, big)
    return x.astype(F32).astype(narrow).astype(np.float64)


def _wrap_int(x, bits, signed):
    """Cast to an ONNX 2- or 4-bit integer: truncated toward zero, then wrapped to `bits` bits."""
    u = np.mod(np.trunc(x), 2 ** bits)
    return u - 2 ** bits * (u >= 2 ** (bits - 1)) if signed else u


UNARY_FUNCTIONS.update({"narrow_float": _narrow_float, "wrap_int": _wrap_int})  # Cast to float8/4, int4/2

UNARY_ATTRS = {"narrow_float": ("format", "saturate"), "wrap_int": ("bits", "signed"), "elu": ("alpha",), "celu": ("alpha",), "selu": ("alpha", "gamma"), "thresholded_relu": ("alpha",),
               "gelu": ("approximate",)}

BINARY_FUNCTIONS = {
    "pow": np.power, "minimum": np.minimum, "maximum": np.maximum,
    "greater": lambda a, b: (a > b).astype(np.float64), "less": lambda a, b: (a < b).astype(np.float64),
    "greater_equal": lambda a, b: (a >= b).astype(np.float64),
    "less_equal": lambda a, b: (a <= b).astype(np.float64), "equal": lambda a, b: (a == b).astype(np.float64),
    "and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float64),
    "or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float64),
    "xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float64),
}


def where(c, a, b):
    return np.where(np.asarray(c) != 0, a, b).astype(F32)


def _binary_shape(name):
    def rule(a, b):
        return broadcast(a, b, op=name)
    return rule


# ---------------------------------------------------------------- univariate: a program on one tensor

def run_program(x, program):
    """Evaluate a univariate program on x: steps (op, args, attrs) where an arg is "x", the index of an
    earlier step, or a float constant; the value of the last step is the result."""
    values = []
    for op, args, attrs in program:
        ins = [x if a == "x" else values[a] if isinstance(a, int) else np.asarray(a, F32) for a in args]
        values.append(np.asarray(PROGRAM_OPS[op][0](*ins, **dict(attrs)), F32))
    return values[-1]


def univariate(x, *, program):
    return run_program(x, program)


def univariate_shape(x, *, program):
    if not program:
        raise GraphError("univariate: the program is empty")
    for k, (_op, args, _attrs) in enumerate(program):
        if any(isinstance(a, int) and not 0 <= a < k for a in args):
            raise GraphError(f"univariate: step {k} reads a step that is not before it")
    return x


# name: (run, shape rule, attribute names, (min inputs, max inputs))
UNARY = {
    **{name: (_f(fn), lambda x, **a: x, UNARY_ATTRS.get(name, ()), (1, 1)) for name, fn in UNARY_FUNCTIONS.items()},
    **{name: (_f(fn), _binary_shape(name), (), (2, 2)) for name, fn in BINARY_FUNCTIONS.items()},
    "where": (where, lambda c, a, b: broadcast(c, a, b, op="where"), (), (3, 3)),
    "univariate": (univariate, univariate_shape, ("program",), (1, 1)),
}
NONLINEAR = frozenset(UNARY) - {"univariate", "neg"}  # ops only a table computes (no rule of their own)
# what a program's steps may be (mrt.passes.fuse_univariate.FUSIBLE: element-wise ops), their entries as above
PROGRAM_OPS = MappingProxyType({**ELEMENTWISE, **UNARY})
