"""An exact, narrow lowering of a saturating rounding: y = clip(round_shift(x, r), -L, L).

MRT's fhe target sized from calibrated ranges (mrt.quantize.prerounding.lookup_calibrated) emits
requant(x, 1, r, bits) whose rounded value round_shift(x, r) is wider than the lookup budget: the
requant's own clip to L = 2^(bits-1) - 1 brings it back. A table on the rounded value would be as
wide as that value (what the lookup budget exists to avoid). Instead the value is split into a
small high part and a small low part, each reached by concrete's exact round_bit_pattern, and put
back together with narrow tables:

    y' = round_shift(x, r) + L      in-range values become 0 .. 2L, a window starting a cell
    h  = floor(y' / 2^j)            cell index:  R_h = round_bit_pattern(x + c_h, r + j)
    l  = y' - 2^j h in [0, 2^j)     position in the cell
    o  = kind(h)                    which row of G the cell uses (identity, saturated, edge)
    P  = rem + 2^(r-1) + o 2^(r+j)  rem = x + c_h + 2^(r+j-1) - R_h in [0, 2^(r+j)), leveled
    R_p = round_bit_pattern(P, r)   = (o 2^j + l + 1) 2^r: the row and the position, packed
    y  = B(h) + G(o, l)             two narrow tables, added

B(h) = clip(2^j h - L, -L, L) is the cell's base, G(o, l) = clip(2^j h + l - L, -L, L) - B(h) the
rest (for every h of row o: rows are deduplicated). The identities hold for every integer x, so
the lowering is exact; `plan_clamp` still checks them over every (cell, position) pair of the
proven interval, and the table inputs' widths against the budget. Cost per element: r + j + r
exact-rounding bootstraps (one per removed bit) and three narrow tables, against r' + 1 for the
proven-range rounding (r' the worst-case shift, about r + 1 to r + 3).

Pure numpy: nothing here needs concrete.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..arith import bits_max, round_shift
from .fhe_lookup import FHEUnsupported, int_bits, tlu_bits

MAX_ROWS = 3  # the packed table input o 2^j + l + 1 stays within j + 2 bits (see plan_clamp)


@dataclass(frozen=True)
class ClampPlan:
    """y = clip(round_shift(x, shift), -limit, limit) over x in [lo, hi], split at 2^low_bits."""

    lo: int
    hi: int
    shift: int  # r
    limit: int  # L
    low_bits: int  # j
    kinds: tuple[int, ...]  # row index o of every cell h = h_lo .. h_hi
    bases: tuple[int, ...]  # B(h) of every cell
    rows: tuple[tuple[int, ...], ...]  # G(o, l)
    h_lo: int
    tlu_bits: int  # the widest table input (the budget check)
    center: int = 0  # k: the cell index is computed as h - k, which centres x + c_h on 0 (narrower values)

    offset = 0  # lookup_report's fields, as a LookupPlan has them

    @property
    def high_shift(self) -> int:
        return self.shift + self.low_bits

    @property
    def high_offset(self) -> int:
        """c_h: round_shift(x + c_h, r + j) = floor((round_shift(x, r) + L) / 2^j) - k = h - k."""
        return (1 << (self.shift - 1)) + (self.limit << self.shift) - (1 << (self.high_shift - 1)) \
            - (self.center << self.high_shift)

    def high_interval(self) -> tuple[int, int]:
        return self.lo + self.high_offset, self.hi + self.high_offset

    def cell(self, rounded_high: np.ndarray) -> np.ndarray:
        """h from round_bit_pattern's value h 2^(r+j), clipped into the planned cells."""
        h = (np.asarray(rounded_high, np.int64) >> self.high_shift) + self.center
        return np.clip(h, self.h_lo, self.h_lo + len(self.kinds) - 1) - self.h_lo

    def kind_table(self, rounded_high: np.ndarray) -> np.ndarray:
        """o(h) 2^(r+j): the row, already at the packed position."""
        return np.asarray(self.kinds, np.int64)[self.cell(rounded_high)] << self.high_shift

    def base_table(self, rounded_high: np.ndarray) -> np.ndarray:
        return np.asarray(self.bases, np.int64)[self.cell(rounded_high)]

    def packed_interval(self) -> tuple[int, int]:
        """P = rem + 2^(r-1) + o 2^(r+j), rem in [0, 2^(r+j))."""
        half = 1 << (self.shift - 1)
        return half, (max(self.kinds) << self.high_shift) + (1 << self.high_shift) - 1 + half

    def row_table(self, rounded_packed: np.ndarray) -> np.ndarray:
        """G(o, l) from round_bit_pattern(P, r) = (o 2^j + l + 1) 2^r."""
        p = (np.asarray(rounded_packed, np.int64) >> self.shift) - 1
        p = np.clip(p, 0, (len(self.rows) << self.low_bits) - 1)
        rows = np.asarray(self.rows, np.int64)
        return rows[p >> self.low_bits, p & ((1 << self.low_bits) - 1)]

    def base_interval(self) -> tuple[int, int]:
        return min(self.bases), max(self.bases)

    def row_interval(self) -> tuple[int, int]:
        return min(min(r) for r in self.rows), max(max(r) for r in self.rows)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """The construction, step by step in numpy (what the circuit computes)."""
        x = np.asarray(x, np.int64)
        a = x + self.high_offset
        rh = round_shift(a, self.high_shift) << self.high_shift
        packed = a + (1 << (self.high_shift - 1)) - rh + (1 << (self.shift - 1)) + self.kind_table(rh)
        rp = round_shift(packed, self.shift) << self.shift
        return self.base_table(rh) + self.row_table(rp)


def _cells(lo: int, hi: int, r: int, limit: int, j: int) -> tuple[int, int]:
    yl, yh = round_shift(lo, r) + limit, round_shift(hi, r) + limit
    return yl >> j, yh >> j


def _rows(h_lo: int, h_hi: int, limit: int, j: int):
    kinds, bases, rows = [], [], []
    for h in range(h_lo, h_hi + 1):
        base = min(max((h << j) - limit, -limit), limit)
        row = tuple(min(max((h << j) + l - limit, -limit), limit) - base for l in range(1 << j))
        if row not in rows:
            rows.append(row)
        kinds.append(rows.index(row))
        bases.append(base)
    return tuple(kinds), tuple(bases), tuple(rows)


def plan_clamp(lo: int, hi: int, shift: int, bits: int, budget: int, *, node: str) -> ClampPlan:
    """The split of clip(round_shift(x, shift), -L, L), x in [lo, hi], whose tables fit `budget`
    bits, with the largest low part (the fewest cells); FHEUnsupported when none fits."""
    limit = bits_max(bits)
    if shift < 1:
        raise FHEUnsupported("fhe.clamp", "a saturating rounding needs a shift of at least 1", node)
    why = "no split fits"
    for j in range(budget - 2, 0, -1):
        h_lo, h_hi = _cells(lo, hi, shift, limit, j)
        kinds, bases, rows = _rows(h_lo, h_hi, limit, j)
        if len(rows) > MAX_ROWS:
            why = f"{len(rows)} kinds of cells at a low part of {j} bits"
            continue
        plan = ClampPlan(lo, hi, shift, limit, j, kinds, bases, rows, h_lo, 0)
        plan = replace(plan, center=round(sum(plan.high_interval()) / 2 / (1 << plan.high_shift)))
        widths = (tlu_bits(*plan.high_interval(), plan.high_shift), tlu_bits(*plan.packed_interval(), shift),
                  int_bits(*plan.base_interval()), int_bits(*plan.row_interval()), int_bits(-limit, limit))
        if max(widths) > budget:
            why = f"tables of {widths[0]} (cell) and {widths[1]} (row) bits at a low part of {j} bits"
            continue
        plan = replace(plan, tlu_bits=max(widths[:2]))
        _check(plan, node)
        return plan
    raise FHEUnsupported("fhe.lookup_bits", f"saturating rounding clip(round_shift(x, {shift}), -{limit}, {limit}) "
                                            f"over [{lo}, {hi}]: {why} within the lookup budget of {budget}", node)


def _check(plan: ClampPlan, node: str) -> None:
    """The construction equals clip(round_shift(x, r), -L, L) at both ends of every (cell, position)
    class of x in [lo, hi] (x -> (h, l) is monotone, so the classes are intervals)."""
    r, L = plan.shift, plan.limit
    y = np.arange(round_shift(plan.lo, r), round_shift(plan.hi, r) + 1, dtype=np.int64)
    first = np.maximum((y << r) - (1 << (r - 1)), plan.lo)
    last = np.minimum((y << r) + (1 << (r - 1)) - 1, plan.hi)
    want = np.clip(y, -L, L)
    for x in (first, last):
        if not np.array_equal(plan.evaluate(x), want):
            raise FHEUnsupported("fhe.internal", "the saturating-rounding split disagrees with the reference", node)
