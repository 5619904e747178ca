"""The row reduction (numba_kernels/reduce_rows.py: a sum or max over the last stored axes in one int64
accumulator) equals its plain twin elementwise.reduce_mid with one-column rows and the reference: every
input dtype, one-element rows, the extremes; the planner takes it for reductions over the last axes."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import elementwise, reduce_rows
from numba_helpers import check
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 10)
DTYPES = (np.int8, np.uint8, np.int16, np.int32)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), outer=st.integers(1, 9), n=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
       is_max=st.booleans(), extreme=st.booleans())
def test_rows_equal_reduce_mid(seed, outer, n, dtype, is_max, extreme):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    x = np.full((outer, n), info.min if seed % 2 else info.max, dtype) if extreme else \
        rng.integers(info.min, int(info.max) + 1, (outer, n)).astype(dtype)
    got, want = np.empty(outer, np.int64), np.empty((outer, 1), np.int64)
    reduce_rows.reduce_rows(x, is_max, got)
    elementwise.reduce_mid(x.reshape(outer, n, 1), is_max, want)
    assert np.array_equal(got, want[:, 0])


@st.composite
def last_axis_reduction(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = draw(st.sampled_from([(5,), (3, 7), (2, 3, 33), (4, 197)]))
    axes = tuple(range(len(shape) - draw(st.integers(1, len(shape))), len(shape)))
    op = draw(st.sampled_from(["sum", "max"]))
    keep = len(axes) == len(shape) or draw(st.booleans())  # a reduction keeps at least one per-sample axis
    b = cvm.GraphBuilder()
    x = b.input("x", shape, 12)
    model = b.build(b.op(op, x, axes=axes, keepdims=int(keep)))
    return Case(model, {"x": rng.integers(-2047, 2048, (draw(st.integers(1, 3)), *shape)).astype(np.int16)})


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=last_axis_reduction())
def test_last_axis_reductions_match_reference(case):
    check(case)
    runner = nb.prepare(case.model.graph, case.model.analysis)
    step = next(s for s in runner.plan.steps if s.label in ("sum", "max"))
    x = case.inputs["x"]
    calls = step.bind([x], np.empty((len(x), *step.value.stored), step.value.dtype))
    assert [fn for fn, _ in calls] == [reduce_rows.reduce_rows]
