"""Liveness-packed activation buffers (numba_kernels.buffers): values whose lifetimes meet never share
a byte, a long chain needs a few buffers instead of one per step, and packed sets run (again and
again, on other inputs, per step and as one program) bit for bit as the reference. The equivalence
suites run every model through packed sets too."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import buffers
from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING
from numba_helpers import SETTINGS, assert_same


@settings(SETTINGS, max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(0, 5000)), max_size=40))
def test_buffers_alive_together_never_overlap(spans):
    bufs = [(first, first + length, nbytes) for first, length, nbytes in spans]
    offsets, size = buffers.place(bufs)
    for i, (f1, l1, n1) in enumerate(bufs):
        assert offsets[i] % buffers.ALIGN == 0 and offsets[i] + n1 <= size
        for j in range(i):
            f2, l2, n2 = bufs[j]
            if f1 <= l2 and f2 <= l1 and n1 and n2:
                assert offsets[i] + n1 <= offsets[j] or offsets[j] + n2 <= offsets[i], (i, j)
    assert size <= sum(-(-n // buffers.ALIGN) * buffers.ALIGN for _, _, n in bufs)


@settings(SETTINGS, max_examples=100)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(1, 1 << 20)), max_size=30))
def test_large_buffers_are_staggered_within_a_page(spans):
    """Large buffers start at distinct offsets within a page (mod PAGE) as long as fewer than PAGE / ALIGN
    of them exist, still never overlapping while alive together, each costing at most a page more."""
    bufs = [(first, first + length, nbytes) for first, length, nbytes in spans]
    offsets, size = buffers.place(bufs)
    large = [i for i, (_, _, n) in enumerate(bufs) if n >= DEFAULT_TUNING.color_min_bytes]
    assert len({offsets[i] % buffers.PAGE for i in large}) == len(large)
    for i, (f1, l1, n1) in enumerate(bufs):
        assert offsets[i] % buffers.ALIGN == 0 and offsets[i] + n1 <= size
        for j in range(i):
            f2, l2, n2 = bufs[j]
            if f1 <= l2 and f2 <= l1:
                assert offsets[i] + n1 <= offsets[j] or offsets[j] + n2 <= offsets[i], (i, j)
    assert size <= sum(-(-n // buffers.ALIGN) * buffers.ALIGN for _, _, n in bufs) + len(large) * buffers.PAGE


def _chain(width: int = 4096, steps: int = 30):
    """x -> relu -> (sub x, relu) -> ...: every value read by the next step (and x by all)."""
    b = cvm.GraphBuilder()
    x = b.input("x", (width,), bits=8)
    h = x
    for i in range(steps):
        h = b.op("relu", b.op("sub", h, x)) if i % 2 else b.op("relu", h)
    return b.build(h)


def test_a_long_chain_holds_a_few_buffers_and_matches_reference():
    model = _chain()
    rng = np.random.default_rng(0)
    for whole in ("never", "always"):
        runner = nb.prepare(model.graph, model.analysis, threads=1, wholeplan=whole)
        for batch in (1, 3, 1, 3):
            x = rng.integers(-127, 128, (batch, 4096)).astype(np.int8)
            assert_same(runner({"x": x}), reference.run(model.graph, model.analysis, {"x": x}), f"[{whole} {batch}] ")
        values = runner.plan.values
        one_each = sum(int(np.prod(values[s.output].stored)) * np.dtype(values[s.output].dtype).itemsize
                       for s in runner.plan.steps)  # bytes a sample when every value has its own buffer
        assert len(runner.plan.steps) >= 20
        if whole == "never":  # (a program's arena also holds its steps' scratch and constants)
            assert runner.cached_bytes() < (1 + 3) * one_each / 4  # (sets of batch 1 and 3 held)


def test_outputs_and_values_still_read_are_not_overwritten():
    """A graph with two outputs, one computed early and kept to the end while later values come and go."""
    b = cvm.GraphBuilder()
    x = b.input("x", (512,), bits=8)
    early = b.op("relu", x)
    h = early
    for _ in range(12):
        h = b.op("relu", b.op("sub", h, x))
    model = b.build([early, b.op("sub", h, early)])
    rng = np.random.default_rng(1)
    runner = nb.prepare(model.graph, model.analysis, threads=1)
    for batch in (2, 2, 5):
        x_ = rng.integers(-127, 128, (batch, 512)).astype(np.int8)
        assert_same(runner({"x": x_}), reference.run(model.graph, model.analysis, {"x": x_}), f"[batch {batch}] ")
