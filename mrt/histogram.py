"""What calibration reads from every tensor, as one compiled pass each: the largest magnitude
(np.max(np.abs(x)) without its copy) and the histogram np.histogram(|x|, bins, range=(0, top)) (instead
of numpy's dozen passes over 64K-element blocks). The results are identical: the same float operations
in the same precisions, then the same one-step corrections at the bin edges (tests/mrt/test_histogram.py
checks both against numpy on edge cases).

Memory safety: a compiled kernel does not check its indices, so each proves them in range (its docstring
says how) and the wrappers send it only what the proof assumes; anything else runs through numpy.
(A range of inf once made NaN a bin index: int(nan) wrote before the array and corrupted the heap.)"""
from __future__ import annotations

import numpy as np
from numba import njit

# numpy >= 2 (NEP 50) divides the float32 values by the float64 range in float64; numpy 1 in float32.
# The compiled pass follows numpy 2; under numpy 1 (the fhe extra) numpy itself runs.
NEP50 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the largest top the compiled pass takes (its edges are float32)


@njit(cache=True, nogil=True)
def _count(x, top, width, edges, out):
    """Add the count of |x| per bin to `out` (1-D x; len(edges) == len(out) + 1, checked by abs_histogram).

    Indices in range: k < x.size. The bin position f is NaN-free or skipped (not f >= 0), so int() never
    sees a NaN; i = min(int(f), bins - 1) lies in [0, bins - 1] for any f >= 0, +inf included; the
    corrections move i down only when i > 0 and up only when i < bins - 1, so out[i] and edges[i] lie in
    [0, bins - 1] and edges[i + 1] in [1, bins - 1]. For 0 < top < inf and v in [0, top], f is in [0, bins]:
    these are numpy's steps exactly (its f == bins goes to the last bin, and its decrement below bin 0
    needs v < edges[0] = 0)."""
    bins = out.size
    for k in range(x.size):
        v = abs(x[k])
        if not (v >= 0 and v <= top):  # numpy's range mask (NaN is outside)
            continue
        f = (np.float64(v) / width) * bins
        if not (f >= 0.0):  # NaN (v and the range both inf, which abs_histogram never passes): no bin
            continue
        i = bins - 1 if f >= bins else int(f)
        if i > 0 and v < edges[i]:
            i -= 1
        if i < bins - 1 and v >= edges[i + 1]:
            i += 1
        out[i] += 1


@njit(cache=True, nogil=True)
def _abs_max(x):
    """max(|x|) of a 1-D x, NaN if any is NaN. Indices in range: k < x.size, x 1-D (abs_max ravels it)."""
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
    """np.histogram(np.abs(x), bins=bins, range=(0, top))[0], exactly (int64 counts). A top that is not a
    finite positive float32 goes to numpy, which refuses a non-finite one (ValueError)."""
    if not NEP50 or x.dtype != np.float32 or not 0 < top <= FLOAT32_MAX or not bins >= 1:
        return np.histogram(np.abs(x), bins=bins, range=(0, top))[0]
    edges = np.linspace(0, top, bins + 1, dtype=np.float32)  # numpy's bin edges for float32 data
    out = np.zeros(bins, np.int64)
    _count(np.ravel(x), np.float32(top), np.float64(top) - 0, edges, out)
    return out
