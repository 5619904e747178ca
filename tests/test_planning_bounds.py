"""Planning a model not in the store stays near-linear in its size (issue 28): the buffer packer's work is
bounded by the pairs of buffers alive together, and a model built to keep thousands of values alive at once
is laid out end to end instead of packed (44 s of planning for 16k live values before)."""
import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import buffers
from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=25))
def test_meeting_pairs_counts_the_pairs_alive_together(spans):
    bs = [(f, f + d, 1) for f, d in spans]
    brute = sum(1 for a, b in itertools.combinations(bs, 2) if a[0] <= b[1] and b[0] <= a[1])
    assert buffers.meeting_pairs(bs) == brute


def _many_alive(n: int):
    """n relus of one input, all alive until the concats that read them (opset 4: 1,024 a concat)."""
    b = cvm.GraphBuilder(opset=4)
    x = b.input("x", (2,), 8)
    values = [b.op("relu", b.op("add", x, b.const(np.full(2, k % 100, np.int8)))) for k in range(n)]
    parts = [b.op("concat", *values[i:i + 1024], axis=0) for i in range(0, n, 1024)]
    return b.build(b.op("concat", *parts, axis=0) if len(parts) > 1 else parts[0])


def test_thousands_of_live_values_are_laid_out_end_to_end_and_run_exactly():
    model = _many_alive(4096)
    pairs = buffers.meeting_pairs([(i, 4096 + i // 1024, 1) for i in range(4096)])
    assert pairs > DEFAULT_TUNING.max_meeting_pairs  # the case the fallback is for
    x = np.array([[-3, 7]], np.int8)
    got = nb.prepare(model.graph, model.analysis)({"x": x})
    want = model.run(x, backend="reference")
    assert np.array_equal(next(iter(got.values())), want)


def test_few_live_values_are_still_packed():
    """A chain: each buffer meets its neighbours only, so packing reuses bytes (pool far below the sum)."""
    b = cvm.GraphBuilder(opset=4)
    y = b.input("x", (4096,), 8)
    for _ in range(64):
        y = b.op("relu", b.op("add", y, b.const(np.ones(1, np.int8))))
    model = b.build(y)
    spans = [(i, i + 1, 4096) for i in range(128)]
    assert buffers.meeting_pairs(spans) < DEFAULT_TUNING.max_meeting_pairs
    offsets, size = buffers.place(spans)
    assert size < 128 * 4096 // 8
    x = np.zeros((1, 4096), np.int8)
    assert np.array_equal(model.run(x), model.run(x, backend="reference"))
