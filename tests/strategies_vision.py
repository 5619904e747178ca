"""Hypothesis families for the opset-2 vision ops (resize2d, conv_transpose2d), built on the helpers of
tests/strategies.py: random valid graphs, values at the extremes of their bits often, inputs sometimes
channels-last (through a 1x1 identity conv), geometry sometimes near the verifier's bounds.

    @given(case=vision_case("resize2d"))
"""
from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

import cvm
from cvm.ops.vision import MAX_COORD, MAX_FRAC_BITS
from strategies import FAR, act_bits, finish, mac_weights, output_chain, source, values


def _coord(draw, size: int, n_out: int):
    """(a, b, d): ONNX-like maps (scale-based, half-pixel, align-corners) or wild ones (any offsets,
    coordinates far outside the axis, terms at the attribute bounds)."""
    kind = draw(st.sampled_from(["scale", "half", "corners", "wild", "far"]))
    if kind == "scale":
        return (size, 0, n_out)
    if kind == "half":
        return (2 * size, size - n_out, 2 * n_out)
    if kind == "corners":
        return (size - 1, 0, max(1, n_out - 1))
    if kind == "wild":
        return (draw(st.integers(0, 9)), draw(st.integers(-20, 20)), draw(st.integers(1, 9)))
    return (draw(st.sampled_from([0, 1, MAX_COORD])), draw(st.sampled_from([-MAX_COORD, -1, 0, MAX_COORD])),
            draw(st.sampled_from([1, 3, MAX_COORD])))


@st.composite
def resize_case(draw):
    b = cvm.GraphBuilder()
    c, h, w = draw(st.integers(1, 5)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    x = source(draw, b, (c, h, w), draw(st.sampled_from([8, 8, 8, 1, 2, 12, 16, 24, 32])))
    oh, ow = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    mode = draw(st.integers(0, 1))
    k = draw(st.one_of(st.integers(0, MAX_FRAC_BITS), st.sampled_from([0, MAX_FRAC_BITS]))) if mode else 0
    y = b.op("resize2d", x, size=(oh, ow), mode=mode, coord_h=_coord(draw, h, oh), coord_w=_coord(draw, w, ow),
             frac_bits=k)
    outputs = [y]
    if draw(st.booleans()):  # a reader that takes a layout (the planner converts or keeps it)
        outputs = [b.op("relu", y)]
    return finish(draw, b, outputs)


@st.composite
def conv_transpose_case(draw):
    b = cvm.GraphBuilder()
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg, og = draw(st.integers(1, 4)), draw(st.one_of(st.integers(1, 5), st.integers(14, 24)))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    outpad = (draw(st.integers(0, max(sh, dh) - 1)), draw(st.integers(0, max(sw, dw) - 1)))
    if draw(st.integers(0, 7)) == 0:  # a stride and pad near MAX_GEOMETRY: two rows 2^20 apart, one cropped
        h, sh = 2, draw(st.sampled_from(FAR))
        pads[0], pads[2] = sh, 0
    oh = sh * (h - 1) + outpad[0] + dh * (kh - 1) + 1 - pads[0] - pads[2]
    ow = sw * (w - 1) + outpad[1] + dw * (kw - 1) + 1 - pads[1] - pads[3]
    assume(oh >= 1 and ow >= 1 and oh * ow <= 1 << 12)
    xbits = act_bits(draw)
    x = source(draw, b, (groups * cg, h, w), xbits)
    wt, _ = mac_weights(draw, (groups * cg, og, kh, kw), cg * kh * kw, xbits, False)
    bias = values(draw, (groups * og,), -127, 127) if draw(st.booleans()) else None
    args = [x, b.const(wt)] + ([b.const(bias)] if bias is not None else [])
    y = b.op("conv_transpose2d", *args, strides=(sh, sw), dilations=(dh, dw), pads=tuple(pads),
             output_padding=outpad, groups=groups)
    return finish(draw, b, output_chain(draw, b, y, (groups * og, oh, ow), 0, xbits + 12))


VISION_FAMILIES = {"resize2d": resize_case, "conv_transpose2d": conv_transpose_case}


def vision_case(family: str):
    return VISION_FAMILIES[family]()
