"""What calibration reads from every tensor, as one compiled pass each: the largest magnitude
(np.max(np.abs(x)) without its copy) and the histogram np.histogram(|x|, bins, range=(0, top)) (instead
of numpy's dozen passes over 64K-element blocks). The results are identical: the same float operations
in the same precisions, then the same one-step corrections at the bin edges (tests/mrt/test_histogram.py
checks both against numpy on edge cases)."""
from __future__ import annotations

import numpy as np
from numba import njit

# numpy >= 2 (NEP 50) divides the float32 values by the float64 range in float64; numpy 1 in float32.
# The compiled pass follows numpy 2; under numpy 1 (the fhe extra) numpy itself runs.
NEP50 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


@njit(cache=True, nogil=True)
def _count(x, top, width, edges, out):
    bins = out.size
    for k in range(x.size):
        v = abs(x[k])
        if not (v >= 0 and v <= top):  # numpy's range mask (NaN is outside)
            continue
        i = int((np.float64(v) / width) * bins)
        if i == bins:
            i -= 1
        if v < edges[i]:
            i -= 1
        if v >= edges[i + 1] and i != bins - 1:
            i += 1
        out[i] += 1


@njit(cache=True, nogil=True)
def _abs_max(x):
    m = np.float32(0)
    for k in range(x.size):
        v = abs(x[k])
        if v > m or v != v:  # a NaN stays, as in np.max
            m = v
    return m


def abs_max(x: np.ndarray) -> float:
    """float(np.max(np.abs(x))), 0.0 for an empty x, without the copy np.abs makes."""
    if x.size == 0:
        return 0.0
    if x.dtype != np.float32:
        return float(np.max(np.abs(x)))
    return float(_abs_max(np.ravel(x)))


def abs_histogram(x: np.ndarray, bins: int, top: float) -> np.ndarray:
    """np.histogram(np.abs(x), bins=bins, range=(0, top))[0], exactly (int64 counts)."""
    if not NEP50 or x.dtype != np.float32:
        return np.histogram(np.abs(x), bins=bins, range=(0, top))[0]
    edges = np.linspace(0, top, bins + 1, dtype=np.float32)  # numpy's bin edges for float32 data
    out = np.zeros(bins, np.int64)
    _count(np.ravel(x), np.float32(top), np.float64(top) - 0, edges, out)
    return out
