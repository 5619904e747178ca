"""The VNNI GEMM with the output step on its accumulators (vnni_direct.conv_vnni_direct: no int32
scratch, no out_rows pass) equals the reference bit for bit: output channels a multiple of 16 (whole
64-channel tiles, a 32-channel tile, a panel past og) or not (a panel across og, stored with a mask),
requant and clamps or no output step at all
(int32 outputs), int8 and unsigned inputs (read in place or through the padded copy), 1x1 and 3x3
kernels with strides and groups, pixel counts that leave partial tiles and blocks, serial and split
between threads. Each case runs once per kernel path; on the VNNI one (skipped, naming it, where the CPU
lacks it) it checks that the direct kernel ran. Normalized multipliers
(2^29..2^31 with shifts of 32 or more, as MRT emits them) take the int32 vpmuldq form of the step.
With a residual add (conv_vnni_direct_res): the ResNet block's tail, conv -> requant -> add (a residual
input, requantized per tensor or not) -> requant -> relu/clip, its stage in narrowed int32 lanes.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 -> 50)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cvm
from numba_helpers import check, each_isa, kernels, needs_vnni, vnni_runner
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


@st.composite
def direct_conv(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.sampled_from([4, 16, 24, 32, 40]))
    groups = draw(st.sampled_from([1, 1, 1, 2, 4])) if c % 4 == 0 else 1
    og = draw(st.sampled_from([16, 32, 48, 64, 96, 144, 160, 8, 24, 40, 72, 100]))
    k = draw(st.sampled_from([1, 1, 3]))
    s = draw(st.sampled_from([1, 1, 2]))
    h, w = draw(st.integers(7, 14)), draw(st.integers(7, 14))  # > 8 output pixels (vnni_direct.eligible)
    n = draw(st.integers(1, 3))
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), 8)
    if draw(st.booleans()):  # unsigned: a relu6-like clip, proven in 0..255 (z = 0)
        x = b.op("clip", x, lo=0, hi=draw(st.sampled_from([6, 100, 127])))
    wt = rng.integers(-127, 128, (og * groups, c // groups, k, k))
    y = b.op("conv2d", x, b.const(wt), b.const(rng.integers(-9999, 9999, og * groups)), pads=(k // 2,) * 4,
             strides=(s, s), groups=groups)
    step = draw(st.sampled_from(["requant", "requant+clip", "none", "normalized"]))
    if step == "normalized":  # the vpmuldq form: int32 multipliers, shift >= 32
        y = b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, og * groups)), shift=draw(st.integers(32, 40)),
                 bits=draw(st.sampled_from([8, 13])), axis=0)
    elif step != "none":
        y = b.op("requant", y, b.const(rng.integers(1 << 10, 1 << 15, og * groups)), shift=draw(st.integers(14, 26)),
                 bits=8, axis=0)
    if step == "requant+clip":
        y = b.op("clip", y, lo=draw(st.sampled_from([-5, 0])), hi=draw(st.sampled_from([6, 127])))
    model = b.build(y)
    return Case(model, {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)})


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=direct_conv(), threads=st.integers(1, 3))
def test_direct_output_step_matches_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
    runner = vnni_runner(case) if isa == "vnni" else None
    if runner and any("conv2d[vnni]" in str(s) for s in runner.plan.steps):
        assert "conv_vnni_direct" in kernels(runner, case.inputs)


@st.composite
def residual_conv(draw) -> Case:
    """conv -> requant (per channel, normalized) -> add(residual) -> requant -> relu/clip, the residual
    an int8 or unsigned (relu'd) input, requantized per tensor first or added as it is."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c, og = draw(st.sampled_from([16, 32, 64])), draw(st.sampled_from([16, 32, 64, 96, 24, 40, 100]))
    k, s = draw(st.sampled_from([(1, 1), (1, 1), (3, 1), (1, 2)]))
    h, w, n = draw(st.integers(6, 12)), draw(st.integers(6, 12)), draw(st.integers(1, 3))
    oh, ow = (h - 1) // s + 1, (w - 1) // s + 1
    assume(oh * ow > 8)
    b = cvm.GraphBuilder()
    rbits = draw(st.sampled_from([8, 13]))
    x, r = b.input("x", (c, h, w), 8), b.input("r", (og, oh, ow), rbits)
    y = b.op("conv2d", x, b.const(rng.integers(-127, 128, (og, c, k, k))), b.const(rng.integers(-9999, 9999, og)),
             pads=(k // 2,) * 4, strides=(s, s))
    y = b.op("requant", y, b.const(rng.integers(1 << 29, 1 << 31, og)), shift=draw(st.integers(33, 38)), bits=13, axis=0)
    if draw(st.booleans()):
        r = b.op("relu", r)
    if draw(st.booleans()):
        r = b.op("requant", r, b.const([int(rng.integers(1 << 29, 1 << 31))]), shift=draw(st.integers(24, 29)), bits=13)
    y = b.op("add", y, r)
    y = b.op("requant", y, b.const([int(rng.integers(1 << 29, 1 << 31))]), shift=draw(st.integers(32, 36)),
             bits=draw(st.sampled_from([8, 9])))
    y = b.op("relu", y) if draw(st.booleans()) else b.op("clip", y, lo=-20, hi=draw(st.sampled_from([6, 127])))
    rmax = (1 << (rbits - 1)) - 1
    xs = {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8),
          "r": rng.integers(-rmax, rmax + 1, (n, og, oh, ow)).astype(np.int8 if rbits == 8 else np.int16)}
    return Case(b.build(y), xs)


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=residual_conv(), threads=st.integers(1, 3))
def test_direct_residual_stage_matches_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])


def resnet_tail(seed: int = 0) -> Case:
    """A ResNet-50 block's last conv with its identity shortcut: 64 -> 256 channels, 1x1, the residual a
    relu output (uint8 storage) requantized per tensor, the multipliers and shifts of torchvision's
    ResNet-50 as MRT converts it (layer1.1)."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x, r = b.op("relu", b.input("x", (64, 10, 10), 8)), b.op("relu", b.input("r", (256, 10, 10), 9))
    y = b.op("conv2d", x, b.const(rng.integers(-127, 128, (256, 64, 1, 1))), b.const(rng.integers(-9999, 9999, 256)))
    y = b.op("requant", y, b.const(rng.integers(1088856896, 2073761344, 256)), shift=36, bits=13, axis=0)
    y = b.op("add", y, b.op("requant", r, b.const([1889620750]), shift=28, bits=13))
    y = b.op("relu", b.op("requant", y, b.const([1983652915]), shift=34, bits=9))
    return Case(b.build(y), {"x": rng.integers(-128, 128, (2, 64, 10, 10)).astype(np.int8),
                             "r": rng.integers(-255, 256, (2, 256, 10, 10)).astype(np.int16)})


@needs_vnni
def test_resnet_block_tail_runs_the_direct_residual_kernel():
    case = resnet_tail()
    check(case)
    assert "conv_vnni_direct_res" in kernels(vnni_runner(case), case.inputs)
