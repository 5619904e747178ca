"""Opset 2: ops of production vision models that no integer rule over opset-1 ops computes
(docs/spec.md, section 14): resize2d (nearest and bilinear up/down-sampling, every ONNX coordinate
mode as an exact rational map) and conv_transpose2d (transposed convolution, a MAC)."""
from __future__ import annotations

import numpy as np

from .. import gas
from ..arith import channel_bounds, hull0, round_shift, row_sums
from ..limits import MAX_DIM, MAX_GEOMETRY
from . import transposed
from .base import Attr, OpDef, elements, require, require_range

# ---------------------------------------------------------------- resize2d

MAX_COORD = 1 << 32  # |a|, |b|, d of a coordinate map (a*i + b) / d: any float32 scale is such a ratio
MAX_FRAC_BITS = 15  # linear weights in units of 2^-frac_bits: 2^(2*15) * (2^31 - 1) < 2^62 (int64)
NEAREST, LINEAR = 0, 1
RESIZE_LINEAR_TAPS = 4  # a bilinear output reads 2 x 2 input elements


def _check_coord(coord, name: str) -> None:
    require(len(coord) == 3, "attrs.coord", f"{name} must be 3 ints (a, b, d): source = (a*i + b) / d")
    a, b, d = coord
    require(0 <= a <= MAX_COORD and -MAX_COORD <= b <= MAX_COORD and 1 <= d <= MAX_COORD, "attrs.coord",
            f"{name} = {list(coord)} needs 0 <= a <= 2^32, |b| <= 2^32, 1 <= d <= 2^32")


def resize2d_shape(args, a):
    x = args[0].shape
    require(len(x) == 3, "shape.rank", f"resize2d input must be [C,H,W] per sample, got {x}")
    require(len(a["size"]) == 2, "attrs.size", "size must be 2 ints (OH, OW)")
    require_range(a["size"], 1, MAX_DIM, "attrs.size", "size")
    require(a["mode"] in (NEAREST, LINEAR), "attrs.mode", f"mode must be 0 (nearest) or 1 (linear), got {a['mode']}")
    _check_coord(a["coord_h"], "coord_h")
    _check_coord(a["coord_w"], "coord_w")
    top = MAX_FRAC_BITS if a["mode"] == LINEAR else 0
    require(0 <= a["frac_bits"] <= top, "attrs.frac_bits", f"frac_bits must be in 0..{top} for mode {a['mode']}")
    return (x[0],) + tuple(a["size"])


def resize2d_cost(args, a, out):
    if a["mode"] == NEAREST:
        return elements(out) * gas.GAS_PER_ELEMENT
    return elements(out) * (RESIZE_LINEAR_TAPS * gas.GAS_PER_MAC + gas.GAS_PER_REQUANT + gas.GAS_PER_ELEMENT)


def axis_map(n_out: int, size: int, coord, mode: int, frac_bits: int):
    """One axis of resize2d: for each output index i, the source indices (i0, i1) and the integer
    weights (w0, w1), w0 + w1 = 2^frac_bits (int64 arrays of length n_out). Nearest: i1 = i0, w1 = 0.
    With n = a*i + b, t = floor(n / d), r = n - t*d (0 <= r < d):
      nearest: i0 = clip(t, 0, size-1);
      linear:  i0 = clip(t, 0, size-1), i1 = clip(t+1, 0, size-1), w1 = floor((r*2^(k+1) + d) / (2d))."""
    a, b, d = coord
    n = a * np.arange(n_out, dtype=np.int64) + b
    t = n // d
    i0 = np.clip(t, 0, size - 1)
    if mode == NEAREST:
        return i0, i0, np.ones(n_out, np.int64), np.zeros(n_out, np.int64)
    r = n - t * d
    w1 = (r * (1 << (frac_bits + 1)) + d) // (2 * d)
    return i0, np.clip(t + 1, 0, size - 1), (1 << frac_bits) - w1, w1


def resize2d_ref(x, *, size, mode, coord_h, coord_w, frac_bits):
    """Gather (and weigh) rows, then columns, or columns first, whichever intermediate is smaller:
    min(OH*W, H*OW) <= max(H*W, OH*OW), so the working set is what the input and output hold."""
    _, _, h, w = x.shape
    oh, ow = size
    hm, wm = axis_map(oh, h, coord_h, mode, frac_bits), axis_map(ow, w, coord_w, mode, frac_bits)

    def along(v, axis, m):
        i0, i1, w0, w1 = m
        i0, i1 = i0.astype(np.intp), i1.astype(np.intp)  # np.take indexes in intp (int32 on 32-bit machines)
        shape = (-1, 1) if axis == 2 else (-1,)
        if mode == NEAREST:
            return np.take(v, i0, axis=axis)
        return np.take(v, i0, axis=axis) * w0.reshape(shape) + np.take(v, i1, axis=axis) * w1.reshape(shape)

    y = along(along(x, 2, hm), 3, wm) if oh * w <= h * ow else along(along(x, 3, wm), 2, hm)
    return y if mode == NEAREST else round_shift(y, 2 * frac_bits)


RESIZE2D = OpDef(
    "resize2d", 1, 1,
    {"size": Attr("ints"), "mode": Attr("int", NEAREST), "coord_h": Attr("ints"), "coord_w": Attr("ints"),
     "frac_bits": Attr("int", 0)},
    resize2d_shape, lambda args, a, out: (args[0].lo, args[0].hi), resize2d_cost, resize2d_ref,
    activation_inputs=(0,),
    doc="nearest: y[c,i,j] = x[c, clip(floor((ah*i+bh)/dh)), clip(floor((aw*j+bw)/dw))]; linear: the 2x2 "
        "taps around that source point weighed in units of 2^-frac_bits, then a rounding shift by 2*frac_bits",
)


# ---------------------------------------------------------------- conv_transpose2d

def _ct_check_attrs(a: dict) -> None:
    for key, n, lo in (("strides", 2, 1), ("dilations", 2, 1), ("pads", 4, 0)):
        require(len(a[key]) == n, f"attrs.{key}", f"{key} must be {n} ints")
        require_range(a[key], lo, MAX_GEOMETRY, f"attrs.{key}", key)
    require(len(a["output_padding"]) == 2, "attrs.output_padding", "output_padding must be 2 ints")
    for p, s, d in zip(a["output_padding"], a["strides"], a["dilations"]):
        require(0 <= p < max(s, d), "attrs.output_padding",
                f"output_padding {list(a['output_padding'])} must each be in 0..max(stride, dilation)-1")


def conv_transpose2d_geometry(x, w, a) -> tuple[int, int]:
    (_, h, wd), (_, _, kh, kw) = x, w
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = a["strides"], a["dilations"], a["pads"], a["output_padding"]
    return (transposed.out_size(h, kh, sh, dh, pt, pb, oph), transposed.out_size(wd, kw, sw, dw, pl, pr, opw))


def conv_transpose2d_shape(args, a):
    x, w = args[0].shape, args[1].shape
    _ct_check_attrs(a)
    require(len(x) == 3, "shape.rank", f"conv_transpose2d input must be [C,H,W] per sample, got {x}")
    require(len(w) == 4, "shape.rank", f"conv_transpose2d weight must be [C,O/groups,KH,KW], got {w}")
    g = a["groups"]
    require(g >= 1 and x[0] % g == 0, "attrs.groups", f"groups={g} must divide C={x[0]}")
    require(w[0] == x[0], "shape.channels", f"weight has {w[0]} input channels, input has {x[0]}")
    if len(args) == 3:
        require(args[2].shape == (w[1] * g,), "shape.bias", f"bias must have shape ({w[1] * g},), got {args[2].shape}")
    oh, ow = conv_transpose2d_geometry(x, w, a)
    require(oh >= 1 and ow >= 1, "shape.empty", f"conv_transpose2d output would be empty ({oh}x{ow})")
    return (w[1] * g, oh, ow)


def output_rows(w: np.ndarray, groups: int) -> np.ndarray:
    """The weight [C, O/g, KH, KW] as one row per output channel: [O, C/g * KH * KW]."""
    c, og, kh, kw = w.shape
    return w.reshape(groups, c // groups, og, kh * kw).transpose(0, 2, 1, 3).reshape(groups * og, -1)


def conv_transpose2d_bound(args, a, out):
    """The MAC bound of section 6 over each output channel's row (`output_rows`): every output is the
    bias plus a sum over a subset of that row's products. Row sums are cached per constant and groups."""
    g, w = a["groups"], args[1]
    compute = lambda values: row_sums(output_rows(values, g))  # noqa: E731
    sums = w.stats._get(f"output_rows/{g}", compute) if w.stats is not None else compute(w.const)
    sides = args[2].bias_sides() if len(args) == 3 else None
    lo, hi = channel_bounds(sums, hull0(args[0].lo, args[0].hi), sides)
    return int(lo.min()), int(hi.max())


def conv_transpose2d_cost(args, a, out):
    _, og, kh, kw = args[1].shape
    return elements(args[0].shape) * og * kh * kw * gas.GAS_PER_MAC + elements(out) * gas.GAS_PER_ELEMENT


def conv_transpose2d_ref(x, w, b=None, *, strides, pads, dilations, output_padding, groups):
    """Sum over the pieces of transposed.axis_pieces: per axis, each tap over the run of inputs that
    land inside the output, or each input over its run of taps, whichever list is shorter."""
    (sh, sw), (dh, dw), (pt, pl, _, _) = strides, dilations, pads
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh, ow = conv_transpose2d_geometry(x.shape[1:], w.shape, dict(
        strides=strides, pads=pads, dilations=dilations, output_padding=output_padding))
    xg = x.reshape(n, groups, c // groups, h, wd)
    wg = w.reshape(groups, c // groups, og, kh, kw)
    out = np.zeros((n, groups, og, oh, ow), np.int64)
    for ph in transposed.axis_pieces(h, oh, kh, sh, dh, pt):
        for pw in transposed.axis_pieces(wd, ow, kw, sw, dw, pl):
            xs, ws = xg[:, :, :, ph.src, pw.src], wg[:, :, :, ph.tap, pw.tap]
            spec = (f"ngc{'h' * ph.tap_major}{'w' * pw.tap_major},"
                    f"gco{'h' * (not ph.tap_major)}{'w' * (not pw.tap_major)}->ngohw")
            out[:, :, :, ph.out, pw.out] += np.einsum(spec, xs, ws)
    out = out.reshape(n, groups * og, oh, ow)
    if b is not None:
        out += b[None, :, None, None]
    return out


CONV_TRANSPOSE2D = OpDef(
    "conv_transpose2d", 2, 3,
    {"strides": Attr("ints", (1, 1)), "pads": Attr("ints", (0, 0, 0, 0)), "dilations": Attr("ints", (1, 1)),
     "output_padding": Attr("ints", (0, 0)), "groups": Attr("int", 1)},
    conv_transpose2d_shape, conv_transpose2d_bound, conv_transpose2d_cost, conv_transpose2d_ref,
    const_inputs=(1, 2), activation_inputs=(0,),
    doc="y[o,p,q] = b[o] + sum over c of o's group and (i,u), (j,v) with i*sh + u*dh - pt = p, "
        "j*sw + v*dw - pl = q of x[c,i,j] * w[c, o mod (O/groups), u, v]",
    accumulates=True,
)

OPS: list[OpDef] = [RESIZE2D, CONV_TRANSPOSE2D]
