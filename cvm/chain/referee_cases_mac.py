"""Random instances of the referee's windowed, multiply-accumulate and reducing ops (conv2d,
conv_transpose2d, max_pool2d, dense, matmul, sum, max) and of resize2d, for the differential test
(cvm/chain/referee_cases.py has the others and says how a draw works).

Kernels and reduced extents stay small (a read costs the referee ~2,400 gas, and the embedded chain
runs ~4M gas a second), while strides, dilations and pads reach MAX_GEOMETRY; weights are as large
as the accumulator allows, so sums land next to the ends of int32.
"""

from __future__ import annotations

from cvm.arith import INT32_MAX, bits_max
from cvm.builder import GraphBuilder
from cvm.chain.referee_draw import FAR, Draw
from cvm.limits import MAX_GEOMETRY
from cvm.ops.vision import MAX_COORD, MAX_FRAC_BITS

NO_VALUES: dict = {}
FAR_CHANCE = 0.15
KERNEL = (1, 2, 2, 3)  # a kernel extent: small, as each tap is a read or two


def mac_weights(d: Draw, shape: tuple, k: int, xbits: int, outs: int, bias: bool):
    """Weights (and `outs` biases) as large as bias + k * max|w| * max|x| <= INT32_MAX allows, often."""
    xmax = max(1, bits_max(xbits))
    bias_max = d.pick((0, 127, 1 << 15, 1 << 24, INT32_MAX // 2)) if bias else 0
    wlim = min(bits_max(d.bits((2, 4, 8, 8, 16, 32))), max(1, (INT32_MAX - bias_max) // (k * xmax)))
    w = d.values(shape, -wlim, wlim)
    return w, (d.values((outs,), -bias_max, bias_max) if bias else None)


def window_axis(d: Draw, size: int, k: int, pool: bool = False):
    """(stride, dilation, pad before, pad after) of one axis of a conv2d or max_pool2d window."""
    if d.chance(FAR_CHANCE):
        far = d.far_axis(size, k, pad_cap=(k - 1) * 2 if pool else MAX_GEOMETRY)
        if far is not None:
            return far
    s, dil = d.int(1, 3), d.int(1, 2)
    cap = (k - 1) * dil if pool else 2
    before, after = d.int(0, cap), d.int(0, cap)
    return s, dil, before, max(after, dil * (k - 1) + 1 - size - before)


def draw_conv2d(d: Draw, b: GraphBuilder):
    g, cg, og = d.pick((1, 1, 1, 2, 3)), d.pick((1, 1, 1, 2, 3)), d.int(1, 3)
    kh, kw, h, w = d.pick(KERNEL), d.pick(KERNEL), d.int(1, 6), d.int(1, 6)
    (sh, dh, pt, pb), (sw, dw, pl, pr) = window_axis(d, h, kh), window_axis(d, w, kw)
    xbits = d.bits()
    wt, bias = mac_weights(d, (g * og, cg, kh, kw), cg * kh * kw, xbits, g * og, d.chance(0.5))
    args = [b.input("x", (g * cg, h, w), xbits), b.const(wt)] + ([b.const(bias)] if bias is not None else [])
    y = b.op("conv2d", *args, strides=(sh, sw), dilations=(dh, dw), pads=(pt, pl, pb, pr), groups=g)
    return y, NO_VALUES


def transposed_axis(d: Draw, size: int, k: int):
    """(stride, dilation, pad before, pad after, output padding) of one conv_transpose2d axis: small,
    or a stride or dilation from FAR with pads that crop the output to 1..4 positions."""
    if d.chance(FAR_CHANCE):
        s = d.pick(FAR) if d.chance(0.6) else d.int(1, 3)
        dil = d.pick(FAR) if k > 1 and d.chance(0.5) else d.int(1, 2)
        op = d.edge(0, max(s, dil) - 1) if d.chance(0.4) else 0
        total = max(0, s * (size - 1) + op + dil * (k - 1) + 1 - d.int(1, 4))  # pads leaving 1..4 outputs
        before = max(min(d.edge(0, total), MAX_GEOMETRY), total - MAX_GEOMETRY)
        if before <= MAX_GEOMETRY:
            return s, dil, before, total - before, op
    s, dil = d.int(1, 3), d.int(1, 2)
    op = d.int(0, max(s, dil) - 1) if d.chance(0.4) else 0
    full = s * (size - 1) + op + dil * (k - 1) + 1
    before = min(d.int(0, 2), full - 1)
    return s, dil, before, min(d.int(0, 2), full - 1 - before), op


def draw_conv_transpose2d(d: Draw, b: GraphBuilder):
    g, cg, og = d.pick((1, 1, 2, 3)), d.pick((1, 1, 2)), d.int(1, 3)
    kh, kw, h, w = d.pick(KERNEL), d.pick(KERNEL), d.int(1, 4), d.int(1, 4)
    (sh, dh, pt, pb, oph), (sw, dw, pl, pr, opw) = transposed_axis(d, h, kh), transposed_axis(d, w, kw)
    xbits = d.bits()
    wt, bias = mac_weights(d, (g * cg, og, kh, kw), cg * kh * kw, xbits, g * og, d.chance(0.5))
    args = [b.input("x", (g * cg, h, w), xbits), b.const(wt)] + ([b.const(bias)] if bias is not None else [])
    y = b.op("conv_transpose2d", *args, strides=(sh, sw), dilations=(dh, dw), pads=(pt, pl, pb, pr),
             output_padding=(oph, opw), groups=g)
    return y, NO_VALUES


def draw_max_pool2d(d: Draw, b: GraphBuilder):
    kh, kw, h, w = d.int(1, 3), d.int(1, 3), d.int(1, 6), d.int(1, 6)
    (sh, dh, pt, pb), (sw, dw, pl, pr) = window_axis(d, h, kh, pool=True), window_axis(d, w, kw, pool=True)
    x = b.input("x", (d.int(1, 3), h, w), d.bits())
    y = b.op("max_pool2d", x, kernel=(kh, kw), strides=(sh, sw), dilations=(dh, dw), pads=(pt, pl, pb, pr))
    return y, NO_VALUES


def draw_dense(d: Draw, b: GraphBuilder):
    lead = d.pick(((), (), (2,), (3, 1), (2, 2)))
    k, o = d.pick((1, 1, 2, 3, 4, 6)), d.int(1, 4)
    xbits = d.bits()
    wt, bias = mac_weights(d, (o, k), k, xbits, o, d.chance(0.5))
    args = [b.input("x", lead + (k,), xbits), b.const(wt)] + ([b.const(bias)] if bias is not None else [])
    return b.op("dense", *args), NO_VALUES


def draw_matmul(d: Draw, b: GraphBuilder):
    lead = d.pick(((), (2,), (1, 2)))
    m, k, n = d.int(1, 3), d.pick((1, 1, 2, 3, 4)), d.int(1, 3)
    abits = d.bits((1, 4, 8, 8, 12, 16, 24, 31))
    bbits = max(1, min(d.bits((1, 4, 8, 8, 12, 16)), 33 - abits - (k - 1).bit_length()))
    x, y = b.input("x", lead + (m, k), abits), b.input("y", lead + (k, n), bbits)
    return b.op("matmul", x, y), NO_VALUES


def _reduce(op: str):
    def draw(d: Draw, b: GraphBuilder):
        shape = d.shape(1, 4, 3)
        axes = [int(a) for a in d.rng.permutation(len(shape))[:d.int(1, len(shape))]]
        keep = 1 if len(axes) == len(shape) else d.int(0, 1)
        count = 1
        for a in axes:
            count *= shape[a]
        bits = d.bits() if op == "max" else max(1, min(d.bits(), 32 - count.bit_length()))
        return b.op(op, b.input("x", shape, bits), axes=axes, keepdims=keep), NO_VALUES
    return draw


def coord(d: Draw, n_in: int, n_out: int) -> tuple[int, int, int]:
    """A coordinate map (a, b, d): source = (a*i + b) / d, as ONNX's modes write them, or any."""
    kind = d.int(0, 4)
    if kind == 0:
        return 2 * n_in, n_in - n_out, 2 * n_out  # half_pixel
    if kind == 1 and n_out > 1:
        return n_in - 1, 0, n_out - 1  # align_corners
    if kind == 2:
        return n_in, 0, n_out  # asymmetric
    return d.edge(0, MAX_COORD), d.edge(-MAX_COORD, MAX_COORD), d.edge(1, MAX_COORD)


def draw_resize2d(d: Draw, b: GraphBuilder):
    c, h, w, oh, ow = d.int(1, 2), d.int(1, 5), d.int(1, 5), d.int(1, 5), d.int(1, 5)
    mode = d.int(0, 1)
    frac = d.edge(0, MAX_FRAC_BITS) if mode else 0
    y = b.op("resize2d", b.input("x", (c, h, w), d.bits()), size=(oh, ow), mode=mode,
             coord_h=coord(d, h, oh), coord_w=coord(d, w, ow), frac_bits=frac)
    return y, NO_VALUES


DRAWS = {"conv2d": draw_conv2d, "conv_transpose2d": draw_conv_transpose2d, "max_pool2d": draw_max_pool2d,
         "dense": draw_dense, "matmul": draw_matmul, "sum": _reduce("sum"), "max": _reduce("max"),
         "resize2d": draw_resize2d}
