"""A per-feature affine map in front of a tree ensemble, folded into its thresholds: onnxruntime's Scaler
(y = (x - offset) * scale, StandardScaler, RobustScaler) or the Mul / Add / Sub / Div by constants that
skl2onnx writes for MinMaxScaler, MaxAbsScaler and the like.

onnxruntime computes each step in float32, e.g. y = fl32(fl32(x - offset) * scale) (scaler.cc), and the
trees compare y with float32 thresholds. For one feature each step is monotone in x (non-decreasing for a
positive factor, non-increasing for a negative one, constant for a zero factor), so the float32 x with
`y <= t` form a prefix (or a suffix) of the float32 numbers, and the split on y is exactly one split on x:

    scale > 0:  y <= t  <=>  x <= x*      x* = the largest float32 x with y(x) <= t
    scale < 0:  y <= t  <=>  not x <= x*  x* = the largest float32 x with y(x) > t (children swapped)

`y < t` is `y <= t'` with t' the float32 below t. x* is found by bisection over the float32 numbers in
their integer order, evaluating y with onnxruntime's float32 arithmetic, so the folded model takes the
float model's branch for every finite float32 input: no tolerance, nothing rounded. A prefix that is
empty or everything becomes `x < -FLT_MAX` (never) or `x <= FLT_MAX` (always). The raw input then
goes to the client as threshold codes (cvm.threshold_codes) like any other tree input.
"""
from __future__ import annotations

import numpy as np

from mrt.trees.ensemble import Ensemble

FMAX = np.float32(np.finfo(np.float32).max)


def _key(v: np.ndarray) -> np.ndarray:
    """float32 -> int64 keys in the numbers' order (-0.0 just below +0.0)."""
    b = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF) - 1, b)


def _value(k: np.ndarray) -> np.ndarray:
    b = np.where(k < 0, (-(k + 1)) | 0x80000000, k).astype(np.uint32)
    return b.view(np.float32)


STEPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def scaled(x, steps) -> np.ndarray:
    """The steps [(op, float32 constant broadcast to x)] applied in order, each rounded to float32."""
    y = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for op, c in steps:
            y = STEPS[op](y, np.asarray(c, np.float32)).astype(np.float32)
    return y


def direction(steps) -> np.ndarray:
    """+1 / -1 / 0 per element: the sign of the composed map's slope."""
    sign = np.ones(np.broadcast_shapes(*(np.shape(c) for _, c in steps)), np.int64) if steps else np.int64(1)
    for op, c in steps:
        if op in ("mul", "div"):
            sign = sign * np.sign(np.asarray(c, np.float64)).astype(np.int64)
    return sign


def _last_true(pred, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per element, the largest key k in [key(-FMAX), key(FMAX)] with pred(k) (pred true on a prefix), and
    whether any key satisfies it."""
    lo = np.full(n, _key(-FMAX), np.int64)
    hi = np.full(n, _key(FMAX), np.int64)
    some = pred(lo)
    for _ in range(34):
        mid = (lo + hi + 1) // 2
        ok = pred(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo, some


def fold(ens: Ensemble, steps) -> Ensemble:
    """The ensemble on the unscaled input: every split rewritten as above (steps: [(op, one float32 per
    feature)], applied in order; no division by 0)."""
    live = ens.feature >= 0
    f = np.where(live, ens.feature, 0).ravel()
    per_split = [(op, np.asarray(c, np.float32)[f]) for op, c in steps]
    t = ens.threshold.astype(np.float32)
    flat_t = np.where(ens.strict == 1, np.nextafter(t, np.float32(-np.inf)), t).ravel()   # y < t == y <= t'
    holds = lambda k: scaled(_value(k), per_split) <= flat_t                 # noqa: E731  (y(x) <= t')
    sign = np.broadcast_to(direction(per_split), flat_t.shape)
    pred = lambda k: np.where(sign > 0, holds(k), ~holds(k))                 # noqa: E731  (a prefix)
    k, some = _last_true(pred, flat_t.size)
    threshold = np.where(some, _value(k), -FMAX).astype(np.float32)
    strict = np.where(some, 0, 1)
    swap = sign < 0
    zero = sign == 0                                                         # y is constant: one branch
    always = holds(_key(np.zeros_like(flat_t)))
    threshold = np.where(zero, np.where(always, FMAX, -FMAX), threshold).astype(np.float32)
    strict = np.where(zero, np.where(always, 0, 1), strict)
    swap &= ~zero
    shape = ens.feature.shape
    swap = swap.reshape(shape) & live
    return Ensemble(ens.feature, np.where(live, threshold.reshape(shape), ens.threshold).astype(np.float32),
                    np.where(live, strict.reshape(shape), ens.strict).astype(np.int64),
                    np.where(swap, ens.right, ens.left), np.where(swap, ens.left, ens.right),
                    ens.leaves, ens.base)
