"""Table lookups for the FHE backend: which exact rounding brings a lookup's input within budget.

A lookup node (requant, relu, clip, lut, div by a constant) is a function f of one integer whose
proven input interval is [lo, hi]. In TFHE a table lookup costs with its input's bit width, so an
input wider than the budget is first reduced by concrete's `round_bit_pattern(v, r)`, which
computes floor((v + 2^(r-1)) / 2^r) * 2^r: the spec's rounding shift (cvm.ops.rescale.round_shift),
times 2^r. A clear offset c may be added first (v = x + c) to move the cells' boundaries. The
table then sees only the cell index k = round_shift(x + c, r), so the lowering is exact if and
only if f is constant on every cell {x in [lo, hi] : round_shift(x + c, r) = k}. `plan_lookup`
searches r and c for that property and refuses when no choice within budget is exact.

Pure numpy: nothing here needs concrete.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import VerifyError
from ..arith import round_shift

ENUMERATE_LIMIT = 1 << 18  # a non-monotone function is checked value by value up to this domain size


class FHEUnsupported(VerifyError):
    """The model is valid CVM but cannot be compiled to an exact FHE circuit (names node and rule)."""

    def __init__(self, rule: str, message: str, node: str | None = None):
        self.detail = message  # without the node and rule, for a refusal that adds what else was tried
        super().__init__(rule, message, node)


def int_bits(lo: int, hi: int) -> int:
    """Bit width concrete gives an integer holding [lo, hi] (as Integer.that_can_represent):
    unsigned when lo >= 0, two's-complement signed otherwise."""
    lo, hi = int(lo), int(hi)
    if lo >= 0:
        return max(1, hi.bit_length())
    return max(max(hi, 0).bit_length(), (-lo - 1).bit_length()) + 1


def rounded_interval(lo: int, hi: int, r: int) -> tuple[int, int]:
    """Interval of round_bit_pattern(v, r) for v in [lo, hi] (values are multiples of 2^r)."""
    return round_shift(lo, r) << r, round_shift(hi, r) << r


def rounded_pin(lo: int, hi: int, r: int) -> tuple[int, int]:
    """The interval to pin on round_bit_pattern(v, r), v in [lo, hi]: the rounded interval, widened
    to [lo, hi] so that it never needs fewer bits than v. concrete reads a rounded value narrower
    than its input's width as a rounding overflow and mis-scales it (seen with v in [-67038, 50970],
    r = 14: the rounded [-65536, 49152] needs 17 bits, v 18; the table read the cell below)."""
    rlo, rhi = rounded_interval(lo, hi, r)
    return min(rlo, lo), max(rhi, hi)


def tlu_bits(lo: int, hi: int, r: int) -> int:
    """Input width of the table that follows round_bit_pattern(v, r), v in [lo, hi], as concrete
    builds it: the input's width minus r, plus one bit when rounding up overflows that width."""
    if r == 0:
        return int_bits(lo, hi)
    width = int_bits(lo, hi)
    overflow = int_bits(*rounded_interval(lo, hi, r)) > width
    return width - r + overflow


@dataclass(frozen=True)
class LookupPlan:
    """x -> f(x) over [lo, hi] as table(round_bit_pattern(x + offset, shift)) (shift 0: table(x))."""

    lo: int
    hi: int
    offset: int
    shift: int
    tlu_bits: int

    def representative(self, v: np.ndarray) -> np.ndarray:
        """A point of [lo, hi] in the cell the table input v (a multiple of 2^shift) stands for."""
        return np.clip(np.asarray(v, np.int64) - self.offset, self.lo, self.hi)

    @property
    def rounded(self) -> tuple[int, int]:
        return rounded_interval(self.lo + self.offset, self.hi + self.offset, self.shift)


Fn = Callable[[np.ndarray], np.ndarray]  # 1-D int64 domain values -> (n, elements) outputs


def _cells(lo: int, hi: int, r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last x of every cell of round_shift(x + c, r) that meets [lo, hi]."""
    k = np.arange(round_shift(lo + c, r), round_shift(hi + c, r) + 1, dtype=np.int64)
    start = (k << r) - (1 << (r - 1)) - c
    return np.maximum(start, lo), np.minimum(start + (1 << r) - 1, hi)


def _first_change(f: Fn, a: int, b: int, j: int) -> int:
    """Smallest x in (a, b] with f(x)[j] != f(a)[j], for f monotone in x (f(a)[j] != f(b)[j])."""
    ref = f(np.array([a], np.int64))[0, j]
    while b - a > 1:
        mid = (a + b) // 2
        if f(np.array([mid], np.int64))[0, j] != ref:
            b = mid
        else:
            a = mid
    return b


def _check(f: Fn, lo: int, hi: int, r: int, c: int, monotone: bool) -> tuple[bool, int | None]:
    """Is f constant on every cell? If not, return a breakpoint (an x with f(x) != f(x - 1))."""
    if monotone:
        first, last = _cells(lo, hi, r, c)
        bad = np.nonzero(np.any(f(first) != f(last), axis=1))[0]
        if bad.size == 0:
            return True, None
        i = int(bad[0])
        j = int(np.nonzero(f(first[i:i + 1])[0] != f(last[i:i + 1])[0])[0][0])
        return False, _first_change(f, int(first[i]), int(last[i]), j)
    xs = np.arange(lo, hi + 1, dtype=np.int64)
    vals = f(xs)
    change = np.any(vals[1:] != vals[:-1], axis=1)
    same_cell = round_shift(xs[1:] + c, r) == round_shift(xs[:-1] + c, r)
    bad = np.nonzero(change & same_cell)[0]
    if bad.size == 0:
        return True, None
    return False, int(xs[bad[0] + 1])


def _aligning_offset(breakpoint: int, r: int) -> int:
    """The offset c (in [-2^(r-1), 2^(r-1))) that starts a cell at `breakpoint`."""
    c = ((1 << (r - 1)) - breakpoint) % (1 << r)
    return c - (1 << r) if c >= 1 << (r - 1) else c


def plan_lookup(f: Fn, lo: int, hi: int, budget: int, *, monotone: bool, node: str, what: str) -> LookupPlan:
    """The cheapest exact way to look f up over [lo, hi] with a table input of <= budget bits.

    f must be non-decreasing in x for every element when monotone=True (requant with m >= 0,
    relu, clip, div by a positive constant); otherwise it is checked value by value."""
    width = int_bits(lo, hi)
    if width <= budget:
        return LookupPlan(lo, hi, 0, 0, width)
    if not monotone and hi - lo + 1 > ENUMERATE_LIMIT:
        raise FHEUnsupported("fhe.lookup_domain", f"{what}: input interval [{lo}, {hi}] is too wide to check "
                                                  f"a non-monotone table exactly", node)
    for r in range(width, max(1, width - budget) - 1, -1):  # the widest exact rounding: smallest table
        ok, breakpoint = _check(f, lo, hi, r, 0, monotone)
        c = 0
        if not ok:
            c = _aligning_offset(breakpoint, r)
            ok = c != 0 and _check(f, lo, hi, r, c, monotone)[0]
        if ok and tlu_bits(lo + c, hi + c, r) <= budget:
            return LookupPlan(lo, hi, c, r, tlu_bits(lo + c, hi + c, r))
    raise FHEUnsupported(
        "fhe.lookup_bits",
        f"{what}: input interval [{lo}, {hi}] needs {width} bits, more than the lookup budget of {budget}, "
        f"and no rounding round_bit_pattern(x + c, r) to <= {budget} bits is exact for this function "
        f"(convert with `mrt convert --target fhe`, which rounds every lookup input to the budget first)",
        node)
