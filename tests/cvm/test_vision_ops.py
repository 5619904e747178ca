"""The opset-2 vision ops (resize2d, conv_transpose2d): the reference against the naive big-integer
evaluator, their attribute bounds and rule ids, bounds, gas, and the opset they put a graph in."""
import numpy as np
import pytest

import bigint_vision
import cvm
from cvm import gas
from cvm.limits import MAX_GEOMETRY
from cvm.ops import OPSET_V1, OPSETS

RNG = np.random.default_rng(5)


def rand(shape, bits=8):
    m = 2 ** (bits - 1) - 1
    return RNG.integers(-m, m + 1, shape)


def _resize_model(xshape, bits, **attrs):
    b = cvm.GraphBuilder()
    x = b.input("x", xshape, bits)
    return b.build(b.op("resize2d", x, name="y", **attrs))


RESIZES = [  # (size, mode, coord_h, coord_w, frac_bits)
    ((10, 12), 0, (4, 1, 8), (4, 1, 8), 0),  # half_pixel x2, round_prefer_floor
    ((3, 4), 0, (5, 0, 3), (3, 2, 2), 0),  # downsample, ceil-like offsets
    ((10, 12), 1, (2, -1, 4), (2, -1, 4), 12),  # half_pixel x2 bilinear
    ((7, 9), 1, (4, 0, 6), (5, 0, 8), 15),  # align_corners-like
    ((4, 13), 1, (3, 7, 5), (1, -9, 3), 0),  # frac_bits 0 and coordinates far outside
    ((1, 1), 1, (0, 5, 2), (0, -3, 2), 3),
]


@pytest.mark.parametrize("size, mode, ch, cw, k", RESIZES)
@pytest.mark.parametrize("bits", [8, 16, 32])
def test_resize2d_matches_bigint(size, mode, ch, cw, k, bits):
    x = rand((2, 3, 5, 6), bits)
    x[0] = 2 ** (bits - 1) - 1  # all +max: the rounding shift of a convex combination stays in range
    m = _resize_model((3, 5, 6), bits, size=size, mode=mode, coord_h=ch, coord_w=cw, frac_bits=k)
    got = m.run(x.astype(m.inputs[0].dtype), backend="reference")
    want = bigint_vision.resize2d(x, size, mode, ch, cw, k)
    assert np.array_equal(got.astype(object), want)
    assert got.dtype == m.inputs[0].dtype  # the bound is the input's interval: same bits
    taps = 1 if mode == 0 else 4 * gas.GAS_PER_MAC + gas.GAS_PER_REQUANT + gas.GAS_PER_ELEMENT - gas.GAS_PER_ELEMENT
    assert m.gas == gas.GAS_PER_NODE + 3 * size[0] * size[1] * (taps if mode == 0 else taps + gas.GAS_PER_ELEMENT)


CTS = [
    dict(strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), output_padding=(0, 0), groups=1),
    dict(strides=(2, 2), pads=(1, 1, 1, 1), dilations=(1, 1), output_padding=(1, 0), groups=1),
    dict(strides=(2, 3), pads=(0, 2, 1, 0), dilations=(2, 1), output_padding=(1, 2), groups=2),
    dict(strides=(3, 1), pads=(4, 0, 0, 3), dilations=(1, 3), output_padding=(0, 2), groups=4),
]


@pytest.mark.parametrize("attrs", CTS)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose2d_matches_bigint(attrs, bias):
    x = rand((2, 4, 3, 4))
    w = rand((4, 3, 3, 2))
    bv = rand((3 * attrs["groups"],), 20) if bias else None
    b = cvm.GraphBuilder()
    xi = b.input("x", (4, 3, 4), 8)
    y = b.op("conv_transpose2d", xi, b.const(w, dtype="int8"), *([b.const(bv, dtype="int32")] if bias else []),
             **attrs)
    m = b.build(y)
    got = m.run(x.astype(np.int8), backend="reference")
    assert np.array_equal(got.astype(object), bigint_vision.conv_transpose2d(x, w, bv, **attrs))
    assert m.analysis.max_accumulator_bits == m.analysis.tensors[y].bits
    assert m.gas == gas.GAS_PER_NODE + 4 * 3 * 4 * 3 * 3 * 2 + int(np.prod(got.shape[1:]))


def test_conv_transpose2d_bound_is_the_mac_bound_of_each_output_row():
    w = np.zeros((2, 2, 1, 1), np.int64)
    w[:, 0] = 100  # output 0 sums 2 * 100 * x; output 1 is 0
    b = cvm.GraphBuilder()
    xi = b.input("x", (2, 2, 2), 8)
    m = b.build(b.op("conv_transpose2d", xi, b.const(w), b.const([5, -7]), name="y"))
    t = m.analysis.tensors["y"]
    assert (t.lo, t.hi) == (-200 * 127, 200 * 127 + 5)  # channel 1 reaches only -7


def test_graphs_with_vision_ops_are_opset_2_and_others_stay_opset_1():
    assert {"resize2d", "conv_transpose2d"} <= set(OPSETS[2]) and not {"resize2d", "conv_transpose2d"} & set(OPSET_V1)
    m = _resize_model((1, 2, 2), 8, size=(4, 4), coord_h=(1, 0, 2), coord_w=(1, 0, 2))
    assert m.graph.opset == 2
    b = cvm.GraphBuilder()
    assert b.build(b.op("relu", b.input("x", (2,), 8))).graph.opset == 1
    with pytest.raises(cvm.VerifyError, match="unknown op 'resize2d' \\(opset 1\\)"):
        b = cvm.GraphBuilder(opset=1)
        b.build(b.op("resize2d", b.input("x", (1, 2, 2), 8), size=(4, 4), coord_h=(1, 0, 2), coord_w=(1, 0, 2)))


@pytest.mark.parametrize("attrs, rule", [
    (dict(size=(4,), coord_h=(1, 0, 2), coord_w=(1, 0, 2)), "attrs.size"),
    (dict(size=(0, 4), coord_h=(1, 0, 2), coord_w=(1, 0, 2)), "attrs.size"),
    (dict(size=(4, 4), mode=2, coord_h=(1, 0, 2), coord_w=(1, 0, 2)), "attrs.mode"),
    (dict(size=(4, 4), coord_h=(1, 0, 0), coord_w=(1, 0, 2)), "attrs.coord"),
    (dict(size=(4, 4), coord_h=(-1, 0, 2), coord_w=(1, 0, 2)), "attrs.coord"),
    (dict(size=(4, 4), coord_h=(1, 0, 2), coord_w=(1, -(1 << 32) - 1, 2)), "attrs.coord"),
    (dict(size=(4, 4), coord_h=(1, 0), coord_w=(1, 0, 2)), "attrs.coord"),
    (dict(size=(4, 4), coord_h=(1, 0, 2), coord_w=(1, 0, 2), frac_bits=3), "attrs.frac_bits"),
    (dict(size=(4, 4), mode=1, coord_h=(1, 0, 2), coord_w=(1, 0, 2), frac_bits=16), "attrs.frac_bits"),
])
def test_resize2d_attribute_bounds(attrs, rule):
    with pytest.raises(cvm.VerifyError) as e:
        _resize_model((1, 2, 2), 8, **attrs)
    assert e.value.rule == rule


@pytest.mark.parametrize("attrs, rule", [
    (dict(strides=(0, 1)), "attrs.strides"),
    (dict(strides=(MAX_GEOMETRY + 1, 1)), "attrs.strides"),
    (dict(dilations=(1,)), "attrs.dilations"),
    (dict(pads=(0, 0, -1, 0)), "attrs.pads"),
    (dict(output_padding=(2, 0), strides=(2, 1)), "attrs.output_padding"),
    (dict(groups=3), "attrs.groups"),
    (dict(pads=(3, 0, 3, 0)), "shape.empty"),
])
def test_conv_transpose2d_attribute_bounds(attrs, rule):
    b = cvm.GraphBuilder()
    xi = b.input("x", (2, 2, 2), 8)
    with pytest.raises(cvm.VerifyError) as e:
        b.build(b.op("conv_transpose2d", xi, b.const(np.ones((2, 1, 2, 2), np.int64)), **attrs))
    assert e.value.rule == rule


def test_conv_transpose2d_far_geometry_is_cheap_and_exact():
    """Strides, dilations and pads near MAX_GEOMETRY: no zero-stuffed or uncropped buffer is needed."""
    g = MAX_GEOMETRY
    b = cvm.GraphBuilder()
    xi = b.input("x", (1, 3, 2), 8)
    attrs = dict(strides=(1, g), dilations=(g, 1), pads=(g, g - 1, g - 1, 1), output_padding=(0, 5))
    w = rand((1, 1, 3, 3))
    y = b.op("conv_transpose2d", xi, b.const(w), **attrs)
    m = b.build(y)
    x = rand((2, 1, 3, 2))
    got = m.run(x.astype(np.int8), backend="reference")
    assert got.shape[1:] == m.analysis.tensors[y].shape == (1, 4, 8)
    assert np.array_equal(m.run(x.astype(np.int8), backend="numba"), got)
