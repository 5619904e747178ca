"""The fused output steps of the numba backend equal the reference bit for bit: requant / clamp /
lut chains absorbed after element-wise heads (and after MACs, where only the lut keeps its own
pass), in the first stage and after a residual add, and the channels-last mul (squeeze-excite's
x[C, H, W] * s[C, 1, 1] and same-shape gate products) with the output step after it.

Every kernel path this machine runs, serial and split between threads; derandomized hypothesis,
CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 per property, as CI runs)."""
from __future__ import annotations


import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cvm
from cvm.arith import bits_max
from cvm.interp import numba as nb
from numba_helpers import EXAMPLES, SETTINGS, check
from strategies import act_bits, finish, mac_weights, requant, source, values

def _bits(b, y: str) -> int:
    """The proven width of tensor y (a graph the verifier refuses is not a case)."""
    try:
        return b.build(y).analysis.tensors[y].bits
    except cvm.VerifyError:
        assume(False)


def lut_after(draw, b, y: str, bits: int) -> str:
    """A lut over every value a `bits`-bit tensor can hold (the table a little larger, sometimes)."""
    m = bits_max(bits)
    offset = -m - draw(st.integers(0, 2))
    size = m - offset + 1 + draw(st.integers(0, 2))
    tbits = draw(st.sampled_from([1, 8, 8, 9, 16, 32]))
    return b.op("lut", y, b.const(values(draw, (size,), -bits_max(tbits), bits_max(tbits))), offset=offset)


def stage(draw, b, y: str, channels: int, axis: int, in_bits: int, outputs: list) -> tuple[str, int]:
    """[requant] [relu|clip] [lut]: what one stage of an output step absorbs; returns (tensor, bits)."""
    bits = in_bits
    if draw(st.integers(0, 4)) > 0:
        y = requant(draw, b, y, channels, axis, in_bits)
        bits = _bits(b, y)  # the proven width decides the table's size
    if draw(st.integers(0, 3)) == 0:
        y = b.op("relu", y) if draw(st.booleans()) else b.op("clip", y, lo=-draw(st.integers(0, 9)), hi=draw(st.integers(0, 90)))
    if bits <= 12 and draw(st.integers(0, 4)) > 0:
        if draw(st.integers(0, 6)) == 0:
            outputs.append(y)  # read twice: no fusion past it
        y = lut_after(draw, b, y, bits)
    return y, _bits(b, y)


def tail(draw, b, y: str, out_shape, channel_axis: int, acc_bits: int) -> list:
    """stage, sometimes a residual add of another activation and a second stage."""
    outputs = []
    channels = out_shape[channel_axis]
    y, bits = stage(draw, b, y, channels, channel_axis, acc_bits, outputs)
    if bits <= 24 and draw(st.booleans()):
        kind = draw(st.sampled_from(["act", "act", "channel", "scalar", "varying"]))
        if kind == "act":
            r = source(draw, b, out_shape, draw(st.sampled_from([8, 8, 12, 16])), name="r")
        else:  # a constant: one value per channel (a batch norm's shift), one value, or varying (not fused)
            cshape = {"channel": tuple(d if i == channel_axis else 1 for i, d in enumerate(out_shape)),
                      "scalar": (1,), "varying": tuple(out_shape)}[kind]
            r = b.const(values(draw, cshape, -(1 << 14), 1 << 14))
        y = b.op("add", *((y, r) if draw(st.booleans()) else (r, y)))
        y, _ = stage(draw, b, y, channels, channel_axis, max(bits, 16) + 1, outputs)
    return outputs + [y]


@st.composite
def mac_lut_case(draw):
    b = cvm.GraphBuilder()
    xbits = act_bits(draw)
    if draw(st.booleans()):
        groups = draw(st.sampled_from([1, 1, 2, "dw"]))
        cg, og = (1, 1) if groups == "dw" else (draw(st.integers(1, 5)), draw(st.one_of(st.integers(1, 6), st.integers(14, 40))))
        groups = draw(st.integers(2, 20)) if groups == "dw" else groups
        k, s, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(3, 9)), draw(st.integers(3, 9))
        x = source(draw, b, (groups * cg, h, w), xbits)
        wt, bias = mac_weights(draw, (groups * og, cg, k, k), cg * k * k, xbits, draw(st.booleans()))
        y = b.op("conv2d", x, b.const(wt), *([b.const(bias)] if bias is not None else []), strides=(s, s),
                 pads=(k // 2,) * 4, groups=groups)
        out_shape, axis = b.build(y).analysis.tensors[y].shape, 0  # (a conv of this geometry verifies)
    else:
        k, o = draw(st.integers(1, 70)), draw(st.integers(1, 40))
        x = source(draw, b, (k,), xbits)
        wt, bias = mac_weights(draw, (o, k), k, xbits, draw(st.booleans()))
        y = b.op("dense", x, b.const(wt), *([b.const(bias)] if bias is not None else []))
        out_shape, axis = (o,), 0
    acc = _bits(b, y)
    return finish(draw, b, tail(draw, b, y, tuple(out_shape), axis, acc))


def _nhwc_activation(draw, b, shape_, bits: int, name: str) -> str:
    """An activation stored channels-last: a 1x1 conv's output, requantized to `bits`."""
    c = shape_[0]
    x = b.input(name, shape_, 8)
    w = values(draw, (c, c, 1, 1), -3, 3)
    y = b.op("conv2d", x, b.const(w))
    return requant(draw, b, y, c, 0, 13) if bits >= 8 else b.op("requant", y, b.const([1]), shift=13, bits=bits, axis=0)


@st.composite
def mul_case(draw):
    """x[C, H, W] (channels-last) times s: [C, 1, 1] (a global sum, an input, a 1x1 conv of a
    pooled vector) or [C, H, W]; then an output step."""
    b = cvm.GraphBuilder()
    c, h, w = draw(st.integers(1, 40)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    x = _nhwc_activation(draw, b, (c, h, w), draw(st.sampled_from([8, 8, 4, 16])), "x")
    kind = draw(st.sampled_from(["pool", "input", "same", "pool_conv", "const", "const"]))
    if kind == "const":  # a batch norm's scale: per channel, one value, or varying over pixels (not fused)
        cshape = draw(st.sampled_from([(c, 1, 1), (1,), (c, h, w), (1, 1, w)]))
        s = b.const(values(draw, cshape, -(1 << 12), 1 << 12))
    elif kind == "same":
        s = _nhwc_activation(draw, b, (c, h, w), draw(st.sampled_from([8, 9, 4])), "s")
    elif kind == "input":
        s = b.input("s", (c, 1, 1), draw(st.sampled_from([8, 9, 2])))
    else:
        s = b.op("sum", _nhwc_activation(draw, b, (c, h, w), 8, "s"), axes=(1, 2), keepdims=1)
        s = b.op("requant", s, b.const([1]), shift=draw(st.integers(4, 9)), bits=draw(st.sampled_from([8, 9])))
        if kind == "pool_conv":
            s = b.op("conv2d", s, b.const(values(draw, (c, c, 1, 1), -9, 9)))
            s = b.op("requant", s, b.const([1]), shift=8, bits=9)
    y = b.op("mul", *((x, s) if draw(st.booleans()) else (s, x)))
    return finish(draw, b, tail(draw, b, y, (c, h, w), 0, _bits(b, y)))


@st.composite
def concat_case(draw):
    """concat of channels-last activations (some requantized first, per tensor or per channel, some
    read elsewhere too, some not channels-last), then sometimes a batch-norm-like chain."""
    b = cvm.GraphBuilder()
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    parts, outputs = [], []
    for i in range(draw(st.integers(1, 5))):
        c = draw(st.integers(1, 20))
        kind = draw(st.sampled_from(["requant", "requant", "plain", "input", "shared"]))
        if kind == "input":
            parts.append(b.input(f"x{i}", (c, h, w), 8))
            continue
        y = b.op("conv2d", b.input(f"x{i}", (c, h, w), 8), b.const(values(draw, (c, c, 1, 1), -3, 3)))
        if kind == "plain":
            parts.append(y)
            continue
        if kind == "shared":
            outputs.append(y)  # the conv output has another reader; its requant still fuses
        parts.append(requant(draw, b, y, c, 0, 13))
        if draw(st.integers(0, 6)) == 0:
            outputs.append(parts[-1])  # the requant's output read elsewhere: not fused
    y = b.op("concat", *parts, axis=draw(st.sampled_from([0, 0, 0, 1])))
    if _bits(b, y) <= 16 and draw(st.booleans()):
        c = b.build(y).analysis.tensors[y].shape[0]
        y = b.op("mul", y, b.const(values(draw, (c, 1, 1), -(1 << 10), 1 << 10)))
        return finish(draw, b, outputs + tail(draw, b, y, b.build(y).analysis.tensors[y].shape, 0, _bits(b, y)))
    return finish(draw, b, outputs + [y])


@st.composite
def elementwise_chain_case(draw):
    """requant / clip / lut chains on an activation of any rank (layout "c", or channels-last after
    a conv), with a residual add (of an activation or a constant) and a second stage; products of
    two same-shape activations of any rank (gates of a recurrent cell) in front, sometimes."""
    b = cvm.GraphBuilder()
    out_shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    bits = draw(st.sampled_from([8, 8, 12, 16, 24]))
    y = source(draw, b, out_shape, bits)
    if draw(st.booleans()):
        y = b.op("mul", y, source(draw, b, out_shape, draw(st.sampled_from([1, 4, 8])), name="g"))
        bits = _bits(b, y)
    return finish(draw, b, tail(draw, b, y, out_shape, len(out_shape) - 1, bits))


@SETTINGS
@given(case=elementwise_chain_case())
def test_elementwise_chains_match_reference(case):
    check(case)


@SETTINGS
@given(case=concat_case())
def test_channels_last_concat_matches_reference(case):
    check(case)


@SETTINGS
@given(case=mac_lut_case())
def test_mac_with_fused_lut_matches_reference(case):
    check(case)


@SETTINGS
@given(case=mul_case())
def test_channels_last_mul_matches_reference(case):
    check(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=st.one_of(mac_lut_case(), mul_case(), concat_case(), elementwise_chain_case()), threads=st.integers(2, 3))
def test_fused_steps_split_between_threads_match_reference(case, threads):
    check(case, threads=threads, split="always")


def test_squeeze_excite_block_takes_the_fused_paths():
    """conv -> requant -> lut (SiLU), global sum -> requant -> 1x1 convs -> lut (sigmoid), mul ->
    requant: the scale and its requant are one channels-last step (the plan says so), outputs equal.
    (A lut after a conv keeps its own pass: fused into the GEMM's output step it was slower.)"""
    rng = np.random.default_rng(0)
    b = cvm.GraphBuilder()
    x = b.input("x", (16, 6, 6), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-9, 10, (16, 16, 3, 3))), pads=(1, 1, 1, 1))
    y = b.op("lut", b.op("requant", y, b.const([1]), shift=9, bits=8), b.const(rng.integers(-127, 128, 255)), offset=-127)
    s = b.op("requant", b.op("sum", y, axes=(1, 2), keepdims=1), b.const([1]), shift=5, bits=8)
    s = b.op("requant", b.op("conv2d", s, b.const(rng.integers(-9, 10, (16, 16, 1, 1)))), b.const([1]), shift=8, bits=8)
    s = b.op("lut", s, b.const(rng.integers(0, 256, 255)), offset=-127)
    z = b.op("requant", b.op("mul", y, s), b.const(rng.integers(1, 99, 16)), shift=12, bits=8, axis=0)
    model = b.build(z)
    xs = {"x": rng.integers(-127, 128, (3, 16, 6, 6)).astype(np.int8)}
    want = cvm.interp.reference.run(model.graph, model.analysis, xs)
    for isa in nb.available_isas():
        runner = nb.prepare(model.graph, model.analysis, isa=isa)
        labels = [s.label for s in runner.plan.steps]
        assert "mul[channel]+requant" in labels, labels
        got = runner(xs)
        assert np.array_equal(got[z], want[z]) and got[z].dtype == want[z].dtype
