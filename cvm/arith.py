"""The integer arithmetic of the spec, once: value widths, the rounding shift and division, window
sizes, and the multiply-accumulate bound. The verifier, the interpreters, the numba lowerings and
MRT's planners all call these, so a bound MRT plans with is the bound the verifier proves.

Everything takes Python ints (exact, any size) and, where noted, int64 numpy arrays.
"""
from __future__ import annotations

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1  # what an int32 accumulator holds
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT64_EXACT = 1 << 61  # three int64 terms each below this in magnitude add up without overflow


def bits_max(bits: int) -> int:
    """Largest value a tensor of `bits` may hold (the range is symmetric: -bits_max..bits_max)."""
    return (1 << (bits - 1)) - 1


def bits_for(lo: int, hi: int) -> int:
    """Smallest p such that [lo, hi] lies in the p-bit symmetric range."""
    return max(abs(int(lo)), abs(int(hi))).bit_length() + 1


def fits_int32(lo: int, hi: int) -> bool:
    """Every value of [lo, hi] (a proven interval: partial sums included) fits an int32 accumulator."""
    return INT32_MIN <= lo and hi <= INT32_MAX


def round_shift(v, shift: int):
    """floor((v + 2^(s-1)) / 2^s): round half up (toward +inf); s = 0 leaves v unchanged.

    Works on Python ints and int64 numpy arrays (>> on signed integers is floor division)."""
    if shift == 0:
        return v
    return (v + (1 << (shift - 1))) >> shift


def div_round(x, d):
    """floor((2x + d) / (2d)) = round(x / d), halves toward +inf; d >= 1. Python ints or int64 arrays."""
    return (2 * x + d) // (2 * d)


def div_round_into(x: np.ndarray, d, out: np.ndarray, d2=None) -> None:
    """`div_round` into `out` with int64 intermediates; d2 = 2d precomputed when d is a constant.
    Three numpy calls: a div node is ~140 gas on a few elements, so its fixed cost is the calls."""
    t = np.add(np.multiply(x, 2, dtype=np.int64), d)  # not in place: d may broadcast x to a larger shape
    d2 = np.multiply(d, 2, dtype=np.int64) if d2 is None else d2
    np.floor_divide(t, d2, out=out, dtype=np.int64, casting="unsafe")


def window_out(size: int, k: int, s: int, d: int, pad_before: int, pad_after: int, ceil: bool = False) -> int:
    """Number of window positions along one axis: floor((size + pads - d*(k-1) - 1) / s) + 1 (may be
    < 1); with ceil=True, the ceiling instead (ONNX ceil_mode, before dropping a window that starts
    in the end padding)."""
    reach = size + pad_before + pad_after - d * (k - 1) - 1
    return (-(-reach // s) if ceil else reach // s) + 1


def hull0(lo: int, hi: int) -> tuple[int, int]:
    """[lo, hi] widened to contain 0 (a MAC's partial sums start from 0)."""
    return min(lo, 0), max(hi, 0)


def row_sums(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per row (axis 0, the rest flattened): the sums of the positive and of the negative entries,
    int64 (at most 2^24 entries of at most 2^31 in magnitude: below 2^55), and the largest magnitude
    among them."""
    rows = values.reshape(values.shape[0], -1).astype(np.int64)
    pos, neg = np.where(rows > 0, rows, 0).sum(axis=1), np.where(rows < 0, rows, 0).sum(axis=1)
    return pos, neg, max(int(pos.max(initial=0)), -int(neg.min(initial=0)))


def bias_sides(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """max(b, 0) and min(b, 0), int64: the bias counts only on the side where it widens a MAC bound
    (docs/spec.md section 6), so partial sums stay inside whether accumulation starts from the bias
    or adds it last."""
    b = values.astype(np.int64)
    return np.maximum(b, 0), np.minimum(b, 0)


def channel_bounds(sums: tuple, x: tuple[int, int], sides: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel o, the MAC bound [lo_o, hi_o] of sum_k w[o,k]*x_k + b[o] over x_k in x
    (x contains 0), from the row sums (P_o, N_o, largest magnitude) and the bias sides:
    hi_o = P_o*xhi + N_o*xlo + max(b_o, 0) is a sum of three terms >= 0 (lo_o: three terms <= 0), so
    when each term is below INT64_EXACT int64 holds them exactly; otherwise the exact values come
    from Python integers (object arrays)."""
    pos, neg, largest = sums
    xlo, xhi = x
    if largest * max(-xlo, xhi) >= INT64_EXACT:
        pos, neg = pos.astype(object), neg.astype(object)
    hi, lo = pos * xhi, pos * xlo
    hi += neg * xlo
    lo += neg * xhi
    if sides is not None:
        hi += sides[0]
        lo += sides[1]
    return lo, hi


def mac_bound(w_rows: np.ndarray, x: tuple[int, int], bias: np.ndarray | None = None) -> tuple[int, int]:
    """[min, max] over output channels of sum_k w[o,k]*x_k + b[o], x_k in [x] hulled with 0: the bound
    the verifier proves for conv2d and dense (w_rows: one row per output channel)."""
    lo, hi = channel_bounds(row_sums(w_rows), hull0(*x), None if bias is None else bias_sides(bias))
    return int(lo.min()), int(hi.max())
