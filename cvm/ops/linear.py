"""Multiply-accumulate ops: conv2d, dense, matmul.

Their bounds hull the input interval with 0 and count the bias only on the side that widens the
interval, so that every partial sum, in any summation order and with the bias added first or last,
lies inside the proven interval too (a fast backend may accumulate in int32).
"""
from __future__ import annotations

import numpy as np

from .. import gas
from .base import Arg, Attr, OpDef, RuleError, elements, require


def _hull0(arg: Arg) -> tuple[int, int]:
    return min(arg.lo, 0), max(arg.hi, 0)


def _weighted_bound(w_rows: np.ndarray, x: tuple[int, int], bias: np.ndarray | None) -> tuple[int, int]:
    """[min, max] over output channels of sum_k w[o,k]*x_k + b[o], x_k in x (x contains 0)."""
    pos = np.where(w_rows > 0, w_rows, 0).astype(np.int64).sum(axis=1)
    neg = np.where(w_rows < 0, w_rows, 0).astype(np.int64).sum(axis=1)
    b = np.zeros(len(w_rows), np.int64) if bias is None else bias.astype(np.int64)
    xlo, xhi = x
    # max(c, 0) / min(c, 0): partial sums stay inside whether accumulation starts from the bias or adds it last
    his = [int(p) * xhi + int(n) * xlo + max(int(c), 0) for p, n, c in zip(pos, neg, b)]
    los = [int(p) * xlo + int(n) * xhi + min(int(c), 0) for p, n, c in zip(pos, neg, b)]
    return min(los), max(his)


# ---------------------------------------------------------------- conv2d

def _conv_geometry(x: tuple, w: tuple, a: dict) -> tuple[int, int]:
    (_, h, wd), (_, _, kh, kw) = x, w
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilations"], a["pads"]
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    return oh, ow


def _conv_check_attrs(a: dict) -> None:
    require(len(a["strides"]) == 2 and min(a["strides"]) >= 1, "attrs.strides", "strides must be 2 ints >= 1")
    require(len(a["dilations"]) == 2 and min(a["dilations"]) >= 1, "attrs.dilations", "dilations must be 2 ints >= 1")
    require(len(a["pads"]) == 4 and min(a["pads"]) >= 0, "attrs.pads", "pads must be 4 ints >= 0 (top, left, bottom, right)")


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
    w = args[1].const
    bias = args[2].const if len(args) == 3 else None
    return _weighted_bound(w.reshape(w.shape[0], -1), _hull0(args[0]), bias)


def conv2d_cost(args, a, out):
    w = args[1].shape
    return elements(out) * (w[1] * w[2] * w[3] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def conv2d_ref(x, w, b=None, *, strides, pads, dilations, groups):
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = _conv_geometry(x.shape[1:], w.shape, dict(strides=strides, pads=pads, dilations=dilations))
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    out = out.reshape(n, o, oh, ow)
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
    bias = args[2].const if len(args) == 3 else None
    return _weighted_bound(args[1].const, _hull0(args[0]), bias)


def dense_cost(args, a, out):
    return elements(out) * (args[1].shape[1] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def dense_ref(x, w, b=None):
    out = np.matmul(x, w.T)
    return out if b is None else out + b


DENSE = OpDef("dense", 2, 3, {}, dense_shape, dense_bound, dense_cost, dense_ref,
              const_inputs=(1, 2), activation_inputs=(0,),
              doc="y[..., o] = b[o] + sum_k x[..., k] * w[o, k]")


# ---------------------------------------------------------------- matmul

def matmul_shape(args, a):
    x, y = args[0].shape, args[1].shape
    require(len(x) >= 2 and len(x) == len(y), "shape.rank", f"matmul needs two inputs of equal rank >= 2, got {x} and {y}")
    require(x[:-2] == y[:-2], "shape.batch", f"matmul leading axes differ: {x[:-2]} vs {y[:-2]}")
    require(x[-1] == y[-2], "shape.contract", f"matmul contracts {x[-1]} with {y[-2]}")
    return x[:-1] + (y[-1],)


def matmul_bound(args, a, out):
    (alo, ahi), (blo, bhi) = _hull0(args[0]), _hull0(args[1])
    prods = [p * q for p in (alo, ahi) for q in (blo, bhi)]
    k = args[0].shape[-1]
    return k * min(prods), k * max(prods)


def matmul_cost(args, a, out):
    return elements(out) * (args[0].shape[-1] * gas.GAS_PER_MAC + gas.GAS_PER_ELEMENT)


def matmul_ref(x, y):
    return np.matmul(x, y)


MATMUL = OpDef("matmul", 2, 2, {}, matmul_shape, matmul_bound, matmul_cost, matmul_ref,
               activation_inputs=(0, 1), doc="y[..., m, n] = sum_k a[..., m, k] * b[..., k, n]")

OPS = [CONV2D, DENSE, MATMUL]
