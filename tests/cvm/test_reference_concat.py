"""The reference concat (one gather over the distinct inputs) against plain np.concatenate."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cvm.ops import OPSET_V1


@given(picks=st.lists(st.integers(0, 3), min_size=1, max_size=12), axis=st.integers(0, 1),
       seed=st.integers(0, 2 ** 31))
def test_concat_with_repeated_inputs_and_constants(picks, axis, seed):
    rng = np.random.default_rng(seed)
    batch = 3
    shape = [2, 3]
    pool = []
    for k in range(4):
        s = list(shape)
        s[axis] = k + 1
        arr = rng.integers(-100, 100, s)
        pool.append(arr if k == 3 else np.broadcast_to(arr, (batch, *s)).copy())  # input 3 is a constant
    if all(p == 3 for p in picks):
        picks = picks + [0]
    xs = [pool[p] for p in picks]
    want = np.concatenate([x if x.ndim == 3 else np.broadcast_to(x, (batch,) + x.shape) for x in xs], axis=axis + 1)
    np.testing.assert_array_equal(OPSET_V1["concat"].reference(*xs, axis=axis), want)
