"""The whole-plan runner's compiled tensor division (numba_kernels/div_round.py) equals the spec's div_round
(cvm.arith, Python integers) on int32 operands at their extremes, with broadcasting (a divisor per row, per
element, per tensor), and a model dividing by a tensor runs as the reference does."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cvm.arith import div_round, div_round_into
from cvm.interp.numba_kernels import div_round as kernel
from cvm.interp.numba_kernels import wholeplan_ops
from cvm.interp.numba_kernels.calls import call

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 5)
I32 = (-(1 << 31), (1 << 31) - 1)


@st.composite
def division(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    dshape = tuple(1 if draw(st.booleans()) else n for n in shape)  # broadcast along any axes
    xlo, xhi = draw(st.sampled_from([I32, (-1000, 1000), (0, 1 << 20)]))
    dlo, dhi = draw(st.sampled_from([(1, I32[1]), (1, 7), (1 << 18, 1 << 22), (I32[0], -1)]))
    x = rng.integers(xlo, xhi, shape, endpoint=True).astype(np.int32)
    d = rng.integers(dlo, dhi, dshape, endpoint=True).astype(np.int32)
    x.flat[0], d.flat[-1] = xhi, dlo  # the extremes themselves
    return x, d


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=division())
def test_compiled_division_equals_the_spec(case):
    x, d = case
    out = np.empty(np.broadcast_shapes(x.shape, d.shape), np.int64)
    [(fn, args)] = wholeplan_ops.translate(call(div_round_into, x, d, out, None))
    assert fn is kernel.div_round4
    fn(*args)
    xb, db = np.broadcast_arrays(x, d)
    want = np.array([div_round(int(a), int(b)) for a, b in zip(xb.reshape(-1), db.reshape(-1))], dtype=object)
    assert [int(v) for v in out.reshape(-1)] == list(want)


def test_wide_operands_and_strided_ones_stay_in_numpy():
    out = np.empty((2, 3), np.int64)
    x64, d = np.ones((2, 3), np.int64), np.ones((2, 1), np.int32)
    wide = call(div_round_into, x64, d, out, None)
    assert wholeplan_ops.translate(wide) == [wide]
    strided = call(div_round_into, np.ones((2, 6), np.int32)[:, ::2], d, out, None)
    assert wholeplan_ops.translate(strided) == [strided]
