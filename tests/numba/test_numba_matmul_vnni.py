"""The int8 x int8 matmul of two activations on AVX-512 VNNI (numba_kernels/matmul_vnni.py: vpdpbusd, the left
operand shifted into uint8 and the shift taken back by each accumulator's start) equals its plain twin
matmul.matmul_i32 and the reference bit for bit: every int8 value (-128 included), a uint8 left operand
(no shift), k not a multiple of 4 (padded groups), n across panel pairs, m leaving partial row tiles."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import matmul, matmul_vnni
from numba_helpers import check, each_isa, needs_vnni
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 10)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 3), m=st.integers(1, 41), k=st.integers(1, 133),
       n=st.integers(1, 97), unsigned=st.booleans())
@needs_vnni
def test_kernel_equals_its_plain_twin(seed, p, m, k, n, unsigned):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (p, m, k)).astype(np.uint8) if unsigned else rng.integers(-128, 128, (p, m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (p, k, n)).astype(np.int8)
    if rng.random() < 0.2:  # the extremes of both operands at once
        a[...] = 255 if unsigned else -128
        b[...] = -128
    got, want = np.empty((p, m, n), np.int32), np.empty((p, m, n), np.int32)
    matmul_vnni.matmul_vnni(*matmul_vnni.left_operand(a), b, got)
    matmul.matmul_i32(a, b, want)
    assert np.array_equal(got, want)
    assert np.array_equal(got, np.matmul(a.astype(np.int64), b.astype(np.int64)))


def test_eligible_only_for_8_bit_operands_and_a_k_the_shift_keeps_in_int32():
    assert matmul_vnni.eligible(np.int8, np.int8, 64) and matmul_vnni.eligible(np.uint8, np.int8, 197)
    assert not matmul_vnni.eligible(np.int16, np.int8, 64) and not matmul_vnni.eligible(np.int8, np.uint8, 64)
    assert not matmul_vnni.eligible(np.int8, np.int8, matmul_vnni.MAX_K + 1)
    assert matmul_vnni.MAX_K * 255 * 128 < 2**31 <= (matmul_vnni.MAX_K + 1) * 255 * 128


@st.composite
def attention_matmul(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lead = draw(st.sampled_from([(), (2,), (1, 3)]))
    m, k, n = draw(st.integers(1, 40)), draw(st.sampled_from([1, 3, 4, 16, 31, 64])), draw(st.integers(1, 70))
    b = cvm.GraphBuilder()
    x, y = b.input("x", lead + (m, k), 8), b.input("y", lead + (k, n), 8)
    batch = draw(st.integers(1, 3))
    inputs = {name: rng.integers(-127, 128, (batch, *shape)).astype(np.int8)
              for name, shape in (("x", lead + (m, k)), ("y", lead + (k, n)))}
    return Case(b.build(b.op("matmul", x, y)), inputs)


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=attention_matmul())
def test_int8_matmul_matches_reference(isa, case):
    check(case, isas=[isa])
    if isa == "vnni":
        runner = nb.prepare(case.model.graph, case.model.analysis, isa="vnni")
        assert "matmul[vnni]" in " ".join(str(s) for s in runner.plan.steps)
