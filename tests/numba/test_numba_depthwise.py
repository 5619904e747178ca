"""Depthwise convs equal the reference bit for bit on every kernel path: the AVX-512 VNNI tap-quad
kernel (dw_vnni.conv_dw_vnni, "dwvnni") where this machine has VNNI, and its plain twins (the
"depthwise" kernels, every ISA), serial and split between threads; int8 inputs and unsigned ones
(proven in 0..255, stored int16: ReLU6 outputs), any channel count (padded to 16 inside), kernels
of 1 to 7 taps a side, strides, dilations and pads, outputs narrower than a tile of 4 pixels; channels
a multiple of 16 with an output step of requant and clamps only (stored from the accumulators). The
tests of the VNNI kernel run once per kernel path; the VNNI one is skipped, naming it, where the CPU lacks it.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI runs)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from numba_helpers import EXAMPLES, SETTINGS, check, each_isa
from strategies import finish, output_chain, values


@st.composite
def depthwise_case(draw):
    b = cvm.GraphBuilder()
    c = draw(st.one_of(st.integers(1, 20), st.integers(30, 70), st.sampled_from([16, 32, 48, 64])))  # x16: the
    # output step on the accumulators (dw_vnni's direct stores)
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    hlo, wlo = max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), max(1, dw * (kw - 1) + 1 - pads[1] - pads[3])
    h, w = draw(st.integers(hlo, hlo + 10)), draw(st.integers(wlo, wlo + 10))
    if draw(st.booleans()):  # unsigned: a relu6-like clip of a wider activation, proven in 0..255
        x = b.op("clip", b.input("x", (c, h, w), 12), lo=0, hi=draw(st.sampled_from([6, 127, 255])))
    else:
        x = b.input("x", (c, h, w), draw(st.sampled_from([8, 8, 4])))
    wbits = draw(st.sampled_from([8, 8, 8, 4, 9]))  # 9 bits: not int8, the plain kernel
    wt = values(draw, (c, 1, kh, kw), -(1 << (wbits - 1)) + 1, (1 << (wbits - 1)) - 1)
    args = [x, b.const(wt)]
    if draw(st.booleans()):
        args.append(b.const(values(draw, (c,), -(1 << 20), 1 << 20)))
    y = b.op("conv2d", *args, strides=(sh, sw), dilations=(dh, dw), pads=pads, groups=c)
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    assume(oh >= 1 and ow >= 1)
    return finish(draw, b, output_chain(draw, b, y, (c, oh, ow), 0, 24))


@SETTINGS
@given(case=depthwise_case())
def test_depthwise_matches_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=depthwise_case(), threads=st.integers(2, 3))
def test_depthwise_split_between_threads_matches_reference(case, threads):
    check(case, threads=threads, split="always")


@pytest.mark.parametrize("isa", each_isa())
def test_mobilenet_block_takes_the_vnni_depthwise_path(isa):
    """A ReLU6 output (int16, proven 0..255) into a 3x3 depthwise conv of 40 channels (not a multiple
    of 16), then a stride-2 one on its int8 output: both take "dwvnni" where VNNI runs, "depthwise"
    on the portable ISA; outputs equal the reference."""
    rng = np.random.default_rng(0)
    b = cvm.GraphBuilder()
    x = b.input("x", (40, 20, 16), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-9, 10, (40, 40, 1, 1))))
    y = b.op("clip", b.op("requant", y, b.const([1]), shift=6, bits=16), lo=0, hi=255)
    y = b.op("conv2d", y, b.const(rng.integers(-127, 128, (40, 1, 3, 3))), pads=(1, 1, 1, 1), groups=40)
    y = b.op("requant", y, b.const(rng.integers(1, 99, 40)), shift=12, bits=8, axis=0)
    z = b.op("conv2d", y, b.const(rng.integers(-127, 128, (40, 1, 3, 3))), pads=(1, 1, 1, 1), strides=(2, 2), groups=40)
    model = b.build(z)
    xs = {"x": rng.integers(-127, 128, (3, 40, 20, 16)).astype(np.int8)}
    want = cvm.interp.reference.run(model.graph, model.analysis, xs)
    runner = nb.prepare(model.graph, model.analysis, isa=isa)
    paths = [s.label.split("]")[0] + "]" for s in runner.plan.steps if s.label.startswith("conv2d[d")]
    expect = ["conv2d[dwvnni]" if isa == "vnni" else "conv2d[depthwise]"] * 2
    assert paths == expect, paths
    assert np.array_equal(runner(xs)[z], want[z])


@st.composite
def row_pair_case(draw):
    """Kernels 3, 5 or 7 taps high at stride and dilation 1, channels a multiple of 16: dw_vnni's row
    pairs (one set of quads of input rows i..i+4nq-1 for output rows i and i + 1), odd and even
    output heights, batches."""
    b = cvm.GraphBuilder()
    c = draw(st.sampled_from([16, 32, 48]))
    kh, kw = draw(st.sampled_from([3, 3, 5, 7])), draw(st.integers(1, 5))
    pads = (draw(st.integers(0, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, kh - pads[0] - pads[2]), 12))
    w = draw(st.integers(max(1, kw - pads[1] - pads[3]), 12))
    if draw(st.booleans()):
        x = b.op("clip", b.input("x", (c, h, w), 12), lo=0, hi=draw(st.sampled_from([6, 127, 255])))
    else:
        x = b.input("x", (c, h, w), 8)
    wt = values(draw, (c, 1, kh, kw), -127, 127)
    y = b.op("conv2d", x, b.const(wt), b.const(values(draw, (c,), -(1 << 16), 1 << 16)), pads=pads, groups=c)
    oh, ow = h + pads[0] + pads[2] - kh + 1, w + pads[1] + pads[3] - kw + 1
    return finish(draw, b, output_chain(draw, b, y, (c, oh, ow), 0, 24))


@pytest.mark.parametrize("isa", each_isa())
@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=row_pair_case(), threads=st.integers(1, 3))
def test_depthwise_row_pairs_match_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
