"""Window and axis reductions: max_pool2d, sum, max."""
from __future__ import annotations

import numpy as np

from .. import gas
from ..arith import window_out
from ..limits import MAX_DIM, MAX_GEOMETRY
from . import window
from .base import Attr, OpDef, elements, require, require_range, with_batch

_SENTINEL = np.iinfo(np.int64).min


def _pool_geometry(shape, a):
    (_, h, w), (kh, kw) = shape, a["kernel"]
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilations"], a["pads"]
    return window_out(h, kh, sh, dh, pt, pb), window_out(w, kw, sw, dw, pl, pr)


def max_pool2d_shape(args, a):
    x = args[0].shape
    require(len(x) == 3, "shape.rank", f"max_pool2d input must be [C,H,W] per sample, got {x}")
    for key, n in (("kernel", 2), ("strides", 2), ("dilations", 2)):
        require(len(a[key]) == n, f"attrs.{key}", f"{key} must be {n} ints")
        require_range(a[key], 1, MAX_GEOMETRY, f"attrs.{key}", key)
    require(len(a["pads"]) == 4, "attrs.pads", "pads must be 4 ints")
    require_range(a["pads"], 0, MAX_GEOMETRY, "attrs.pads", "pads")
    oh, ow = _pool_geometry(x, a)
    require(oh >= 1 and ow >= 1, "shape.empty", f"max_pool2d output would be empty ({oh}x{ow})")
    require(max(oh, ow) <= MAX_DIM, "limits.dim", f"max_pool2d output {oh}x{ow} exceeds {MAX_DIM} per axis")
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, _, _) = a["kernel"], a["strides"], a["dilations"], a["pads"]
    require(window.taps_hit(oh, x[1], kh, sh, dh, pt) and window.taps_hit(ow, x[2], kw, sw, dw, pl), "attrs.pads",
            "a max_pool2d window would lie entirely in the padding")
    return (x[0], oh, ow)


def max_pool2d_cost(args, a, out):
    return elements(out) * (a["kernel"][0] * a["kernel"][1] * gas.GAS_PER_COMPARE + gas.GAS_PER_ELEMENT)


def max_pool2d_ref(x, *, kernel, strides, pads, dilations):
    """Max over the pieces of window.axis_pieces (taps in the padding are never read); every window
    has a tap in the input (checked at load), so no sentinel survives."""
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, _, _) = kernel, strides, dilations, pads
    _, _, h, w = x.shape
    oh, ow = _pool_geometry(x.shape[1:], dict(kernel=kernel, strides=strides, dilations=dilations, pads=pads))
    out = np.full(x.shape[:2] + (oh, ow), _SENTINEL, np.int64)
    for ph in window.axis_pieces(h, oh, kh, sh, dh, pt):
        for pw in window.axis_pieces(w, ow, kw, sw, dw, pl):
            axes = tuple(ax for ax, p in ((2, ph), (3, pw)) if not p.tap_major)
            v = x[:, :, ph.src, pw.src]
            v = v.max(axis=axes, keepdims=True) if axes else v
            np.maximum(out[:, :, ph.out, pw.out], v, out=out[:, :, ph.out, pw.out])
    return out


MAX_POOL2D = OpDef(
    "max_pool2d", 1, 1,
    {"kernel": Attr("ints"), "strides": Attr("ints", (1, 1)), "pads": Attr("ints", (0, 0, 0, 0)),
     "dilations": Attr("ints", (1, 1))},
    max_pool2d_shape, lambda args, a, out: (args[0].lo, args[0].hi), max_pool2d_cost, max_pool2d_ref,
    activation_inputs=(0,), doc="y[c,i,j] = max over the window's taps inside the input (padding is ignored)",
    compares=True,
)


def _reduce_shape(args, a):
    x, axes = args[0].shape, a["axes"]
    require(len(axes) >= 1 and len(set(axes)) == len(axes) and all(0 <= ax < len(x) for ax in axes),
            "attrs.axes", f"axes {list(axes)} must be distinct per-sample axes of a rank-{len(x)} sample")
    require(a["keepdims"] in (0, 1), "attrs.keepdims", "keepdims must be 0 or 1")
    if a["keepdims"]:
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    out = tuple(d for i, d in enumerate(x) if i not in axes)
    require(len(out) >= 1, "shape.rank", "a reduction may not remove every per-sample axis (use keepdims=1)")
    return out


def _reduce_count(args, a) -> int:
    return elements(tuple(args[0].shape[ax] for ax in a["axes"]))


def sum_bound(args, a, out):
    n = _reduce_count(args, a)
    return n * args[0].lo, n * args[0].hi


def _reduce_cost(args, a, out):
    return elements(args[0].shape) * gas.GAS_PER_COMPARE + elements(out) * gas.GAS_PER_ELEMENT


_REDUCE_ATTRS = {"axes": Attr("ints"), "keepdims": Attr("int", 1)}

SUM = OpDef("sum", 1, 1, _REDUCE_ATTRS, _reduce_shape, sum_bound, _reduce_cost,
            lambda x, *, axes, keepdims: x.sum(axis=with_batch(axes), keepdims=bool(keepdims)),
            activation_inputs=(0,), doc="y = sum of x over axes")
MAX = OpDef("max", 1, 1, _REDUCE_ATTRS, _reduce_shape, lambda args, a, out: (args[0].lo, args[0].hi), _reduce_cost,
            lambda x, *, axes, keepdims: x.max(axis=with_batch(axes), keepdims=bool(keepdims)),
            activation_inputs=(0,), doc="y = max of x over axes", compares=True)

OPS = [MAX_POOL2D, SUM, MAX]
