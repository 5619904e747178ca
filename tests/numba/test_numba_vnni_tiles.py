"""The VNNI GEMM's register tiles (vnni.py: 6 pixels x 64 channels, and 8 x 32 for the two panels
past the last multiple of 4) equal the reference bit for bit for channel counts that take either
tile or both, and pixel counts that leave partial tiles and partial blocks, serial and split.

The op-family strategies draw at most 40 output channels; these cases draw up to 200. Each case runs once
per kernel path; the VNNI one is skipped, naming it, where the CPU lacks it."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from numba_helpers import check, each_isa
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


@st.composite
def wide_conv(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.sampled_from([3, 4, 8, 17, 64]))
    og = draw(st.sampled_from([32, 64, 65, 96, 128, 160, 200]))
    k = draw(st.sampled_from([1, 3]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 13))
    n = draw(st.integers(1, 3))
    residual = draw(st.booleans())
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-127, 128, (og, c, k, k))), b.const(rng.integers(-9999, 9999, og)),
             pads=(k // 2,) * 4)
    y = b.op("requant", y, b.const(rng.integers(1 << 14, 1 << 15, og)), shift=24, bits=8, axis=0)
    if residual:
        r = b.op("conv2d", x, b.const(rng.integers(-127, 128, (og, c, 1, 1))), b.const(rng.integers(-99, 99, og)))
        r = b.op("requant", r, b.const([3]), shift=12, bits=8)
        y = b.op("requant", b.op("add", y, r), b.const([3]), shift=2, bits=8)
    model = b.build(b.op("relu", y))
    return Case(model, {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)})


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=wide_conv(), threads=st.integers(1, 3))
def test_wide_convs_match_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
    if isa == "vnni":
        runner = nb.prepare(case.model.graph, case.model.analysis, isa="vnni")
        assert any("conv2d[vnni]" in str(s) for s in runner.plan.steps)
