"""Hypothesis strategies for random valid CVM graphs and their inputs (shared by the backend tests
and the conformance suite).

    @given(case=op_case("conv2d"))             # one op family, with its usual neighbours
    def test_x(case): case.model, case.inputs  # a verified cvm.Model and a dict of int inputs

Families: FAMILIES (one per op kind, including the fused conv/dense -> requant -> relu/clip chains)
plus `chain_case()` (small LeNet/ResNet-like models). Values sit at the extremes of their bits often:
all +max, all -max, only {-max, 0, max}, exact rounding halves. Graphs are built with
cvm.GraphBuilder and sized so that the verifier rarely rejects one (rejections are `assume`d away).
Some cases pass a layout prefix through a 1x1 identity conv (and flatten), so that a backend storing
conv outputs channels-last sees every op on such tensors too.
"""
from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import cvm
import cvm.limits
from cvm.arith import bits_max

I32 = (1 << 31) - 1
G = cvm.limits.MAX_GEOMETRY
FAR = (2, 1 << 10, (1 << 19) + 1, G - 1, G)  # geometry values near the verifier's bounds


class Case:
    def __init__(self, model: cvm.Model, inputs: dict[str, np.ndarray]):
        self.model, self.inputs = model, inputs

    def __repr__(self) -> str:
        shapes = {k: (v.shape, str(v.dtype)) for k, v in self.inputs.items()}
        return f"Case(inputs={shapes}):\n{self.model.graph}"


# ------------------------------------------------------------------ values

VALUE_MODES = ("uniform", "uniform", "max", "min", "edges", "small", "halves")


def values(draw, shape, lo: int, hi: int, mode: str | None = None, shift: int = 0) -> np.ndarray:
    """int64 array in [lo, hi]; mode picks the distribution (extremes are frequent)."""
    mode = mode or draw(st.sampled_from(VALUE_MODES))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    shape = tuple(shape)
    if mode == "max":
        return np.full(shape, hi, np.int64)
    if mode == "min":
        return np.full(shape, lo, np.int64)
    if mode == "edges":
        return rng.choice(np.array(sorted({lo, hi, min(max(0, lo), hi)}), np.int64), shape)
    if mode == "small":
        return rng.integers(max(lo, -3), min(hi, 3) + 1, shape, dtype=np.int64)
    if mode == "halves" and shift > 0:  # odd multiples of 2^(shift-1): exactly halfway after the shift
        half = 1 << (shift - 1)
        k = rng.integers(-(1 << 20), 1 << 20, shape, dtype=np.int64) * 2 + 1
        return np.clip(k * half, lo, hi)
    return rng.integers(lo, hi + 1, shape, dtype=np.int64)


def inputs_for(draw, model: cvm.Model, batch: int | None = None) -> dict[str, np.ndarray]:
    batch = batch if batch is not None else draw(st.sampled_from([1, 1, 2, 3, 5]))
    out = {}
    for spec in model.inputs:
        m = bits_max(spec.bits)
        out[spec.name] = values(draw, (batch,) + tuple(spec.shape[1:]), -m, m).astype(spec.dtype)
    return out


def const_bits(draw, lo: int = 1, hi: int = 8) -> int:
    return draw(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi])))


def act_bits(draw) -> int:
    """Activation bits: mostly int8 (the fast paths), sometimes 16- and 24-bit."""
    return draw(st.sampled_from([8, 8, 8, 7, 5, 2, 1, 12, 16, 16, 24]))


def shape(draw, rank_lo=1, rank_hi=4, dim_hi=5) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(1, dim_hi), min_size=rank_lo, max_size=rank_hi)))


def finish(draw, b: cvm.GraphBuilder, outputs, batch: int | None = None) -> Case:
    try:
        model = b.build(outputs)
    except cvm.VerifyError:
        assume(False)
    return Case(model, inputs_for(draw, model, batch))


# ------------------------------------------------------------------ layout prefixes

def source(draw, b: cvm.GraphBuilder, sample_shape, bits: int, name: str = "x") -> str:
    """An activation of this per-sample shape and bits: the input itself, or (rank 3) the input
    through a 1x1 identity conv, or (rank 1) the flatten of such a conv output."""
    sample_shape = tuple(sample_shape)
    kind = draw(st.sampled_from(["input", "input", "conv", "flat"]))
    if kind == "conv" and len(sample_shape) == 3:
        x = b.input(name, sample_shape, bits)
        return b.op("conv2d", x, b.const(np.eye(sample_shape[0], dtype=np.int64)[:, :, None, None]))
    if kind == "flat" and len(sample_shape) == 1:
        n = sample_shape[0]
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        c = draw(st.sampled_from(divisors))
        h = draw(st.sampled_from([d for d in divisors if (n // c) % d == 0]))
        x = b.input(name, (c, h, n // c // h), bits)
        y = b.op("conv2d", x, b.const(np.eye(c, dtype=np.int64)[:, :, None, None]))
        return b.op("flatten", y)
    return b.input(name, sample_shape, bits)


# ------------------------------------------------------------------ output steps (after a MAC)

def output_chain(draw, b: cvm.GraphBuilder, y: str, out_shape, channel_axis: int, acc_bits: int):
    """What may follow a MAC (and be fused into its output step): requant (per tensor or per channel)
    and/or relu/clip, sometimes then a residual add of another activation with its own requant and
    relu/clip; sometimes an intermediate stays a graph output too (which prevents fusing it)."""
    outputs = []
    channels = out_shape[channel_axis]
    if draw(st.integers(0, 5)) == 0:
        outputs.append(y)
    kind = draw(st.sampled_from(["requant", "requant", "requant_relu", "requant_clip", "relu", "clip", "none",
                                 "residual", "residual"]))
    if kind.startswith("requant") or kind == "residual":
        y = requant(draw, b, y, channels, channel_axis, acc_bits)
    if kind.endswith("relu"):
        y = b.op("relu", y)
    if kind.endswith("clip"):
        lo = draw(st.integers(-200, 100))
        y = b.op("clip", y, lo=lo, hi=lo + draw(st.integers(0, 300)))
    if kind == "residual":
        if draw(st.integers(0, 5)) == 0:
            outputs.append(y)
        r = source(draw, b, out_shape, draw(st.sampled_from([8, 8, 12, 16])), name="r")
        y = b.op("add", *((y, r) if draw(st.booleans()) else (r, y)))
        if draw(st.booleans()):
            y = requant(draw, b, y, channels, channel_axis, 17)
        if draw(st.booleans()):
            y = b.op("relu", y)
    if y not in outputs:
        outputs.append(y)
    return outputs


def requant(draw, b, y: str, channels: int, axis: int, in_bits: int) -> str:
    per_channel = channels > 1 and draw(st.booleans())
    mbits = draw(st.sampled_from([1, 2, 8, 16, 31]))
    m = values(draw, (channels if per_channel else 1,), 0, bits_max(mbits) if mbits > 1 else 1)
    shift = draw(st.one_of(st.just(0), st.integers(max(0, in_bits + mbits - 12), in_bits + mbits)))
    bits = draw(st.sampled_from([8, 8, 8, 1, 4, 16, 32]))
    return b.op("requant", y, b.const(m), shift=min(shift, 62), bits=bits, axis=axis if per_channel else 0)


def mac_weights(draw, shape_, k: int, xbits: int, with_bias: bool):
    """Weights (and bias) small enough that bias + k * max|w| * max|x| fits int32."""
    xmax = max(1, bits_max(xbits))
    bias_max = draw(st.sampled_from([0, 127, 1 << 15, 1 << 24])) if with_bias else 0
    wbits = draw(st.sampled_from([2, 4, 7, 8, 8, 8, 8, 12, 16]))
    wlim = min(bits_max(wbits), max(1, (I32 - bias_max) // (k * xmax)))
    w = values(draw, shape_, -wlim, wlim)
    bias = values(draw, (shape_[0],), -bias_max, bias_max) if with_bias else None
    return w, bias


def far_axis(draw, size: int, k: int) -> tuple[int, int, int, int]:
    """(stride, dilation, pad before, pad after) with values up to MAX_GEOMETRY that still leave
    1..4 window positions: what an attacker writes to make a backend wrap, pad or loop for free."""
    d = draw(st.sampled_from((1, 1) + FAR)) if k > 1 else draw(st.sampled_from((1,) + FAR))
    before, after = draw(st.sampled_from((0, 1) + FAR)), draw(st.sampled_from((0, 1) + FAR))
    span = d * (k - 1) + 1
    after = max(after, span - size - before)
    assume(after <= G)
    room = size + before + after - span  # window positions - 1 at stride 1
    s = min(G, max(1, room // draw(st.integers(1, 3)) + draw(st.integers(0, 1))))
    return s, d, before, after


# ------------------------------------------------------------------ families

@st.composite
def conv2d_case(draw) -> Case:
    b = cvm.GraphBuilder()
    groups = draw(st.sampled_from([1, 1, 1, 2, 3]))
    cg = draw(st.integers(1, 5))
    og = draw(st.one_of(st.integers(1, 6), st.integers(14, 40)))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]), 9))
    if draw(st.integers(0, 7)) == 0:  # geometry at the verifier's bounds, tiny output
        (sh, dh, pt, pb), (sw, dw, pl, pr) = far_axis(draw, h, kh), far_axis(draw, w, kw)
        pads = (pt, pl, pb, pr)
    xbits = act_bits(draw)
    x = source(draw, b, (groups * cg, h, w), xbits)
    wt, bias = mac_weights(draw, (groups * og, cg, kh, kw), cg * kh * kw, xbits, draw(st.booleans()))
    args = [x, b.const(wt)] + ([b.const(bias)] if bias is not None else [])
    y = b.op("conv2d", *args, strides=(sh, sw), dilations=(dh, dw), pads=pads, groups=groups)
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    return finish(draw, b, output_chain(draw, b, y, (groups * og, oh, ow), 0, xbits + 12))


@st.composite
def dense_case(draw) -> Case:
    b = cvm.GraphBuilder()
    k = draw(st.one_of(st.integers(1, 12), st.integers(60, 300)))
    o = draw(st.one_of(st.integers(1, 8), st.integers(15, 40)))
    lead = draw(st.sampled_from([(), (), (2,), (3, 1)]))
    xbits = act_bits(draw)
    x = source(draw, b, lead + (k,), xbits)
    wt, bias = mac_weights(draw, (o, k), k, xbits, draw(st.booleans()))
    y = b.op("dense", x, b.const(wt), *([b.const(bias)] if bias is not None else []))
    return finish(draw, b, output_chain(draw, b, y, lead + (o,), len(lead), xbits + 12))


@st.composite
def matmul_case(draw) -> Case:
    b = cvm.GraphBuilder()
    lead = draw(st.sampled_from([(), (2,), (1, 3)]))
    m, k, n = (draw(st.integers(1, 6)) for _ in range(3))
    abits = draw(st.sampled_from([8, 8, 4, 12, 16]))
    bbits = min(draw(st.sampled_from([8, 8, 4, 12])), 31 - abits - k.bit_length())
    assume(bbits >= 1)
    x = source(draw, b, lead + (m, k), abits)
    y = source(draw, b, lead + (k, n), bbits, name="y")
    return finish(draw, b, b.op("matmul", x, y))


def broadcast_partner(draw, out_shape) -> tuple[int, ...]:
    """A shape that broadcasts to out_shape (a suffix of it, with some axes set to 1)."""
    r = draw(st.integers(1, len(out_shape)))
    return tuple(1 if draw(st.booleans()) else d for d in out_shape[len(out_shape) - r:])


@st.composite
def binary_case(draw) -> Case:
    b = cvm.GraphBuilder()
    op = draw(st.sampled_from(["add", "sub", "mul"]))
    out_shape = shape(draw)
    abits = draw(st.sampled_from([8, 8, 13, 16, 24, 31]))
    budget = 32 - abits if op == "mul" else 31
    bbits = min(draw(st.sampled_from([8, 8, 13, 16, 24, 31])), budget)
    assume(bbits >= 1)
    x = source(draw, b, out_shape, abits)
    if draw(st.booleans()):  # constant partner, either side
        m = bits_max(bbits)
        y = b.const(values(draw, broadcast_partner(draw, out_shape), -m, m))
    else:  # activation partner of the same rank
        y = source(draw, b, tuple(1 if draw(st.booleans()) else d for d in out_shape), bbits, name="y")
    args = (y, x) if draw(st.booleans()) else (x, y)
    return finish(draw, b, b.op(op, *args))


@st.composite
def div_case(draw) -> Case:
    b = cvm.GraphBuilder()
    out_shape = shape(draw)
    partner = tuple(1 if draw(st.booleans()) else d for d in out_shape)
    if draw(st.booleans()):
        x = source(draw, b, out_shape, draw(st.sampled_from([8, 8, 16, 31])))
        dmax = draw(st.sampled_from([1, 2, 3, 7, 100, 1 << 20, I32]))
        d = b.const(values(draw, broadcast_partner(draw, out_shape), 1, dmax))
    else:
        x_shape, d_shape = (partner, out_shape) if draw(st.booleans()) else (out_shape, partner)  # either broadcasts
        x = source(draw, b, x_shape, draw(st.sampled_from([8, 8, 16, 31])))
        y = source(draw, b, d_shape, draw(st.sampled_from([4, 8, 16])), "y")
        d = b.op("clip", y, lo=1, hi=draw(st.sampled_from([1, 2, 9, 1000])))
    return finish(draw, b, b.op("div", x, d))


@st.composite
def clamp_case(draw) -> Case:
    b = cvm.GraphBuilder()
    bits = draw(st.sampled_from([1, 8, 8, 16, 32]))
    x = source(draw, b, shape(draw), bits)
    if draw(st.booleans()):
        y = b.op("relu", x)
    else:
        m = bits_max(bits) + 2
        lo = draw(st.one_of(st.integers(-m, m), st.just(cvm.limits.MIN_CLIP)))
        hi = draw(st.one_of(st.integers(max(lo, -m), max(lo, m + 1)), st.just(cvm.limits.MAX_CLIP)))
        y = b.op("clip", x, lo=lo, hi=hi)
    return finish(draw, b, y)


@st.composite
def requant_case(draw) -> Case:
    b = cvm.GraphBuilder()
    s = shape(draw, 1, 3)
    in_bits = draw(st.sampled_from([8, 16, 20, 32]))
    x = source(draw, b, s, in_bits)
    axis = draw(st.integers(0, len(s) - 1))
    per_channel = draw(st.booleans())
    mbits = draw(st.sampled_from([1, 2, 8, 16, 31]))
    m = values(draw, (s[axis] if per_channel else 1,), 0, bits_max(mbits) if mbits > 1 else 1)
    shift = draw(st.one_of(st.just(0), st.just(1), st.integers(0, 62)))
    per_tensor_axis = draw(st.sampled_from([0, 0, 0, cvm.limits.MAX_AXIS]))
    y = b.op("requant", x, b.const(m), shift=shift, bits=draw(st.sampled_from([8, 8, 1, 2, 16, 31, 32])),
             axis=axis if per_channel else per_tensor_axis)
    model = None
    try:
        model = b.build(y)
    except cvm.VerifyError:
        assume(False)
    batch = draw(st.sampled_from([1, 2, 3]))
    inputs = {}
    for spec in model.inputs:  # values that land exactly on rounding halves, often
        lim = bits_max(spec.bits)
        inputs[spec.name] = values(draw, (batch,) + spec.shape[1:], -lim, lim, shift=shift).astype(spec.dtype)
    return Case(model, inputs)


@st.composite
def lut_case(draw) -> Case:
    b = cvm.GraphBuilder()
    if draw(st.integers(0, 7)) == 0:  # a 32-bit input clipped to a window at an end of int32: offsets there
        x = source(draw, b, shape(draw), 32)
        n, extra = draw(st.integers(0, 64)), draw(st.integers(0, 3))
        if draw(st.booleans()):
            lo, hi = -I32, cvm.limits.MIN_CLIP + n  # clip's low end: the input's own bound
            x = b.op("clip", x, lo=cvm.limits.MIN_CLIP, hi=hi)
        else:
            lo, hi = cvm.limits.MAX_CLIP - n, cvm.limits.MAX_CLIP
            x = b.op("clip", x, lo=lo, hi=hi)
        offset = lo - extra
        table = values(draw, (hi - offset + 1 + draw(st.integers(0, 3)),), -I32, I32)
        return finish(draw, b, b.op("lut", x, b.const(table), offset=offset))
    bits = draw(st.integers(1, 10))
    m = bits_max(bits)
    x = source(draw, b, shape(draw), bits)
    offset = -m - draw(st.integers(0, 3))
    size = 2 * m + 1 + (-m - offset) + draw(st.integers(0, 3))
    tbits = draw(st.sampled_from([1, 8, 16, 32]))
    table = values(draw, (size,), -bits_max(tbits), bits_max(tbits))
    return finish(draw, b, b.op("lut", x, b.const(table), offset=offset))


@st.composite
def max_pool_case(draw) -> Case:
    b = cvm.GraphBuilder()
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = (draw(st.integers(0, (kh - 1) * dh)), draw(st.integers(0, (kw - 1) * dw)),
            draw(st.integers(0, (kh - 1) * dh)), draw(st.integers(0, (kw - 1) * dw)))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]), 9))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    if draw(st.integers(0, 7)) == 0:  # geometry at the verifier's bounds, tiny output
        (sh, dh, pt, pb), (sw, dw, pl, pr) = far_axis(draw, h, kh), far_axis(draw, w, kw)
        pads, strides = (min(pt, (kh - 1) * dh), min(pl, (kw - 1) * dw), pb, pr), (sh, sw)
        if draw(st.booleans()):  # a huge kernel instead of a huge dilation
            kh, dh = draw(st.sampled_from(FAR)), 1
    x = source(draw, b, (draw(st.integers(1, 6)), h, w), act_bits(draw))
    y = b.op("max_pool2d", x, kernel=(kh, kw), strides=strides, dilations=(dh, dw), pads=pads)
    return finish(draw, b, y)


@st.composite
def reduce_case(draw) -> Case:
    b = cvm.GraphBuilder()
    s = shape(draw)
    x = source(draw, b, s, draw(st.sampled_from([1, 8, 8, 16, 24])))
    axes = draw(st.lists(st.integers(0, len(s) - 1), min_size=1, max_size=len(s), unique=True))
    keep = 1 if len(axes) == len(s) else draw(st.integers(0, 1))
    return finish(draw, b, b.op(draw(st.sampled_from(["sum", "max"])), x, axes=axes, keepdims=keep))


@st.composite
def layout_case(draw) -> Case:
    b = cvm.GraphBuilder()
    s = shape(draw)
    bits = draw(st.sampled_from([8, 8, 16, 32]))
    x = source(draw, b, s, bits)
    op = draw(st.sampled_from(["reshape", "flatten", "transpose", "concat", "pad", "slice"]))
    if op == "reshape":
        n = int(np.prod(s))
        dims, rest = [], n
        while rest > 1 and len(dims) < 4:
            d = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
            dims.append(d)
            rest //= d
        y = b.op("reshape", x, shape=dims + [rest] if rest > 1 or not dims else dims)
    elif op == "flatten":
        y = b.op("flatten", x)
    elif op == "transpose":
        y = b.op("transpose", x, perm=draw(st.permutations(range(len(s)))))
    elif op == "concat":
        axis = draw(st.integers(0, len(s) - 1))
        parts = [x]
        for _ in range(draw(st.integers(0, 2))):
            ps = tuple(draw(st.integers(1, 3)) if i == axis else d for i, d in enumerate(s))
            m = bits_max(draw(st.sampled_from([8, 16])))
            parts.insert(draw(st.integers(0, len(parts))), b.const(values(draw, ps, -m, m)))
        for _ in range(draw(st.sampled_from([0, 0, 1, 3]))):  # repeated inputs (the gather path)
            parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(parts)))
        y = b.op("concat", *parts, axis=axis)
    elif op == "pad":
        pads = [draw(st.integers(0, 2)) for _ in range(2 * len(s))]
        if draw(st.integers(0, 3)) == 0:  # one axis padded towards MAX_GEOMETRY (at most 2^18 elements out)
            r, a = len(s), draw(st.integers(0, len(s) - 1))
            others = int(np.prod([d + pads[i] + pads[r + i] for i, d in enumerate(s) if i != a]))
            room = min(G, (1 << 18) // others) - s[a]
            if room >= 1:
                total = draw(st.sampled_from([room, room - 1, room // 2]))
                before = draw(st.sampled_from([0, total, total // 2]))
                pads[a], pads[r + a] = before, total - before
        m = bits_max(bits)
        y = b.op("pad", x, pads=pads, value=draw(st.sampled_from([0, -m, m, 7])))
    else:
        starts = [draw(st.integers(0, d - 1)) for d in s]
        ends = [draw(st.integers(st_ + 1, d)) for st_, d in zip(starts, s)]
        steps = [draw(st.one_of(st.integers(1, 3), st.sampled_from(FAR))) for _ in s]
        y = b.op("slice", x, starts=starts, ends=ends, steps=steps)
    outputs = [y]
    if draw(st.booleans()):  # something that reads the result (a layout change before a kernel op)
        outputs = [b.op("relu", y)]
    return finish(draw, b, outputs)


FAMILIES = {
    "conv2d": conv2d_case, "dense": dense_case, "matmul": matmul_case, "binary": binary_case, "div": div_case,
    "clamp": clamp_case, "requant": requant_case, "lut": lut_case, "max_pool2d": max_pool_case,
    "reduce": reduce_case, "layout": layout_case,
}


def op_case(family: str):
    return FAMILIES[family]()


# ------------------------------------------------------------------ small whole models

def _requant_to(draw, b, y: str, channels: int, acc_hint: int, bits: int = 8) -> str:
    """Per-channel requant with a shift that maps about acc_hint bits to `bits` bits."""
    m = values(draw, (channels,), 1 << 14, (1 << 15) - 1, mode="uniform")
    shift = max(0, acc_hint + 15 - bits + draw(st.integers(-2, 1)))
    return b.op("requant", y, b.const(m), shift=shift, bits=bits, axis=0)


@st.composite
def chain_case(draw) -> Case:
    """conv -> requant -> relu [-> max_pool] [-> residual block] -> flatten -> dense -> requant [-> dense]."""
    b = cvm.GraphBuilder()
    c, hw = draw(st.integers(1, 4)), draw(st.integers(4, 12))
    x = b.input("x", (c, hw, hw), 8)
    o = draw(st.sampled_from([4, 8, 16, 32]))
    w = values(draw, (o, c, 3, 3), -127, 127)
    y = b.op("conv2d", x, b.const(w), b.const(values(draw, (o,), -5000, 5000)), pads=(1, 1, 1, 1))
    y = b.op("relu", _requant_to(draw, b, y, o, 14 + (9 * c).bit_length()))
    if draw(st.booleans()):
        y = b.op("max_pool2d", y, kernel=(2, 2), strides=(2, 2))
        hw //= 2
    if draw(st.booleans()):  # residual block: relu(requant(conv(y)) + y)
        w2 = values(draw, (o, o, 3, 3), -127, 127)
        z = b.op("conv2d", y, b.const(w2), pads=(1, 1, 1, 1))
        z = _requant_to(draw, b, z, o, 14 + (9 * o).bit_length())
        y = b.op("relu", b.op("add", z, y))
        y = b.op("requant", y, b.const([1]), shift=1, bits=8)
    y = b.op("flatten", y)
    k = o * hw * hw
    d = draw(st.sampled_from([10, 16, 33]))
    y = b.op("dense", y, b.const(values(draw, (d, k), -127, 127)), b.const(values(draw, (d,), -999, 999)))
    y = _requant_to(draw, b, y, d, 14 + k.bit_length())
    if draw(st.booleans()):
        y = b.op("dense", b.op("relu", y), b.const(values(draw, (10, d), -127, 127)))
    return finish(draw, b, y)
