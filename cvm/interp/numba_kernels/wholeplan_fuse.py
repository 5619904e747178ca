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

from .calls import Call, twin
from .tuning import DEFAULT_TUNING


def fuse(calls: list, scan: int = DEFAULT_TUNING.fuse_scan) -> list:
    """calls: [(Call, (step, solo))], in order; step: the number of the plan step the call is
    part of; solo: one step reads that step's value (not a view, not a graph output). Returns
    the Calls with each such slice dropped and its reader replaced by its in-place twin; scan: calls
    looked at past a slice for its reader (Tuning.fuse_scan: bind time stays linear in the calls)."""
    calls, steps = [c for c, _ in calls], [s for _, s in calls]
    out, twins = [], {}
    for k, c in enumerate(calls):
        if k in twins:
            out.append(twins.pop(k))
        elif steps[k][1] and _is_slice(c) and (found := _reader(calls, steps, k, scan)) and found[0] not in twins:
            twins[found[0]] = found[1]  # (a reader of two slices takes one of them in place)
        else:
            out.append(c)
    return out


def _is_slice(c: Call) -> bool:
    from .wholeplan_ops import take_runs
    return c.fn is take_runs and c.args.step == 1


def _reader(calls: list, steps: list, k: int, scan: int) -> tuple[int, Call] | None:
    """(index, twin call) of the slice calls[k]'s reader, where it has a twin and may take it: the
    only call of the reading step that touches the slice's buffer."""
    x, buf = calls[k].args.x, calls[k].args.out
    for j in range(k + 1, min(k + 1 + scan, len(calls))):
        c = calls[j]
        if any(_overlap(a, buf) for a in c.args):
            twin = _twin(calls[k].args, c)
            step = steps[j][0]
            rest = itertools.takewhile(lambda i: steps[i][0] == step, range(j + 1, len(calls)))  # noqa: B023
            if twin is None or any(_overlap(a, x) for name, a in twin.args._asdict().items() if name not in ("x", "c0")) \
                    or any(_overlap(a, buf) for i in rest for a in calls[i].args):
                return None
            return j, twin
        reads_x = _is_slice(c) and _same(c.args.x, x) and not _overlap(c.args.out, x)
        if not reads_x and any(_overlap(a, x) for a in c.args):
            return None
    return None


def _twin(s, reader: Call) -> Call | None:
    """The reader's call on the slice's source (s: the slice's take_runs arguments), where it reads the
    slice's buffer as one operand: x, or sc (the int32 product commutes: then x becomes sc)."""
    from .lut_gather import copy_cols_g, copy_flat_g
    from .rows_case import mul_cols_p1, mul_cols_r1, mul_flat_p1, mul_flat_r1
    a = reader.args
    at = [name for name, v in a._asdict().items() if _overlap(v, s.out)]
    if reader.fn is copy_flat_g and at == ["x"] and _same(a.x, s.out):
        return twin(copy_cols_g, a, x=s.x, c0=s.start * s.inner)
    if reader.fn in (mul_flat_p1, mul_flat_r1) and at in (["x"], ["sc"]) and _same(getattr(a, at[0]), s.out):
        cols = mul_cols_p1 if reader.fn is mul_flat_p1 else mul_cols_r1
        return twin(cols, a, x=s.x, c0=s.start * s.inner, sc=a.sc if at == ["x"] else a.x)
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
