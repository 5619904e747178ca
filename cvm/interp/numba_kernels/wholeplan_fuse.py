"""Peepholes over a whole-plan program's calls (wholeplan.bind), before they are laid out.

A slice of a batch of more than one row is not contiguous, so the planner copies it to a buffer of
its own (elementwise.take_axis; wholeplan_ops.take_runs in the program): the LSTM fixture's gates
make 145 such copies a run at batch 8. Where the slice's value has one reader and that reader is a
kernel with a twin that reads the columns in place (lut_gather.copy_cols_g, rows_case.mul_cols_*),
the copy goes and the reader reads the source: the same values, computed by the same arithmetic.
Between the two calls nothing may touch the slice's buffer and only other slices may touch the
source (so it holds the same values when the reader runs), and none of the reader's other arrays
may lie over the source.
"""
from __future__ import annotations

import itertools

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # (numpy < 2, the FHE environment: numpy.byte_bounds)
    from numpy import byte_bounds

from .tuning import DEFAULT_TUNING


def fuse(calls: list, scan: int = DEFAULT_TUNING.fuse_scan) -> list:
    """calls: [((fn, args), (step, solo))], in order; step: the number of the plan step the call is
    part of; solo: one step reads that step's value (not a view, not a graph output). Returns
    [(fn, args)] with each such slice dropped and its reader replaced by its in-place twin; scan: calls
    looked at past a slice for its reader (Tuning.fuse_scan: bind time stays linear in the calls)."""
    calls, steps = [c for c, _ in calls], [s for _, s in calls]
    out, twins = [], {}
    for k, (fn, args) in enumerate(calls):
        if k in twins:
            out.append(twins.pop(k))
        elif steps[k][1] and _is_slice(fn, args) and (found := _reader(calls, steps, k, scan)) and found[0] not in twins:
            twins[found[0]] = found[1]  # (a reader of two slices takes one of them in place)
        else:
            out.append((fn, args))
    return out


def _is_slice(fn, args) -> bool:
    from .wholeplan_ops import take_runs
    return fn is take_runs and args[2] == 1


def _reader(calls: list, steps: list, k: int, scan: int) -> tuple[int, tuple] | None:
    """(index, twin call) of the slice calls[k]'s reader, where it has a twin and may take it: the
    only call of the reading step that touches the slice's buffer."""
    x, _, _, _, buf = calls[k][1]
    for j in range(k + 1, min(k + 1 + scan, len(calls))):
        fn, args = calls[j]
        if any(_overlap(a, buf) for a in args):
            twin = _twin(calls[k][1], calls[j])
            step = steps[j][0]
            rest = itertools.takewhile(lambda i: steps[i][0] == step, range(j + 1, len(calls)))  # noqa: B023
            if twin is None or any(_overlap(a, x) for a in twin[1][2:]) or any(
                    _overlap(a, buf) for i in rest for a in calls[i][1]):
                return None
            return j, twin
        reads_x = _is_slice(fn, args) and _same(args[0], x) and not _overlap(args[4], x)
        if not reads_x and any(_overlap(a, x) for a in args):
            return None
    return None


def _twin(slice_args, reader) -> tuple | None:
    """The reader's call on the slice's source, where it reads the slice's buffer as one operand."""
    from .lut_gather import copy_cols_g, copy_flat_g
    from .rows_case import mul_cols_p1, mul_cols_r1, mul_flat_p1, mul_flat_r1
    x, start, _, inner, buf = slice_args
    fn, args = reader
    at = [i for i, a in enumerate(args) if _overlap(a, buf)]
    if fn is copy_flat_g and at == [0] and _same(args[0], buf):
        return copy_cols_g, (x, start * inner, *args[1:])
    if fn in (mul_flat_p1, mul_flat_r1) and len(at) == 1 and at[0] < 2 and _same(args[at[0]], buf):
        twin = mul_cols_p1 if fn is mul_flat_p1 else mul_cols_r1
        return twin, (x, start * inner, args[1 - at[0]], *args[2:])  # (the int32 product commutes)
    return None


def _overlap(a, b: np.ndarray) -> bool:
    if not isinstance(a, np.ndarray):
        return not isinstance(a, (int, np.integer))  # (anything else: taken to touch every buffer)
    (a0, a1), (b0, b1) = byte_bounds(a), byte_bounds(b)
    return a.nbytes > 0 and a0 < b1 and b0 < a1


def _same(a, b) -> bool:
    """The same bytes, read as the same values (a flat view of the slice's buffer)."""
    return (a.dtype == b.dtype and a.nbytes == b.nbytes and a.flags.c_contiguous
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])
