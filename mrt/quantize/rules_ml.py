"""Quantization of `normalize` (ai.onnx.ml Normalizer, scikit-learn's Normalizer): rows divided by their
L1 norm, L2 norm or maximum over the last axis, in integers.

The input's scale cancels in a ratio, so with x = q * s the rule divides the integers themselves:

  L1   y = div(q * 2^p, max(1, sum |q|))                       |q| = relu(q) + relu(-q)
  L2   z = div(q * 2^b, max(1, max |q|))                       the row at b bits of its own maximum
       y = div(z * 2^p, max(1, isqrt(sum z^2)))                (n * 2^2b fits int32; |error| <~ 2^-b)
  MAX  y = div(q * 2^p * sign(m), max(1, |m|))   m = max q     (onnxruntime divides by the signed maximum;
                                                               sign = clip(m, -1, 1), so m = 0 gives zeros)

at the output scale 2^-p (p: the most the dividend's int32 range allows). L1 and MAX are the exact
rounded ratio of the quantized input (div rounds to nearest); L2 adds the rounding of z and the floor of
isqrt, each below 2^-b of the row's norm. An all-zero row gives zeros, as onnxruntime's.
The one error against float is the input's own quantization; tests report it.
"""
from __future__ import annotations


import numpy as np

from cvm.arith import bits_max
from mrt.quantize.rules import _node_name
from mrt.quantize.rules_text import _square_bits
from mrt.quantize.state import QT, QuantizeError  # noqa: F401

INPUT_BITS = 16   # the row is read at up to 16 bits: its ratio is only as fine as its integers


def _dividend(qz, q: str, name: str):
    """q * 2^p with p as large as int32 allows."""
    lo, hi = qz.interval(q)
    p = max(0, 30 - max(-lo, hi, 1).bit_length())
    return qz.op("mul", q, qz.const([1 << p], dtype="int32"), name=f"{name}.num"), p


def _abs(qz, q: str, name: str) -> str:
    """|q| = relu(q) + relu(-q)."""
    neg = qz.op("relu", qz.op("mul", q, qz.const([-1]), name=f"{name}.neg"), name=f"{name}.negpart")
    return qz.op("add", qz.op("relu", q, name=f"{name}.pospart"), neg, name=name)


def _row(qz, fname: str, name: str) -> QT:
    """The row at one scale within INPUT_BITS, covering its whole proven range (not the calibrated one: a
    clipped element would change every ratio of its row)."""
    t = qz.q[fname]
    lo, hi = qz.interval(t.name)
    if not t.per_channel and max(-lo, hi) <= bits_max(INPUT_BITS):
        return t
    reach = max(-lo, hi, 1) * float(np.max(t.scale))
    return qz.requant(t, reach / bits_max(INPUT_BITS), INPUT_BITS, name=f"{name}.row")


def _exact_range(qz, node, reach: float) -> None:
    """A graph output's range: |y| <= 1 for L1 and L2, y <= 1 for MAX, instead of a calibrated range that
    could clip a test row. Inside the graph the calibrated range stays: the next layer's 8 bits are better
    spent on the values the rows take than on the bound."""
    if node.outputs[0] in qz.fgraph.outputs:
        qz.thr = {**qz.thr, node.outputs[0]: reach}


def normalize(qz, node):
    t = _row(qz, node.inputs[0], _node_name(node))
    shape = qz.shape_of(t.name)
    n, last, name, norm = shape[-1], len(shape) - 1, _node_name(node), node.attrs["norm"]
    lo, hi = qz.interval(t.name)
    if norm == "l1":
        d = qz.op("sum", _abs(qz, t.name, f"{name}.abs"), axes=[last], keepdims=1, name=f"{name}.l1")
    elif norm == "l2":   # scale each row to its own maximum first, so a small row keeps every bit
        b = _square_bits(n) - 1
        m = qz.op("max", _abs(qz, t.name, f"{name}.abs"), axes=[last], keepdims=1, name=f"{name}.absmax")
        m = qz.op("clip", m, lo=1, hi=max(1, qz.interval(m)[1]), name=f"{name}.absmax1")
        z = qz.op("div", qz.op("mul", t.name, qz.const([1 << b], dtype="int32"), name=f"{name}.znum"), m,
                  name=f"{name}.zr")
        # |q| <= max |q|, so |z| <= 2^b: the clip changes nothing and gives the verifier that fact
        z = qz.op("clip", z, lo=-(1 << b), hi=1 << b, name=f"{name}.z")
        sq = qz.op("lut", z, qz.const(np.arange(-(1 << b), (1 << b) + 1, dtype=np.int64) ** 2), offset=-(1 << b),
                   name=f"{name}.sq")
        r = qz.op("isqrt", qz.op("sum", sq, axes=[last], keepdims=1, name=f"{name}.ss"), name=f"{name}.l2")
        den = qz.op("clip", r, lo=1, hi=max(1, qz.interval(r)[1]), name=f"{name}.den")
        num, p = _dividend(qz, z, name)
        _exact_range(qz, node, 1.0)
        return QT(name=qz.op("div", num, den, name=name), scale=np.asarray(2.0 ** -p))
    elif norm == "max":
        d = qz.op("max", t.name, axes=[last], keepdims=1, name=f"{name}.max")
        if lo < 0:   # the maximum may be <= 0: divide by |max| and carry its sign (0 for an all-zero max)
            sign = qz.op("clip", d, lo=-1, hi=1, name=f"{name}.sign")
            num, p = _dividend(qz, t.name, name)
            num = qz.op("mul", num, sign, name=f"{name}.signed")
            d = _abs(qz, d, f"{name}.absmax")
            den = qz.op("clip", d, lo=1, hi=max(1, qz.interval(d)[1]), name=f"{name}.den")
            # y <= 1 (not clipped below it), y >= min / max: the calibrated reach below
            _exact_range(qz, node, max(1.0, float(qz.thr.get(node.outputs[0], 0.0))))
            return QT(name=qz.op("div", num, den, name=name), scale=np.asarray(2.0 ** -p))
    else:
        raise QuantizeError(f"node {node.name!r}: norm {norm!r} is not supported")
    dlo, dhi = qz.interval(d)
    den = d if dlo >= 1 else qz.op("clip", d, lo=1, hi=max(1, dhi), name=f"{name}.den")
    num, p = _dividend(qz, t.name, name)
    out = qz.op("div", num, den, name=name)
    _exact_range(qz, node, 1.0)
    return QT(name=out, scale=np.asarray(2.0 ** -p))


RULES: dict = {"normalize": normalize}
