"""Quantization rule of audio front ends: magnitude, sqrt(a^2 + b^2) (mrt.float_ops.audio), as exact integer
squares, their sum and CVM's exact integer square root (opset 2: isqrt). Both parts share one scale s, so
a^2 + b^2 is the squared magnitude at scale s^2 with no rounding, and isqrt gives the magnitude at scale s, within
one unit: the magnitude keeps the parts' precision over their whole range, quiet bins included."""
from __future__ import annotations

import numpy as np

from cvm.arith import bits_max
from mrt.quantize.rules import _node_name
from mrt.quantize.state import QT

PART_BITS = 15  # each part within 15 bits: a^2 + b^2 <= 2 * (2^15 - 1)^2 < 2^31


def _at(qz, fname, scale, bits, name):
    """The part at exactly `scale` within `bits` (as it comes when it already is)."""
    t = qz.q[fname]
    lo, hi = qz.interval(t.name)
    if not t.per_channel and float(t.scale) == scale and max(-lo, hi) <= bits_max(bits):
        return t.name
    return qz.requant(t, scale, bits, name=name).name


def magnitude(qz, node):
    a, b = node.inputs
    name = _node_name(node)
    bits = min(PART_BITS, max(qz.act_bits(a), qz.act_bits(b)))
    ta, tb = qz.q[a], qz.q[b]
    if not ta.per_channel and not tb.per_channel and float(ta.scale) == float(tb.scale):
        scale = float(ta.scale)  # two slices of one STFT output: already one scale
    else:
        scale = max(qz.scale_of(a, bits), qz.scale_of(b, bits))
    pa, pb = _at(qz, a, scale, bits, f"{name}.re"), _at(qz, b, scale, bits, f"{name}.im")
    total = qz.op("add", qz.op("mul", pa, pa, name=f"{name}.re2"), qz.op("mul", pb, pb, name=f"{name}.im2"),
                  name=f"{name}.power")
    return QT(name=qz.op("isqrt", total, name=name), scale=np.asarray(scale, np.float64))


RULES: dict = {"magnitude": magnitude}
__all__ = ["RULES"]
