"""Exact integer arithmetic for quantization rules (mrt.quantize.rules_integer, rules_scatter): a value is a numpy
array (a constant, computed here) or the name of an activation (a CVM node emitted and verified at once), and each
operation is the CVM op on activations or numpy's on constants alone, so a selection by constant indices folds to
constant flags. An integer operand is read at scale 1 (an exact tensor as it is; any other rounded to the integer
it stands for)."""
from __future__ import annotations

import math

import numpy as np

from cvm.arith import bits_for, bits_max
from cvm.errors import VerifyError
from cvm.limits import MAX_BITS
from mrt.quantize.rules import _const, _node_name, _operand
from mrt.quantize.state import QuantizeError


class Ints:
    """Integer arithmetic on a node's operands: a value is a numpy array (a constant, computed here) or the name
    of an activation (a CVM node emitted, verified at once)."""

    def __init__(self, qz, node):
        self.qz, self.node, self.k = qz, node, 0

    def operand(self, fname, scale=1.0):
        """Float tensor `fname` as integers at `scale`: a constant rounded, an activation as it is or requantized."""
        qz = self.qz
        c = _const(qz, fname)
        if c is not None:
            c = np.asarray(_operand(qz, c, self.node.outputs[0]), np.float64)
            return np.atleast_1d(np.round(c / scale)).astype(np.int64)
        t = qz.q[fname]
        if t.exact and scale == 1.0:
            return t.name
        reach = math.ceil(float(qz.thr.get(fname, 0.0)) / scale) + 1
        bits = min(MAX_BITS, bits_for(-reach, reach))
        return qz.requant(t, scale, bits, name=f"{_node_name(self.node)}.{self._tag()}.int").name

    def _tag(self):
        self.k += 1
        return f"i{self.k}"

    def op(self, op, *args, **attrs):
        """CVM op `op` on values; on constants alone, numpy's result."""
        if all(isinstance(a, np.ndarray) for a in args):
            return NUMPY[op](*args, **attrs)
        qz = self.qz
        names = [qz.const(a, dtype="int32") if isinstance(a, np.ndarray) else a for a in args]
        try:
            return qz.op(op, *names, name=f"{_node_name(self.node)}.{op}{self._tag()}", **attrs)
        except VerifyError as e:
            raise QuantizeError(f"node {self.node.name!r}: {self.node.op} is exact only within int32, and its "
                                f"integers may leave it ({e})") from None

    def mul(self, a, b):
        """a * b, where a factor of constant ones that does not broadcast the other is skipped."""
        for one, other in ((a, b), (b, a)):
            if isinstance(one, np.ndarray) and np.all(one == 1) and self.shape(other) == self.broadcast(a, b):
                return other
        return self.op("mul", a, b)

    def shape(self, v):
        return v.shape if isinstance(v, np.ndarray) else self.qz.shape_of(v)

    def broadcast(self, a, b):
        return tuple(np.broadcast_shapes(self.shape(a), self.shape(b)))

    def sign(self, x):
        return self.op("clip", x, lo=-1, hi=1)

    def magnitude(self, x):
        """(sign(x), |x|)."""
        s = self.sign(x)
        return s, self.mul(x, s)

    def divisor(self, d):
        """(sign(d), max(|d|, 1)): the magnitude proven >= 1 for CVM's div."""
        s, m = self.magnitude(d)
        if isinstance(m, np.ndarray):
            return s, np.maximum(m, 1)
        return s, self.op("clip", m, lo=1, hi=max(1, self.qz.interval(m)[1]))

    def floor_div(self, n, e):
        """floor(n / e) for e >= 1: div(2n - e, 2e)."""
        if isinstance(n, np.ndarray) and isinstance(e, np.ndarray):
            return n // e
        return self.op("div", self.op("sub", self.mul(n, np.asarray([2])), e), self.mul(e, np.asarray([2])))

    def floor_mod(self, n, e):
        return self.op("sub", n, self.mul(self.floor_div(n, e), e))

    def equal(self, a, b):
        """[a == b] of integers: 1 - sign(a - b)^2, flags no calibrated range clips."""
        s = self.sign(self.op("sub", a, b))
        return self.op("clip", self.op("sub", np.asarray([1]), self.mul(s, s)), lo=0, hi=1)  # the clip: for the verifier

    def maximum(self, a, b):
        """max(a, b) = b + clip(a - b, 0, hi)."""
        d = self.op("sub", a, b)
        hi = int(np.max(d)) if isinstance(d, np.ndarray) else self.qz.interval(d)[1]
        return self.op("add", b, self.op("clip", d, lo=0, hi=max(hi, 0)))

    def reach(self, x) -> int:
        """The largest magnitude x may hold."""
        if isinstance(x, np.ndarray):
            return int(np.abs(x).max()) if x.size else 0
        lo, hi = self.qz.interval(x)
        return max(-lo, hi)


NUMPY = {"mul": np.multiply, "sub": np.subtract, "add": np.add, "div": lambda a, e: (2 * a + e) // (2 * e),
         "clip": lambda x, lo, hi: np.clip(x, lo, hi), "reshape": lambda x, shape: x.reshape(shape),
         "sum": lambda x, axes, keepdims: x.sum(axis=tuple(axes), keepdims=bool(keepdims)),
         "max": lambda x, axes, keepdims: x.max(axis=tuple(axes), keepdims=bool(keepdims)),
         "concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
         "slice": lambda x, starts, ends, steps: x[tuple(map(slice, starts, ends, steps))],
         "requant": lambda x, m, shift, bits: np.clip((x * m + (1 << shift - 1)) >> shift, -bits_max(bits),
                                                      bits_max(bits))}


def activation(ints, v):
    """A value as an activation name (a result on constants alone cannot be one: the float graph folds those)."""
    if isinstance(v, np.ndarray):
        raise QuantizeError(f"node {ints.node.name!r}: {ints.node.op} of constants only (should have been folded)")
    return v
