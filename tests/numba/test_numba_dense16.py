"""The int16 dense (and pointwise conv) and matmul paths on AVX-512 VNNI (numba_kernels/dense16.py: vpdpwssd) equal the reference bit for bit:
odd and even k (the last column's plain loop), channel counts across panel pairs, row counts that leave partial
tiles and blocks, a fused residual add, serial and split; weights beyond int16 keep the portable int32 path.
Each property runs once per kernel path; the VNNI one is skipped, naming it, where the CPU lacks it."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from numba_helpers import check, each_isa, needs_vnni
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


def _paths(model) -> str:
    runner = nb.prepare(model.graph, model.analysis, isa="vnni")
    return " ".join(str(s) for s in runner.plan.steps)


@st.composite
def wide_dense(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.sampled_from([2, 3, 7, 32, 33, 128]))
    og = draw(st.sampled_from([1, 5, 16, 17, 32, 33, 64, 80, 128]))
    seq = draw(st.sampled_from([(), (3,)]))  # a (k,) sample or a sequence of them (dense on the last axis)
    n = draw(st.integers(1, 70))
    xbits, wmax = draw(st.sampled_from([(12, 511), (13, 4095), (10, 127), (8, 511)]))  # 8: int8, widened
    b = cvm.GraphBuilder()
    x = b.input("x", (*seq, k), xbits)
    y = b.op("dense", x, b.const(rng.integers(-wmax, wmax + 1, (og, k))), b.const(rng.integers(-99999, 99999, og)))
    y = b.op("requant", y, b.const(rng.integers(1 << 10, 1 << 12, og)), shift=20, bits=12, axis=len(seq) + 0)
    if draw(st.booleans()):
        y = b.op("requant", b.op("add", y, b.op("requant", x, b.const([1]), shift=0, bits=12) if og == k else y),
                 b.const([3]), shift=2, bits=12)
    lim = (1 << (xbits - 1)) - 1
    return Case(b.build(y), {"x": rng.integers(-lim, lim + 1, (n, *seq, k)).astype(np.int8 if xbits <= 8 else np.int16)})


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=wide_dense(), threads=st.integers(1, 3))
def test_int16_dense_matches_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
    if isa == "vnni":
        assert "dense[vnni16]" in _paths(case.model)


@st.composite
def wide_pointwise_conv(draw) -> Case:
    """A 1x1 conv, stride 1, no padding: the dense kernel over the pixels; a strided or padded one is not."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c, og = draw(st.sampled_from([2, 3, 16, 33])), draw(st.sampled_from([1, 17, 32, 64]))
    h, w, n = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 3))
    strided = draw(st.booleans())
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), 12)
    attrs = {"strides": (2, 2), "pads": (0, 1, 1, 0)} if strided else {}
    y = b.op("conv2d", x, b.const(rng.integers(-511, 512, (og, c, 1, 1))), b.const(rng.integers(-999, 999, og)),
             **attrs)
    model = b.build(b.op("requant", y, b.const(rng.integers(1 << 10, 1 << 12, og)), shift=20, bits=12, axis=0))
    return Case(model, {"x": rng.integers(-2047, 2048, (n, c, h, w)).astype(np.int16)}), strided


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(drawn=wide_pointwise_conv())
def test_int16_pointwise_conv_matches_reference(isa, drawn):
    case, strided = drawn
    check(case, isas=[isa])
    if isa == "vnni":
        assert ("conv2d[vnni16]" in _paths(case.model)) != strided


@st.composite
def wide_matmul(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lead = draw(st.sampled_from([(), (2,), (1, 3)]))
    m, k, n = draw(st.integers(1, 70)), draw(st.sampled_from([2, 3, 16, 31, 64])), draw(st.integers(1, 70))
    bits = draw(st.sampled_from([9, 12, 13]))
    b = cvm.GraphBuilder()
    x, y = b.input("x", lead + (m, k), bits), b.input("y", lead + (k, n), bits)
    batch, lim = draw(st.integers(1, 3)), (1 << (bits - 1)) - 1
    inputs = {name: rng.integers(-lim, lim + 1, (batch, *shape)).astype(np.int16)
              for name, shape in (("x", lead + (m, k)), ("y", lead + (k, n)))}
    return Case(b.build(b.op("matmul", x, y)), inputs)


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=wide_matmul())
def test_int16_matmul_matches_reference(isa, case):
    check(case, isas=[isa])
    if isa == "vnni":
        assert "matmul[vnni16]" in _paths(case.model)


@needs_vnni
def test_weights_beyond_int16_keep_the_portable_path():
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), 12)
    model = b.build(b.op("dense", x, b.const(np.array([[40000, -40000, 7, 1], [3, 2, 1, -40000]]))))
    check(Case(model, {"x": np.array([[2047, -2047, 5, 0], [-1, 1, 2047, -2047]], np.int16)}))
    assert "dense[i32]" in _paths(model) and "vnni16" not in _paths(model)
