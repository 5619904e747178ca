"""Exact int32-lane forms of a requant on a small proven domain.

The output step's requant is y = floor((d * mult + rnd) / 2^shift): with the normalized multipliers
MRT emits (mult ~ 2^30, shift ~ 34) it needs 64-bit products, so a vector unit does it 8 lanes at a
time with a 64-bit multiply. Where d is known to lie in a small interval (a residual tensor's proven
range, or the sum of a clamped requant and that residual), the same function of d is often computed
exactly by a narrower triple (m', r', s') whose products fit int32: 16 lanes and one vpmulld.

"Often" is decided here, once per kernel at prepare time, by checking every d of the domain: the
triple is returned only when floor((d*m' + r') / 2^s') equals floor((d*mult + rnd) / 2^shift) for
every integer d in [lo, hi] (or their clips to [clo, chi] are equal, when a clip follows), and
|d*m' + r'| < 2^31 there. No value outside the domain is ever given to the narrowed form: the
domain is what the kernel's inputs are proven to lie in (a clip before it, the tensor's bounds).
"""
from __future__ import annotations

import numpy as np

from .tuning import DEFAULT_TUNING, Tuning

LANE = 1 << 31  # |d * m' + r'| must stay below this (int32 lanes)


def narrow(mult: int, rnd: int, shift: int, lo: int, hi: int, clip: tuple[int, int] | None = None,
           tuning: Tuning | None = None) -> tuple[int, int, int] | None:
    """(m', r', s') computing floor((d*mult + rnd) / 2^shift) exactly for d in [lo, hi] in int32
    lanes (see the module docstring); clip=(clo, chi): only the clipped results need to agree.
    None when the domain is too large (over tuning.narrow_max_domain values) or no triple near
    mult / 2^(shift - s') is exact (tuning.narrow_shifts_tried shifts below the widest that fits)."""
    tuning = tuning or DEFAULT_TUNING
    mult, rnd, shift, lo, hi = int(mult), int(rnd), int(shift), int(lo), int(hi)
    if not lo <= hi or hi - lo + 1 > tuning.narrow_max_domain or mult == 0:
        return None
    amax = max(abs(lo), abs(hi))
    if amax * abs(mult) + abs(rnd) >= 1 << 62:  # the exact reference values must fit int64 here
        return None
    d = np.arange(lo, hi + 1, dtype=np.int64)
    k = (d * mult + rnd) >> shift
    widest = min(shift, 30, max(0, 30 - int(abs(mult) * max(amax, 1)).bit_length() + shift))
    for sp in range(widest + 1, max(-1, widest - tuning.narrow_shifts_tried), -1):
        base = mult >> (shift - sp) if sp <= shift else mult << (sp - shift)
        for mp in (base, base + 1, base - 1):
            found = _offset(d, k, mp, sp, clip)
            if found is not None and max(abs(lo * mp + found), abs(hi * mp + found)) < LANE:
                return mp, found, sp
    return None


def _offset(d: np.ndarray, k: np.ndarray, mp: int, sp: int, clip) -> int | None:
    """An r' with floor((d*mp + r') / 2^sp) == k for every d (or equal clips), or None."""
    if abs(mp) * max(abs(int(d[0])), abs(int(d[-1]))) >= 1 << 62:
        return None
    dm = d * mp
    low = (k << sp) - dm  # r' >= low: the sum reaches k * 2^sp
    high = ((k + 1) << sp) - dm - 1  # r' <= high: it stays below (k + 1) * 2^sp
    if clip is not None:
        clo, chi = clip
        big = np.int64(1) << 62
        low = np.where(k <= clo, -big, np.where(k >= chi, (np.int64(chi) << sp) - dm, low))
        high = np.where(k >= chi, big, np.where(k <= clo, ((np.int64(clo) + 1) << sp) - dm - 1, high))
    lo_r, hi_r = int(low.max()), int(high.min())
    if lo_r > hi_r:
        return None
    half = (1 << sp) >> 1
    return min(max(half, lo_r), hi_r)
