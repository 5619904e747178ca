"""Random numbers for the referee's differential test (cvm/chain/referee_diff.py), biased to the
edges where an integer implementation goes wrong: the ends of a type (all +max, all -max, only
{-max, 0, max}), exact rounding halves, and geometry at the verifier's bounds.

One `Draw` per op instance, seeded from (seed, op, case), so any instance can be rebuilt alone.
"""

from __future__ import annotations

import zlib

import numpy as np

from cvm.arith import bits_max
from cvm.limits import MAX_GEOMETRY

VALUE_MODES = ("uniform", "uniform", "uniform", "max", "min", "edges", "small", "halves")
ACT_BITS = (1, 2, 4, 7, 8, 8, 8, 8, 12, 16, 16, 24, 31, 32)
FAR = (2, 3, 1 << 10, (1 << 19) + 1, MAX_GEOMETRY - 1, MAX_GEOMETRY)  # geometry near the verifier's bound


class Draw:
    """A seeded numpy Generator with the draws the op generators share."""

    def __init__(self, seed: int, op: str, case: int):
        self.rng = np.random.default_rng([seed, zlib.crc32(op.encode()), case])

    def int(self, lo: int, hi: int) -> int:
        """Uniform in lo..hi inclusive (Python ints of any size)."""
        return lo + int(self.rng.integers(0, hi - lo + 1)) if hi - lo < 1 << 62 else lo + self._big(hi - lo)

    def _big(self, span: int) -> int:
        return int.from_bytes(self.rng.bytes(16), "little") % (span + 1)

    def pick(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def bits(self, choices=ACT_BITS) -> int:
        return int(self.pick(choices))

    def shape(self, rank_lo: int = 1, rank_hi: int = 4, dim_hi: int = 4) -> tuple[int, ...]:
        return tuple(self.int(1, dim_hi) for _ in range(self.int(rank_lo, rank_hi)))

    def edge(self, lo: int, hi: int) -> int:
        """An end of lo..hi, one step inside it, zero (when inside), or uniform."""
        options = [lo, hi, min(lo + 1, hi), max(hi - 1, lo), min(max(0, lo), hi)]
        return self.pick(options) if self.chance(0.6) else self.int(lo, hi)

    def values(self, shape, lo: int, hi: int, shift: int = 0, mode: str | None = None) -> np.ndarray:
        """int64 array in lo..hi; the mode (drawn when None) makes the type's ends frequent, and
        "halves" gives odd multiples of 2^(shift-1), exactly halfway after a rounding shift."""
        mode = mode or self.pick(VALUE_MODES)
        shape = tuple(shape)
        if mode == "max":
            return np.full(shape, hi, np.int64)
        if mode == "min":
            return np.full(shape, lo, np.int64)
        if mode == "edges":
            return self.rng.choice(np.array(sorted({lo, hi, min(max(0, lo), hi)}), np.int64), shape)
        if mode == "small":
            return self.rng.integers(max(lo, -3), min(hi, 3) + 1, shape, dtype=np.int64)
        if mode == "halves" and shift > 0 and 1 << (shift - 1) <= hi:
            half = 1 << (shift - 1)
            n = (hi // half - 1) // 2  # odd k = 2j + 1 with |k * half| <= hi
            j = self.rng.integers(-n - 1, n + 1, shape, dtype=np.int64)
            return np.clip((2 * j + 1) * half, lo, hi)
        return self.rng.integers(lo, hi + 1, shape, dtype=np.int64)

    def signed(self, shape, bits: int, **kw) -> np.ndarray:
        """Values of a tensor of `bits`: -bits_max..bits_max."""
        m = bits_max(bits)
        return self.values(shape, -m, m, **kw)

    def far_axis(self, size: int, k: int, pad_cap: int = MAX_GEOMETRY) -> tuple[int, int, int, int]:
        """(stride, dilation, pad before, pad after) for a window of k taps over `size`, values up to
        MAX_GEOMETRY that still leave 1..4 window positions (what an attacker writes to make an
        implementation wrap or loop for free), or None where this draw leaves no valid window."""
        d = self.pick((1, 1) + FAR) if k > 1 else 1
        before = min(self.pick((0, 1) + FAR), pad_cap)
        after = self.pick((0, 1) + FAR)
        span = d * (k - 1) + 1
        after = max(after, span - size - before)
        if after > MAX_GEOMETRY:
            return None
        room = size + before + after - span  # window positions - 1 at stride 1
        s = min(MAX_GEOMETRY, max(1, room // self.int(1, 3) + self.int(0, 1)))
        return s, d, before, after
