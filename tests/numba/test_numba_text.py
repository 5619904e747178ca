"""The numba backend equals the reference interpreter bit for bit on random valid graphs of the opset-2
text ops (gather, isqrt; cvm/ops/text.py), on every kernel path this machine runs, serial and split
between threads. Derandomized; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from numba_helpers import EXAMPLES, SETTINGS, check
from strategies import Case


@st.composite
def text_case(draw):
    """A gather fed by an index computed in any layout (a clip of an input, or of a conv output stored
    channels-last), then isqrt of a square, of a wide product, or of a negative-heavy tensor."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    v = draw(st.integers(1, 70))
    d = draw(st.integers(1, 9))
    tdtype = draw(st.sampled_from([np.int8, np.int16, np.int32]))
    info = np.iinfo(tdtype)
    table = rng.integers(info.min, info.max + 1, (v, d)).astype(tdtype)
    from_conv = draw(st.booleans())
    b = cvm.GraphBuilder()
    if from_conv:
        c, h, w = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
        x = b.input("x", (c, h, w), 8)
        idx = b.op("conv2d", x, b.const(rng.integers(-3, 4, (2, c, 1, 1)).astype(np.int8)))
        shape = (2, h, w)
        inputs = {"x": rng.integers(-127, 128, (draw(st.integers(1, 3)), c, h, w)).astype(np.int8)}
    else:
        shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
        x = b.input("x", shape, 16)
        idx = x
        inputs = {"x": rng.integers(-200, 200, (draw(st.integers(1, 3)),) + shape).astype(np.int16)}
    idx = b.op("clip", idx, lo=0, hi=v - 1)
    g = b.op("gather", idx, b.const(table))
    kind = draw(st.sampled_from(["square", "wide", "signed"]))
    shift = {np.int8: 0, np.int16: 2, np.int32: 18}[tdtype]
    if kind == "square":
        n = b.op("requant", g, b.const([1]), shift=shift, bits=16)
        r = b.op("isqrt", b.op("mul", n, n))
    elif kind == "wide":
        n = b.op("requant", g, b.const([1]), shift=shift + 2, bits=14)
        r = b.op("isqrt", b.op("mul", b.op("sum", n, axes=[len(shape)], keepdims=1), n))
    else:
        r = b.op("isqrt", g)
    model = b.build([g, r])
    return Case(model, inputs)


@SETTINGS
@given(case=text_case())
def test_text_family_matches_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=text_case(), threads=st.integers(2, 3))
def test_text_split_between_threads_matches_reference(case, threads):
    check(case, threads=threads, split="always")
