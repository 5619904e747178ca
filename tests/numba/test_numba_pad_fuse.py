"""pad_fuse: a VNNI conv writing its uint8 output straight into the padded input of the one VNNI conv
that reads it (conv_vnni_direct_padded + zero_border, no to_padded_u8 copy) runs bit for bit as the
reference: 1x1 or 3x3 producers, readers with any padding, strides and dilations, output pixel counts
that leave partial tiles, serial and split between threads, per step and as one whole-plan program, and
again on other inputs (the border is rewritten every run: the bytes are shared with other values).
Each case runs once per kernel path; on the VNNI one (skipped, naming it, where the CPU lacks it) it
checks that the fusion happened.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 -> 50)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp import reference
from numba_helpers import assert_same, check, each_isa, kernels, needs_vnni, vnni_runner
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


@st.composite
def producer_reader(draw) -> Case:
    """x -> conv (kp x kp) -> requant -> relu (0..255: stored uint8) -> conv (k x k, padded) -> requant."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c, mid, og = draw(st.sampled_from([8, 16, 32])), draw(st.sampled_from([16, 32, 64])), draw(st.sampled_from([16, 24, 64]))
    kp, k = draw(st.sampled_from([1, 1, 3])), draw(st.sampled_from([3, 3, 5, 1]))
    pad = draw(st.integers(1, 2)) if k > 1 else 1
    h, w, n = draw(st.integers(5, 12)), draw(st.integers(5, 12)), draw(st.integers(1, 3))
    b = cvm.GraphBuilder()
    y = b.op("conv2d", b.input("x", (c, h, w), 8), b.const(rng.integers(-127, 128, (mid, c, kp, kp))),
             b.const(rng.integers(-999, 999, mid)), pads=(kp // 2,) * 4)
    y = b.op("relu", b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, mid)), shift=draw(st.integers(30, 34)),
                          bits=9, axis=0))
    y = b.op("conv2d", y, b.const(rng.integers(-127, 128, (og, mid, k, k))), b.const(rng.integers(-999, 999, og)),
             pads=(pad,) * 4, strides=(draw(st.sampled_from([1, 1, 2])),) * 2, dilations=(draw(st.sampled_from([1, 1, 2])),) * 2)
    y = b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, og)), shift=draw(st.integers(32, 38)), bits=8, axis=0)
    try:
        model = b.build(y)
    except cvm.VerifyError:  # an empty output (a dilated kernel larger than the padded input)
        assume(False)
    return Case(model, {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)})


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=producer_reader(), threads=st.integers(1, 3))
def test_a_conv_writing_its_readers_padded_input_matches_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
    if isa == "vnni" and (runner := vnni_runner(case)).plan.out_pads:  # (a 3x3 producer still pads its int8 input)
        assert {"conv_vnni_direct_padded", "zero_border"} <= kernels(runner, case.inputs)


@needs_vnni
def test_the_border_is_rewritten_every_run_also_as_one_program():
    """The padded buffer shares its bytes with other values (buffers.pack): runs on other inputs and batch
    sizes, per step and as a whole-plan program, must each find a zero border."""
    rng = np.random.default_rng(1)
    b = cvm.GraphBuilder()
    y = b.op("conv2d", b.input("x", (16, 9, 9), 8), b.const(rng.integers(-127, 128, (32, 16, 1, 1))))
    y = b.op("relu", b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, 32)), shift=31, bits=9, axis=0))
    y = b.op("conv2d", y, b.const(rng.integers(-127, 128, (32, 32, 3, 3))), pads=(1, 1, 1, 1))
    y = b.op("relu", b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, 32)), shift=36, bits=9, axis=0))
    y = b.op("conv2d", y, b.const(rng.integers(-127, 128, (16, 32, 3, 3))), pads=(1, 1, 1, 1))
    model = b.build(b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, 16)), shift=36, bits=8, axis=0))
    for whole in ("never", "always"):
        runner = nb.prepare(model.graph, model.analysis, isa="vnni", threads=1, wholeplan=whole)
        for batch in (2, 1, 3, 2):
            x = rng.integers(-128, 128, (batch, 16, 9, 9)).astype(np.int8)
            assert_same(runner({"x": x}), reference.run(model.graph, model.analysis, {"x": x}), f"[{whole} {batch}] ")
        assert len(runner.plan.out_pads) == 2
