"""A lut from int8 to int8 runs as byte permutes on AVX-512 VBMI (lut_vbmi.lut_i8, step "lut[vbmi]")
where the CPU has it, and as the plain lookup loop (elementwise.lut) otherwise and on the portable
ISA; both equal the reference bit for bit: any input range inside int8 (narrower ones, a clip to one
side, the full -128..127), tables longer than the range, any output width up to 8 bits (wider
outputs take the plain loop), lengths around the 64-element vectors, channels-last inputs, serial
and split between threads.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI runs)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.arith import bits_max
from cvm.interp import numba as nb
from numba_helpers import EXAMPLES, SETTINGS, check, needs_vbmi
from strategies import finish, source, values


@st.composite
def int8_lut_case(draw):
    b = cvm.GraphBuilder()
    size = draw(st.one_of(st.integers(1, 70), st.integers(120, 300)))
    shape = draw(st.sampled_from([(size,), (3, size), (size, 2, 3)]))
    bits = draw(st.integers(1, 8))
    x = source(draw, b, shape, bits)
    lo, hi = -bits_max(bits), bits_max(bits)
    if bits == 8 and draw(st.booleans()):
        lo = -128  # the full int8 range (an input's proven range is symmetric; a clip gives this one)
        x = b.op("clip", b.op("requant", x, b.const([1]), shift=0, bits=9), lo=-128, hi=127)
    elif draw(st.integers(0, 3)) == 0:
        lo = draw(st.integers(lo, hi))
        x = b.op("clip", x, lo=lo, hi=hi)
    offset = lo - draw(st.integers(0, 3))
    out_bits = draw(st.sampled_from([1, 4, 8, 8, 8, 9]))
    table = values(draw, (hi - offset + 1 + draw(st.integers(0, 3)),), -bits_max(out_bits), bits_max(out_bits))
    return finish(draw, b, b.op("lut", x, b.const(table), offset=offset))


@SETTINGS
@given(case=int8_lut_case())
def test_int8_lut_matches_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=int8_lut_case(), threads=st.integers(2, 3))
def test_int8_lut_split_between_threads_matches_reference(case, threads):
    check(case, threads=threads, split="always")


@pytest.mark.parametrize("isa", ["portable", pytest.param("vnni", marks=needs_vbmi)])
def test_silu_lut_takes_the_vbmi_path(isa):
    """conv -> requant to int8 -> lut (SiLU-like, 255 entries) of 40000 elements: "lut[vbmi]" on the VNNI
    path (skipped, naming VBMI, where the CPU lacks it), "lut" on the portable one; equal."""
    rng = np.random.default_rng(0)
    b = cvm.GraphBuilder()
    x = b.input("x", (16, 50, 50), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-9, 10, (16, 16, 1, 1))))
    y = b.op("requant", y, b.const(rng.integers(1, 99, 16)), shift=12, bits=8, axis=0)
    y = b.op("lut", y, b.const(rng.integers(-127, 128, 255)), offset=-127)
    model = b.build(y)
    xs = {"x": rng.integers(-127, 128, (2, 16, 50, 50)).astype(np.int8)}
    want = cvm.interp.reference.run(model.graph, model.analysis, xs)
    runner = nb.prepare(model.graph, model.analysis, isa=isa)
    labels = [s.label for s in runner.plan.steps]
    assert ("lut[vbmi]" in labels) == (isa == "vnni"), labels
    assert np.array_equal(runner(xs)[y], want[y])
