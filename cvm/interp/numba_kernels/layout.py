"""How the numba backend stores a tensor: storage dtype and one of three layouts.

- "c": the spec's layout (batch first, then the per-sample axes in order).
- "nhwc": a rank-3 [C, H, W] tensor stored channels-last, (N, H, W, C): what conv and pooling use.
- "flat": a flatten of an "nhwc" tensor, stored as (N, H*W*C) in channels-last order (dense permutes
  its weight columns instead of the data being transposed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

C, NHWC, FLAT = "c", "nhwc", "flat"


@dataclass(frozen=True)
class Value:
    shape: tuple[int, ...]  # per sample, in the spec's layout
    dtype: np.dtype
    lo: int
    hi: int
    layout: str = C
    chw: tuple[int, int, int] | None = None  # the source [C, H, W] of a "flat" value
    pad: tuple[int, int, int, int] | None = None  # (top, left, bottom, right): an "nhwc" value stored inside
    # a zero border, as its one reader's padded input (pad_fuse)

    @property
    def stored(self) -> tuple[int, ...]:
        """Per-sample shape of the stored array."""
        if self.layout == NHWC:
            c, h, w = self.shape
            if self.pad is not None:
                return (h + self.pad[0] + self.pad[2], w + self.pad[1] + self.pad[3], c)
            return (h, w, c)
        return self.shape

    def with_layout(self, layout: str, chw=None) -> "Value":
        return Value(self.shape, self.dtype, self.lo, self.hi, layout, chw)


def canonical(arr: np.ndarray, value: Value) -> np.ndarray:
    """A view of a stored batched array in the spec's layout ("flat" values must be converted first)."""
    if value.layout == NHWC:
        return arr.transpose(0, 3, 1, 2)
    assert value.layout == C, "flat values have no canonical view"
    return arr


def flat_permutation(chw) -> np.ndarray:
    """perm[i] = spec index of the element stored at position i of a "flat" value."""
    c, h, w = chw
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)


def to_nhwc_const(values: np.ndarray) -> np.ndarray:
    """A constant broadcast against a rank-3 [C, H, W] sample, rearranged for an "nhwc" one."""
    v = values.reshape((1,) * (3 - values.ndim) + values.shape)
    return np.ascontiguousarray(v.transpose(1, 2, 0))
