"""MAC splits plan with the verifier's own bound (cvm.arith.mac_bound): a chunk MRT finds within the
accumulator budget is one the verifier proves within it, bias and all."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


from cvm.ops import OPSET_V1, Arg
from mrt.quantize.split import _reach, plan_chunks


@st.composite
def macs(draw):
    o, k = draw(st.integers(1, 4)), draw(st.integers(1, 16))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (o, k)).astype(np.int8)
    b = rng.integers(-(1 << 20), 1 << 20, o).astype(np.int32) if draw(st.booleans()) else None
    lo = draw(st.integers(-(1 << 15), 1 << 15))
    hi = draw(st.integers(lo, 1 << 15))
    return w, b, lo, hi


@settings(max_examples=300, deadline=None)
@given(macs())
def test_reach_is_the_verifiers_dense_bound(mac):
    w, b, lo, hi = mac
    args = [Arg((w.shape[1],), lo, hi), Arg(w.shape, int(w.min()), int(w.max()), w)]
    if b is not None:
        args.append(Arg(b.shape, int(b.min()), int(b.max()), b))
    vlo, vhi = OPSET_V1["dense"].bound(args, {}, (w.shape[0],))
    assert _reach(w, b, lo, hi) == max(-vlo, vhi)


def test_a_negative_bias_after_relu_counts_on_its_own_side():
    """x in [0, 127], positive weights, bias -20: the sum reaches P*127 (bias not yet added, or x = 0
    gives -20), which the verifier counts; adding the bias to both ends would have found P*127 - 20."""
    w = np.full((1, 4), 100, np.int8)
    reach = _reach(w, np.array([-20], np.int32), 0, 127)
    assert reach == 400 * 127
    limit = 400 * 127 - 10  # between P*127 - 20 and P*127: must split
    chunks = plan_chunks(w, 1, np.array([-20], np.int32), 0, 127, limit)
    assert chunks == [(0, 3), (3, 4)]
