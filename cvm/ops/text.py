"""Opset 2: the two ops of transformer text models that no exact rule over opset-1 ops computes at a
reasonable cost (docs/spec.md, section 15):

- gather: rows of a constant table picked by an activation index (token and position embeddings). A
  lookup table per output column would need one lut node per embedding dimension; a one-hot dense layer
  V multiply-accumulates per output element.
- isqrt: the exact integer square root (LayerNorm's standard deviation, an L2 norm). A table covers at most
  2^16 input values; a variance is a 31-bit integer.

Everything else of a transformer block (mean and variance, masked softmax, the attention matmuls, the
affine part of LayerNorm) is built by MRT from opset-1 ops; the spec's section 15 says how.
"""
from __future__ import annotations

import numpy as np

from .. import gas
from .base import TABLE_MONOTONE, OpDef, elements, require

# ---------------------------------------------------------------- gather


def gather_shape(args, a):
    x, t = args[0], args[1]
    require(len(t.shape) >= 1, "shape.table", "gather table must have at least one axis (its rows)")
    require(0 <= x.lo and x.hi < t.shape[0], "value.gather_index",
            f"index interval [{x.lo}, {x.hi}] is not inside the table's rows [0, {t.shape[0] - 1}]")
    return tuple(x.shape) + tuple(t.shape[1:])


def gather_bound(args, a, out):
    """The table's [min, max]: a constant's interval is its exact min and max (known at no extra cost,
    however many nodes read the table)."""
    return args[1].lo, args[1].hi


def gather_cost(args, a, out):
    return elements(args[0].shape) * gas.GAS_PER_LOOKUP + elements(out) * gas.GAS_PER_ELEMENT


def gather_ref(x, table):
    return table[x]


GATHER = OpDef("gather", 2, 2, {}, gather_shape, gather_bound, gather_cost, gather_ref,
               const_inputs=(1,), activation_inputs=(0,),
               doc="y[i..., j...] = t[x[i...], j...]: row x of the table for each index element")


# ---------------------------------------------------------------- isqrt

def isqrt_scalar(v: int) -> int:
    """floor(sqrt(max(v, 0))) of one Python int, exactly (the bound rule's)."""
    import math
    return math.isqrt(max(int(v), 0))


def isqrt_ref(x):
    """floor(sqrt(max(x, 0))) elementwise, int64. float64 sqrt of an integer below 2^53 is within one of
    the answer; one correction step each way makes it exact (x is an activation: |x| < 2^31)."""
    v = np.maximum(np.asarray(x, np.int64), 0)
    y = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    y -= (y * y > v).astype(np.int64)
    y += ((y + 1) * (y + 1) <= v).astype(np.int64)
    return y


ISQRT = OpDef("isqrt", 1, 1, {}, lambda args, a: args[0].shape,
              lambda args, a, out: (isqrt_scalar(args[0].lo), isqrt_scalar(args[0].hi)),
              lambda args, a, out: elements(out) * (gas.GAS_PER_DIVISION + gas.GAS_PER_ELEMENT), isqrt_ref,
              activation_inputs=(0,), doc="y = floor(sqrt(max(x, 0))): the largest y >= 0 with y*y <= max(x, 0)",
              table=TABLE_MONOTONE)

OPS: list[OpDef] = [GATHER, ISQRT]
