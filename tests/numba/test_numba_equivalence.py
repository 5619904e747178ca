"""The numba backend equals the reference interpreter bit for bit (same dtype, same values) on random
valid graphs of every op family, on every kernel path this machine can run (portable, and AVX-512
VNNI when present), serial and split between threads.

Reproducible: derandomized, no example database. CVM_HYPOTHESIS_EXAMPLES scales the examples per
family (default 1000, what CI runs)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvm.interp import numba as nb
from numba_helpers import EXAMPLES, SETTINGS, assert_same, check, each_isa
from strategies import FAMILIES, Case, chain_case, op_case


@pytest.mark.parametrize("family", sorted(FAMILIES))
@SETTINGS
@given(data=st.data())
def test_op_family_matches_reference(family, data):
    check(data.draw(op_case(family), label="case"))


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=st.one_of(op_case("conv2d"), op_case("dense"), op_case("max_pool2d"), chain_case()),
       threads=st.integers(2, 3))
def test_split_between_threads_matches_reference(case, threads):
    check(case, threads=threads, split="always")


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 2))
@given(case=chain_case())
def test_small_models_match_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 10))
@given(case=chain_case())
def test_each_sample_alone_equals_its_batched_row(case):
    x = next(iter(case.inputs.values()))
    x = np.concatenate([x, x[::-1], -x]) if x.shape[0] > 1 else np.concatenate([x, -x])
    runner = nb.prepare(case.model.graph, case.model.analysis)
    batched = runner({"x": x})
    for i in range(x.shape[0]):
        alone = runner({"x": x[i:i + 1]})
        assert_same(alone, {k: v[i:i + 1] for k, v in batched.items()}, f"sample {i}: ")


def test_large_conv_split_across_threads_matches_reference():
    """Shapes big enough for the automatic split (several row blocks per thread)."""
    import cvm
    rng = np.random.default_rng(7)
    b = cvm.GraphBuilder()
    x = b.input("x", (32, 32, 32), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-127, 128, (64, 32, 3, 3))), b.const(rng.integers(-9999, 9999, 64)),
             pads=(1, 1, 1, 1))
    y = b.op("relu", b.op("requant", y, b.const(rng.integers(1 << 14, 1 << 15, 64)), shift=30, bits=8, axis=0))
    y = b.op("max_pool2d", y, kernel=(2, 2), strides=(2, 2))
    model = b.build(y)
    inputs = {"x": rng.integers(-127, 128, (8, 32, 32, 32)).astype(np.int8)}
    for threads in (1, 2, 3):
        check(Case(model, inputs), threads=threads)


@pytest.mark.parametrize("isa", each_isa())
@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 1, 1, 1), (2, 0, 1, 3)])
def test_unsigned_activation_input_takes_vnni_and_matches_reference(pads, isa):
    """A conv reading a tensor proven in 0..255 (an unsigned activation: 9-bit requant, relu; stored
    int16) runs the VNNI kernel with offset 0, bit for bit (skipped, naming VNNI, where the host lacks it)."""
    import cvm
    from cvm.interp.numba_kernels.layout import Value
    from cvm.interp.numba_kernels.lower_mac import vnni_offset
    rng = np.random.default_rng(11)
    b = cvm.GraphBuilder()
    x = b.input("x", (16, 9, 9), 12)
    u = b.op("relu", b.op("requant", x, b.const([3]), shift=3, bits=9), name="u")
    y = b.op("conv2d", u, b.const(rng.integers(-127, 128, (32, 16, 3, 3))), b.const(rng.integers(-999, 999, 32)),
             pads=pads)
    model = b.build(b.op("requant", y, b.const([1]), shift=10, bits=8))
    assert model.analysis.tensors["u"].lo == 0 and model.analysis.tensors["u"].hi == 255
    assert vnni_offset(Value((16, 9, 9), np.dtype(np.int16), 0, 255, "c")) == 0
    assert vnni_offset(Value((16, 9, 9), np.dtype(np.int16), -1, 255, "c")) is None
    inputs = {"x": rng.integers(-2047, 2048, (4, 16, 9, 9)).astype(np.int16)}
    check(Case(model, inputs), isas=[isa])
    if isa == "vnni":
        runner = nb.prepare(model.graph, model.analysis, isa="vnni")
        assert any("[vnni]" in str(s) for s in runner.plan.steps)
