"""One-axis slices are views of their input where that view is contiguous (a batch of one: every
gate and time-step slice of an unrolled recurrent model), copies otherwise; the readers of a view
(element-wise chains, gate products, dense layers, graph outputs, further slices) equal the
reference bit for bit, on every ISA, at batch 1 and larger, serial and split between threads.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI runs)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from numba_helpers import EXAMPLES, SETTINGS, check
from strategies import finish, source, values


def one_axis_slice(draw, b, x: str, shape) -> tuple[str, tuple]:
    """A slice of x along one axis with a positive step (the others whole); returns (name, shape)."""
    a = draw(st.integers(0, len(shape) - 1))
    start = draw(st.integers(0, shape[a] - 1))
    end = draw(st.integers(start + 1, shape[a]))
    step = draw(st.integers(1, 3))
    starts, ends, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[a], ends[a], steps[a] = start, end, step
    out = tuple(len(range(start, end, step)) if i == a else d for i, d in enumerate(shape))
    return b.op("slice", x, starts=starts, ends=ends, steps=steps), out


@st.composite
def slice_readers_case(draw):
    b = cvm.GraphBuilder()
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    x = source(draw, b, shape, draw(st.sampled_from([8, 8, 16])))
    outputs = []
    for _ in range(draw(st.integers(1, 3))):
        y, ys = one_axis_slice(draw, b, x, shape)
        if draw(st.integers(0, 3)) == 0:  # a slice of a slice
            y, ys = one_axis_slice(draw, b, y, ys)
        kind = draw(st.sampled_from(["output", "relu", "chain", "square", "dense"]))
        if kind == "relu":
            y = b.op("relu", y)
        elif kind == "chain":
            y = b.op("requant", y, b.const([draw(st.integers(1, 99))]), shift=draw(st.integers(0, 9)), bits=8)
            y = b.op("lut", y, b.const(values(draw, (255,), -127, 127)), offset=-127)
        elif kind == "square":
            y = b.op("mul", y, y) if draw(st.booleans()) else b.op("mul", y, b.op("relu", y))
        elif kind == "dense" and len(ys) == 1:
            y = b.op("requant", y, b.const([1]), shift=8, bits=8)
            y = b.op("dense", y, b.const(values(draw, (draw(st.integers(1, 40)), ys[0]), -127, 127)))
        outputs.append(y)
    return finish(draw, b, outputs)


@SETTINGS
@given(case=slice_readers_case())
def test_slice_views_match_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=slice_readers_case(), threads=st.integers(2, 3))
def test_slice_views_split_between_threads_match_reference(case, threads):
    check(case, threads=threads, split="always")


def test_gate_slices_are_views_at_batch_one_only():
    """The four gate slices of a dense output: views at batch 1 (no kernel call), copies at batch 3;
    the results equal the reference either way."""
    rng = np.random.default_rng(0)
    b = cvm.GraphBuilder()
    x = b.input("x", (12,), 8)
    g = b.op("requant", b.op("dense", x, b.const(rng.integers(-127, 128, (32, 12)))), b.const([1]), shift=9, bits=8)
    gates = [b.op("slice", g, starts=[8 * k], ends=[8 * k + 8], steps=[1]) for k in range(4)]
    y = b.op("requant", b.op("mul", gates[0], gates[1]), b.const([1]), shift=7, bits=8)
    z = b.op("add", b.op("relu", gates[2]), gates[3])
    model = b.build([y, z])
    runner = nb.prepare(model.graph, model.analysis, threads=1)
    slices = [s for s in runner.plan.steps if s.label == "slice"]
    assert len(slices) == 4
    for batch in (1, 3):
        xs = {"x": rng.integers(-127, 128, (batch, 12)).astype(np.int8)}
        want = cvm.interp.reference.run(model.graph, model.analysis, xs)
        got = runner(xs)
        assert all(np.array_equal(got[k], want[k]) and got[k].dtype == want[k].dtype for k in want)
        stored = np.zeros((batch, 32), np.int8)
        views = [s.bound_view([stored]) for s in slices]
        assert all((v is not None) == (batch == 1) for v in views)
        if batch == 1:
            assert all(np.shares_memory(v, stored) for v in views)
