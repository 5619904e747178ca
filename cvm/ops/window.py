"""Sliding-window geometry shared by conv2d and max_pool2d (docs/spec.md 7.1, 7.10).

Along one axis of size `size`, output position o reads the taps t = 0..k-1 at input position
`o*s + t*d - pad` (s: stride, d: dilation, pad: padding before); positions outside [0, size) are
padding. Nothing here materialises padding: `axis_pieces` lists, for one axis, the rectangles of
(output positions x taps) that read real input, so the reference interpreter does work in
proportion to what the op's cost pays for, whatever the pads.

Every quantity is a Python int; with the attribute bounds of docs/spec.md ("Attribute bounds")
every one of them is below 2^42, so any implementation may hold them in int64.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum_{i=0}^{n-1} floor((a*i + b) / m) for n >= 0, m >= 1, a >= 0, b >= 0, in O(log) steps:
    the Euclid-like reduction (reduce a and b mod m, then swap the roles of the axes)."""
    total = 0
    while n > 0:
        if a >= m:
            total += (n * (n - 1) // 2) * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            break
        n, b = divmod(y_max, m)
        m, a = a, m
    return total


def taps_hit(n_out: int, size: int, k: int, s: int, d: int, pad: int) -> bool:
    """Every window along one axis has at least one tap inside [0, size), in O(log) time.

    Windows starting at a >= 0 hit iff a < size; a grows with o, so only the last one can miss.
    Windows starting in the padding (a < 0, the first m ones) hit iff their last tap reaches 0
    (checked at o = 0, the lowest start) and their first tap at or after 0, which is a mod d,
    lies below size: counted over o with floor sums, using [r < size] = q(x) - q(x - size)."""
    m = min(n_out, -(-pad // s))
    if m > 0:
        if (k - 1) * d < pad:
            return False
        if d > size:
            c = (-pad) % d  # (o*s - pad) mod d == (o*s + c) mod d
            inside = floor_sum(m, d, s, c) - (floor_sum(m, d, s, c - size + d) - m)
            if inside != m:
                return False
    last = (n_out - 1) * s - pad
    return last < 0 or last < size


@dataclass(frozen=True)
class Piece:
    """One rectangle along an axis. Tap-major: one tap (`tap` an int) over a run of outputs;
    output-major: one output over a run of taps (`tap` a slice). `src` selects the input positions,
    as many as the run is long, in order."""

    out: slice
    tap: int | slice
    src: slice

    @property
    def tap_major(self) -> bool:
        return isinstance(self.tap, int)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


CACHED_PIECES = 64  # axes of at most this many pieces are remembered (1,024 of them: ~10 MB at most)


def axis_pieces(size: int, n_out: int, k: int, s: int, d: int, pad: int) -> tuple[Piece, ...]:
    """The (output, tap) pairs of one axis that read real input, as at most min(k, n_out) pieces:
    tap-major when there are no more taps than outputs, output-major otherwise. Small answers are
    cached: a chain of small convs or pools asks the same question at every node."""
    if min(k, n_out) <= CACHED_PIECES:
        return _small_axis_pieces(size, n_out, k, s, d, pad)
    return _axis_pieces(size, n_out, k, s, d, pad)


def _axis_pieces(size: int, n_out: int, k: int, s: int, d: int, pad: int) -> tuple[Piece, ...]:
    pieces = []
    if k <= n_out:
        for t in range(k):
            o_lo = max(0, _ceil_div(pad - t * d, s))
            o_hi = min(n_out - 1, (size - 1 + pad - t * d) // s)
            if o_lo <= o_hi:
                first = o_lo * s + t * d - pad
                pieces.append(Piece(slice(o_lo, o_hi + 1), t, slice(first, first + (o_hi - o_lo) * s + 1, s)))
    else:
        for o in range(n_out):
            a = o * s - pad
            t_lo = max(0, _ceil_div(-a, d))
            t_hi = min(k - 1, (size - 1 - a) // d)
            if t_lo <= t_hi:
                first = a + t_lo * d
                pieces.append(Piece(slice(o, o + 1), slice(t_lo, t_hi + 1),
                                    slice(first, first + (t_hi - t_lo) * d + 1, d)))
    return tuple(pieces)


_small_axis_pieces = functools.lru_cache(maxsize=1024)(_axis_pieces)
