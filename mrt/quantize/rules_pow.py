"""Quantization rule of `pow` of two tensors (a constant scalar exponent is a table of fuse_univariate's).

- Enumerated: where one operand takes at most MAX_ENUMERATED values (an integer input's proven interval, or a
  constant's distinct values), x^y = sum over those values v of [operand == v] * table_v(other operand): the
  flags a table (or a constant mask), each table_v one lookup. Exact when both operands are integers (scale 1)
  and the output is then one too; otherwise at POW_BITS over the output's calibrated range.
- Otherwise exp(y * log|x|): a table of log|x| at LOG_BITS, an exact product with y, rounded to EXP_STEPS over
  the logarithms the output can show (those of half its step up to twice its calibrated range: smaller values
  round to 0, larger clip), and a table of exp. A negative x (an integer exponent's meaning) multiplies by
  1 - 2 [x < 0] [y odd]; x = 0 gives 0 for y > 0 and the largest value for y < 0.
"""
from __future__ import annotations

import math

import numpy as np

from cvm.arith import bits_for, bits_max
from mrt.quantize.int_arith import Ints
from mrt.quantize.rules import _const, _operand
from mrt.quantize.state import QT

MAX_ENUMERATED = 32  # values of an operand enumerated one table each
POW_BITS = 16  # a float result's bits
LOG_BITS = 12  # log|x|'s bits before the product with y
WIDE_BITS = 12  # log|x|'s input where x is not an activation of the default bits (a 1-D input's per-feature
# scales); y, a factor, at MAX_LUT_BITS
MAX_LUT_BITS = 16  # the widest table input (CVM's MAX_LUT_SIZE)
MAX_TABLE_ENTRIES = 1 << 20  # entries of an enumerated power's tables together
EXP_STEPS = 4096  # steps of the exp table's input over the logarithms the output shows


class _Side:
    """One operand: its values (a constant array, or an activation name at `scale`) and the real values it may
    hold (`reals`: known at once for a constant or an integer; for a float activation after `per_tensor`)."""

    def __init__(self, qz, fname, node):
        self.qz, self.fname = qz, fname
        c = _const(qz, fname)
        self.exact = c is None and qz.q[fname].exact
        self.const = None if c is None else np.asarray(_operand(qz, c, node.outputs[0]), np.float64)
        if self.const is not None:
            self.reals = np.unique(self.const)
        elif self.exact:
            self._use(qz.q[fname])

    def _use(self, t):
        self.scale, self.value = float(t.scale), t.name
        lo, hi = self.qz.interval(t.name)
        self.reals = np.arange(lo, hi + 1) * self.scale

    def enumerable(self) -> bool:
        return hasattr(self, "reals") and len(self.reals) <= MAX_ENUMERATED

    def per_tensor(self, bits):
        """A float activation at one scale: as it is when narrow, else (a wide or per-feature tensor, a 1-D
        input) rounded to `bits`; a constant at `bits` over its largest magnitude."""
        if self.const is not None:
            self.scale = float(np.abs(self.const).max() or 1.0) / bits_max(bits)
            self.value = np.round(self.const / self.scale).astype(np.int64)
            return self
        if hasattr(self, "value"):
            return self
        t = self.qz.q[self.fname]
        if not t.narrow:  # per-feature scales (exact absmax each) keep their proven reach; a wide tensor its range
            lo, hi = self.qz.interval(t.name)
            scale = float(np.max(t.scale)) * max(-lo, hi) / bits_max(bits) if t.per_channel else \
                self.qz.scale_of(self.fname, bits)
            t = self.qz.requant(t, scale, bits, name=f"{t.name}.pow_in")
        self._use(t)
        return self


def _table(ints, side, fn):
    """fn of the real values (giving integers): a lookup of the activation, or computed on the constant."""
    with np.errstate(all="ignore"):
        if side.const is not None:
            return np.asarray(fn(side.const), np.int64)
        table = ints.qz.const(np.asarray(fn(side.reals), np.int64))
        return ints.op("lut", side.value, table, offset=int(ints.qz.interval(side.value)[0]))


def _ints(values, m):
    with np.errstate(all="ignore"):
        return np.clip(np.nan_to_num(np.round(values), nan=0.0, posinf=m, neginf=-m), -m, m).astype(np.int64)


def _enumerated(ints, x, y, scale, m, by_x):
    """sum over the values v of the enumerated operand of [it == v] * table_v(the other)."""
    e, t = (x, y) if by_x else (y, x)
    total = None
    for v in e.reals:
        flag = _table(ints, e, lambda u, v=v: u == v)
        part = ints.mul(flag, _table(ints, t, lambda u, v=v: _ints(np.power(*((v, u) if by_x else (u, v))) / scale,
                                                                     m)))
        total = part if total is None else ints.op("add", total, part)
    return total


def _exp_log(qz, ints, x, y, node, scale, m):
    """exp(y * log|x|), times -1 where x < 0 and y rounds to an odd integer."""
    with np.errstate(all="ignore"):
        logs = np.log(np.abs(x.reals if x.const is None else x.const))
    s_log = (float(np.abs(logs[np.isfinite(logs)]).max(initial=0.0)) or 1.0) / bits_max(LOG_BITS)
    p = ints.mul(_table(ints, x, lambda u: _ints(np.log(np.abs(u)) / s_log, bits_max(LOG_BITS))), y.value)
    top = math.log(2 * max(float(qz.thr.get(node.outputs[0], 0.0)), scale))
    bottom = math.log(scale / 2)
    s_exp = (top - bottom) / EXP_STEPS
    lo, hi = math.floor(bottom / s_exp), math.ceil(top / s_exp)
    q = qz.requant(QT(name=p, scale=np.asarray(s_log * y.scale)), s_exp, bits_for(lo, hi), name=f"{p}.exp_in")
    q = ints.op("clip", q.name, lo=lo, hi=hi)
    z = ints.op("lut", q, qz.const(_ints(np.exp(np.arange(lo, hi + 1) * s_exp) / scale, m)), offset=lo)
    if min(x.reals) >= 0:
        return z
    negative = _table(ints, x, lambda u: u < 0)
    odd = _table(ints, y, lambda u: np.round(u) % 2 != 0)
    sign = ints.op("sub", np.asarray([1]), ints.mul(ints.mul(negative, odd), np.asarray([2])))
    return ints.mul(z, sign)


def pow_(qz, node) -> QT:
    ints = Ints(qz, node)
    x, y = (_Side(qz, n, node) for n in node.inputs)
    exact = (x.exact and y.exact) or node.outputs[0] in qz.fgraph.integer_outputs
    scale = 1.0 if exact else qz.scale_of(node.outputs[0], POW_BITS)
    m = bits_max(POW_BITS)
    if x.enumerable() or y.enumerable():
        by_x = x.enumerable() and (not y.enumerable() or len(x.reals) < len(y.reals))
        e, t = (x, y) if by_x else (y, x)
        t.per_tensor(min(MAX_LUT_BITS, int(math.log2(MAX_TABLE_ENTRIES / len(e.reals)))))
        if exact:  # one term of the sum is nonzero, but each may hold what int32 holds over the count
            m = bits_max(32) // len(e.reals)
        z = _enumerated(ints, x, y, scale, m, by_x)
    else:
        x.per_tensor(WIDE_BITS)
        y.per_tensor(MAX_LUT_BITS)
        m = bits_max(31) if exact else m
        z = _exp_log(qz, ints, x, y, node, scale, m)
    return QT(name=z, scale=np.asarray(scale), exact=exact)
