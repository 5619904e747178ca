"""The numba backend equals the reference interpreter bit for bit on random valid graphs of the opset-2
vision ops (tests/strategies_vision.py), on every kernel path this machine runs, serial and split
between threads. Derandomized; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from numba_helpers import EXAMPLES, SETTINGS, check
from strategies import Case
from strategies_vision import VISION_FAMILIES, vision_case


@pytest.mark.parametrize("family", sorted(VISION_FAMILIES))
@SETTINGS
@given(data=st.data())
def test_vision_family_matches_reference(family, data):
    check(data.draw(vision_case(family), label="case"))


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=st.one_of(vision_case("resize2d"), vision_case("conv_transpose2d")), threads=st.integers(2, 3))
def test_vision_split_between_threads_matches_reference(case, threads):
    check(case, threads=threads, split="always")


def test_large_resize_and_conv_transpose_split_across_threads():
    rng = np.random.default_rng(9)
    b = cvm.GraphBuilder()
    x = b.input("x", (16, 24, 24), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-9, 10, (16, 16, 1, 1))))
    y = b.op("relu", b.op("requant", y, b.const([5]), shift=6, bits=8))
    u = b.op("resize2d", y, size=(48, 40), mode=1, coord_h=(2, -1, 4), coord_w=(3, 0, 5), frac_bits=12)
    n = b.op("resize2d", x, size=(48, 48), coord_h=(4, 1, 8), coord_w=(4, 1, 8))
    t = b.op("conv_transpose2d", u, b.const(rng.integers(-127, 128, (16, 8, 4, 4))), b.const(rng.integers(-99, 99, 8)),
             strides=(2, 2), pads=(1, 1, 1, 1))
    model = b.build([n, b.op("requant", t, b.const([3]), shift=9, bits=8)])
    inputs = {"x": rng.integers(-127, 128, (4, 16, 24, 24)).astype(np.int8)}
    for threads in (1, 3):
        check(Case(model, inputs), threads=threads)
