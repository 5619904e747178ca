"""Transposed-window geometry of conv_transpose2d (docs/spec.md 14.2).

Along one axis, input position i and tap u (i < size, u < k) add into output position
`p = i*s + u*d - pad` (s: stride, d: dilation, pad: padding before), when 0 <= p < n_out. Nothing
here materialises the full (uncropped) output or a zero-stuffed input: `axis_pieces` lists the
(input, tap) pairs that land inside the output as at most min(k, size) runs, so the reference does
work in proportion to the MACs the op pays for.

With the attribute bounds of the spec every quantity is below 2^42 (int64 holds them).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass


def out_size(size: int, k: int, s: int, d: int, pad_before: int, pad_after: int, output_padding: int) -> int:
    """s*(size-1) + output_padding + d*(k-1) + 1 - pads (may be < 1: the verifier refuses that)."""
    return s * (size - 1) + output_padding + d * (k - 1) + 1 - pad_before - pad_after


@dataclass(frozen=True)
class Piece:
    """One run along an axis. Tap-major: one tap (`tap` an int) over a run of inputs (`src` a slice);
    input-major: one input (`src` an int) over a run of taps (`tap` a slice). `out` is the run of
    output positions they land on, in the same order."""

    out: slice
    tap: int | slice
    src: int | slice

    @property
    def tap_major(self) -> bool:
        return isinstance(self.tap, int)


CACHED_PIECES = 64  # axes of at most this many pieces are remembered (as cvm.ops.window does)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def axis_pieces(size: int, n_out: int, k: int, s: int, d: int, pad: int) -> tuple[Piece, ...]:
    """The (input, tap) pairs of one axis that land in [0, n_out), as at most min(k, size) runs:
    tap-major when there are no more taps than inputs, input-major otherwise (small answers cached)."""
    if min(k, size) <= CACHED_PIECES:
        return _small_axis_pieces(size, n_out, k, s, d, pad)
    return _axis_pieces(size, n_out, k, s, d, pad)


def _axis_pieces(size: int, n_out: int, k: int, s: int, d: int, pad: int) -> tuple[Piece, ...]:
    pieces = []
    if k <= size:
        for u in range(k):
            lo = max(0, _ceil_div(pad - u * d, s))
            hi = min(size - 1, (n_out - 1 + pad - u * d) // s)
            if lo <= hi:
                first = lo * s + u * d - pad
                pieces.append(Piece(slice(first, first + (hi - lo) * s + 1, s), u, slice(lo, hi + 1)))
    else:
        for i in range(size):
            lo = max(0, _ceil_div(pad - i * s, d))
            hi = min(k - 1, (n_out - 1 + pad - i * s) // d)
            if lo <= hi:
                first = i * s + lo * d - pad
                pieces.append(Piece(slice(first, first + (hi - lo) * d + 1, d), slice(lo, hi + 1), i))
    return tuple(pieces)


_small_axis_pieces = functools.lru_cache(maxsize=1024)(_axis_pieces)
