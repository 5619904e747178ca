"""Multiply-accumulate ops: conv2d, dense, matmul.

Their bounds hull the input interval with 0 and count the bias only on the side that widens the
interval, so that every partial sum, in any summation order and with the bias added first or last,
lies inside the proven interval too (a fast backend may accumulate in int32).
"""
from __future__ import annotations

import numpy as np

from .. import gas
from ..limits import MAX_GEOMETRY
from . import window
from ..arith import channel_bounds, hull0, window_out
from .base import Attr, OpDef, elements, require, require_range


def _mac_bound(args) -> tuple[int, int]:
    """conv2d / dense: the bound of arith.mac_bound from the weight's and the bias' cached facts
    (computed once per constant)."""
    sides = args[2].bias_sides() if len(args) == 3 else None
    lo, hi = channel_bounds(args[1].row_sums(), hull0(args[0].lo, args[0].hi), sides)
    return int(lo.min()), int(hi.max())


# ---------------------------------------------------------------- conv2d

def _conv_geometry(x: tuple, w: tuple, a: dict) -> tuple[int, int]:
    (_, h, wd), (_, _, kh, kw) = x, w
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilations"], a["pads"]
    return window_out(h, kh, sh, dh, pt, pb), window_out(wd, kw, sw, dw, pl, pr)


def _conv_check_attrs(a: dict) -> None:
    require(len(a["strides"]) == 2, "attrs.strides", "strides must be 2 ints")
    require_range(a["strides"], 1, MAX_GEOMETRY, "attrs.strides", "strides")
    require(len(a["dilations"]) == 2, "attrs.dilations", "dilations must be 2 ints")
    require_range(a["dilations"], 1, MAX_GEOMETRY, "attrs.dilations", "dilations")
    require(len(a["pads"]) == 4, "attrs.pads", "pads must be 4 ints (top, left, bottom, right)")
    require_range(a["pads"], 0, MAX_GEOMETRY, "attrs.pads", "pads")


def conv2d_shape(args, a):
    x, w = args[0].shape, args[1].shape
    _conv_check_attrs(a)
    require(len(x) == 3, "shape.rank", f"conv2d input must be [C,H,W] per sample, got {x}")
    require(len(w) == 4, "shape.rank", f"conv2d weight must be [O,C/groups,KH,KW], got {w}")
    g = a["groups"]
    require(g >= 1 and x[0] % g == 0 and w[0] % g == 0, "attrs.groups", f"groups={g} must divide C={x[0]} and O={w[0]}")
    require(w[1] * g == x[0], "shape.channels", f"weight has {w[1]} input channels per group, input has {x[0]} channels / {g} groups")
    if len(args) == 3:
        require(args[2].shape == (w[0],), "shape.bias", f"bias must have shape ({w[0]},), got {args[2].shape}")
    oh, ow = _conv_geometry(x, w, a)
    require(oh >= 1 and ow >= 1, "shape.empty", f"conv2d output would be empty ({oh}x{ow})")
    return (w[0], oh, ow)


def conv2d_bound(args, a, out):
    return _mac_bound(args)


def conv2d_cost(args, a, out):
    w = args[1].shape
    return elements(out) * (w[1] * w[2] * w[3] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def conv2d_ref(x, w, b=None, *, strides, pads, dilations, groups):
    """Sum over the pieces of window.axis_pieces: the padding is never materialised, and the Python
    loop runs min(KH, OH) * min(KW, OW) times."""
    (sh, sw), (dh, dw), (pt, pl, _, _) = strides, dilations, pads
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = _conv_geometry(x.shape[1:], w.shape, dict(strides=strides, pads=pads, dilations=dilations))
    xg = x.reshape(n, groups, cg, h, wd)
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, o, oh, ow), np.int64)
    for ph in window.axis_pieces(h, oh, kh, sh, dh, pt):
        for pw in window.axis_pieces(wd, ow, kw, sw, dw, pl):
            xs = xg[:, :, :, ph.src, pw.src]
            ws = wg[:, :, :, ph.tap, pw.tap]
            hx, hw = ("h", "") if ph.tap_major else ("u", "u")
            vx, vw = ("w", "") if pw.tap_major else ("v", "v")
            y = np.einsum(f"ngc{hx}{vx},goc{hw}{vw}->ngo{hx if ph.tap_major else ''}{vx if pw.tap_major else ''}",
                          xs, ws)
            out[:, :, ph.out, pw.out] += y.reshape(n, o, ph.out.stop - ph.out.start, pw.out.stop - pw.out.start)
    if b is not None:
        out += b[None, :, None, None]
    return out


CONV2D = OpDef(
    "conv2d", 2, 3,
    {"strides": Attr("ints", (1, 1)), "pads": Attr("ints", (0, 0, 0, 0)),
     "dilations": Attr("ints", (1, 1)), "groups": Attr("int", 1)},
    conv2d_shape, conv2d_bound, conv2d_cost, conv2d_ref,
    const_inputs=(1, 2), activation_inputs=(0,),
    doc="y[o,i,j] = b[o] + sum_{c,u,v} w[o,c,u,v] * xpad[g*C/groups + c, i*sh + u*dh, j*sw + v*dw]",
    accumulates=True,
)


# ---------------------------------------------------------------- dense

def dense_shape(args, a):
    x, w = args[0].shape, args[1].shape
    require(len(x) >= 1, "shape.rank", "dense input needs at least one per-sample axis")
    require(len(w) == 2, "shape.rank", f"dense weight must be [O,K], got {w}")
    require(w[1] == x[-1], "shape.contract", f"dense weight is [O={w[0]},K={w[1]}] but input's last axis is {x[-1]}")
    if len(args) == 3:
        require(args[2].shape == (w[0],), "shape.bias", f"bias must have shape ({w[0]},), got {args[2].shape}")
    return x[:-1] + (w[0],)


def dense_bound(args, a, out):
    return _mac_bound(args)


def dense_cost(args, a, out):
    return elements(out) * (args[1].shape[1] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def dense_ref(x, w, b=None):
    out = np.matmul(x, w.T)
    return out if b is None else out + b


DENSE = OpDef("dense", 2, 3, {}, dense_shape, dense_bound, dense_cost, dense_ref,
              const_inputs=(1, 2), activation_inputs=(0,),
              doc="y[..., o] = b[o] + sum_k x[..., k] * w[o, k]", accumulates=True)


# ---------------------------------------------------------------- matmul

def matmul_shape(args, a):
    x, y = args[0].shape, args[1].shape
    require(len(x) >= 2 and len(x) == len(y), "shape.rank", f"matmul needs two inputs of equal rank >= 2, got {x} and {y}")
    require(x[:-2] == y[:-2], "shape.batch", f"matmul leading axes differ: {x[:-2]} vs {y[:-2]}")
    require(x[-1] == y[-2], "shape.contract", f"matmul contracts {x[-1]} with {y[-2]}")
    return x[:-1] + (y[-1],)


def matmul_bound(args, a, out):
    (alo, ahi), (blo, bhi) = hull0(args[0].lo, args[0].hi), hull0(args[1].lo, args[1].hi)
    prods = [p * q for p in (alo, ahi) for q in (blo, bhi)]
    k = args[0].shape[-1]
    return k * min(prods), k * max(prods)


def matmul_cost(args, a, out):
    return elements(out) * (args[0].shape[-1] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def matmul_ref(x, y):
    return np.matmul(x, y)


MATMUL = OpDef("matmul", 2, 2, {}, matmul_shape, matmul_bound, matmul_cost, matmul_ref,
               activation_inputs=(0, 1), doc="y[..., m, n] = sum_k a[..., m, k] * b[..., k, n]",
               accumulates=True, bilinear=True)

OPS = [CONV2D, DENSE, MATMUL]
