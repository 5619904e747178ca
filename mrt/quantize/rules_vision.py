"""Quantization rules for the float ops of mrt.float_ops.vision (CVM opset-2 ops).

resize -> resize2d: the coordinate maps pass through unchanged (the float op already holds CVM's exact
(a, b, d) form); bilinear weights are fixed point in units of 2^-RESIZE_FRAC_BITS, and the output keeps
its input's scale (a convex combination, rounded once: the proven interval is the input's).
conv_transpose -> conv_transpose2d: per-output-channel weights like conv, emitted through the MAC
split planner (mrt.quantize.split.emit_mac), which keeps every accumulator within the target's budget.
"""
from __future__ import annotations

import numpy as np

from cvm.ops.vision import LINEAR, NEAREST, output_rows
from mrt.quantize.rules import _const, _node_name, _weights_and_bias
from mrt.quantize.split import emit_mac
from mrt.quantize.state import QT, QuantizeError

RESIZE_FRAC_BITS = 12  # bilinear weights exact for ratios whose denominators divide 2^12, else within 2^-13
# of a tap difference (an int8 tensor: 1/32 of a step); 2^24 * |x| stays far inside int64


def resize(qz, node):
    t = qz.narrow(node.inputs[0])
    a = node.attrs
    linear = a["mode"] == "linear"
    out = qz.op("resize2d", t.name, size=list(a["size"]), mode=LINEAR if linear else NEAREST,
                coord_h=list(a["coord_h"]), coord_w=list(a["coord_w"]), frac_bits=RESIZE_FRAC_BITS if linear else 0,
                name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=True)


def from_rows(rows: np.ndarray, groups: int, shape) -> np.ndarray:
    """The inverse of cvm.ops.vision.output_rows: [O, C/g * KH * KW] rows -> the weight [C, O/g, KH, KW]."""
    c, og, kh, kw = shape
    return rows.reshape(groups, og, c // groups, kh * kw).transpose(0, 2, 1, 3).reshape(c, og, kh, kw)


def conv_transpose(qz, node):
    x = qz.narrow(node.inputs[0])
    w = _const(qz, node.inputs[1])
    if w is None or w.ndim != 4:
        raise QuantizeError(f"node {node.name!r}: only 2-D transposed convolutions with constant weights are "
                            "supported")
    b = _const(qz, node.inputs[2]) if len(node.inputs) > 2 else None
    g = node.attrs["groups"]
    rows = output_rows(w, g).reshape(-1, w.shape[0] // g, *w.shape[2:])  # [O, C/g, KH, KW], one row per output
    qrows, qb, acc_scale = _weights_and_bias(qz, rows, b, float(x.scale))
    qw = from_rows(qrows.reshape(len(qrows), -1), g, w.shape)
    a = node.attrs
    out, factor = emit_mac(qz, "conv_transpose2d", x.name, qw, qb, _node_name(node), strides=a["strides"],
                           pads=a["pads"], dilations=a["dilations"], output_padding=a["output_padding"], groups=g)
    return QT(name=out, scale=acc_scale * factor, axis=0)


RULES: dict = {"resize": resize, "conv_transpose": conv_transpose}
