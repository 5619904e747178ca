"""Window geometry (cvm/ops/window.py) against brute force, and the padding-free reference conv2d /
max_pool2d against the plain padded definitions of the spec."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.arith import window_out
from cvm.ops import OPSET_V1, window
from cvm.ops.linear import _conv_geometry

SMALL = st.integers(1, 9)


@given(n=st.integers(0, 40), m=st.integers(1, 50), a=st.integers(0, 200), b=st.integers(0, 200))
def test_floor_sum_is_the_plain_sum(n, m, a, b):
    assert window.floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def _taps_hit_brute(n_out, size, k, s, d, pad):
    return all(any(0 <= o * s + t * d - pad < size for t in range(k)) for o in range(n_out))


@settings(max_examples=400)
@given(size=SMALL, k=SMALL, s=SMALL, d=st.integers(1, 15), pad=st.integers(0, 30), extra=st.integers(0, 30))
def test_taps_hit_is_the_brute_force_check(size, k, s, d, pad, extra):
    n_out = window_out(size, k, s, d, pad, extra)
    if n_out >= 1:
        assert window.taps_hit(n_out, size, k, s, d, pad) == _taps_hit_brute(n_out, size, k, s, d, pad)


@settings(max_examples=300)
@given(size=SMALL, k=SMALL, s=SMALL, d=SMALL, pad=st.integers(0, 12), extra=st.integers(0, 12))
def test_axis_pieces_cover_exactly_the_taps_inside(size, k, s, d, pad, extra):
    n_out = window_out(size, k, s, d, pad, extra)
    if n_out < 1:
        return
    want = {(o, t, o * s + t * d - pad) for o in range(n_out) for t in range(k) if 0 <= o * s + t * d - pad < size}
    got = set()
    pieces = window.axis_pieces(size, n_out, k, s, d, pad)
    assert len(pieces) <= min(k, n_out)
    for p in pieces:
        outs, taps = range(n_out)[p.out], (range(k)[p.tap] if not p.tap_major else [p.tap])
        srcs = list(range(size)[p.src])
        pairs = [(o, t) for o in outs for t in taps]
        assert len(srcs) == len(pairs)
        got |= {(o, t, x) for (o, t), x in zip(pairs, srcs)}
    assert got == want


def test_taps_hit_at_the_largest_geometry():
    """Closed form: a loop over the windows in the padding took seconds here."""
    big = 1 << 20
    assert window.taps_hit(big, 1, big, 1, 1, big - 1)
    assert not window.taps_hit(big, 7, big, 1, 1, big)  # the first window's taps all lie in the padding
    assert not window.taps_hit(3, 1, 2, 1, big, 1)  # taps -1 and 2^20 - 1 jump over the one-row input


# ------------------------------------------------------------------ references against padded twins

def conv2d_padded(x, w, b, strides, pads, dilations, groups):
    """The spec's formula over an explicitly zero-padded input (the old reference)."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    oh, ow = _conv_geometry(x.shape[1:], w.shape, dict(strides=strides, pads=pads, dilations=dilations))
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    out = out.reshape(n, o, oh, ow)
    return out if b is None else out + b[None, :, None, None]


def max_pool_padded(x, kernel, strides, pads, dilations):
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = kernel, strides, dilations, pads
    oh = window_out(x.shape[2], kh, sh, dh, pt, pb)
    ow = window_out(x.shape[3], kw, sw, dw, pl, pr)
    lowest = np.iinfo(np.int64).min
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=lowest)
    out = np.full(x.shape[:2] + (oh, ow), lowest, np.int64)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw])
    return out


@st.composite
def geometry(draw, pool=False):
    g = draw(st.sampled_from([1, 2]))
    c = g * draw(st.integers(1, 2))
    h, w = draw(SMALL), draw(SMALL)
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    strides = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    dilations = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    pads = tuple(draw(st.integers(0, 6)) for _ in range(4))
    return c, g, h, w, kh, kw, strides, pads, dilations


@settings(max_examples=200, deadline=None)
@given(geo=geometry(), seed=st.integers(0, 2 ** 31))
def test_conv2d_reference_matches_the_padded_definition(geo, seed):
    c, g, h, w, kh, kw, strides, pads, dilations = geo
    if min(_conv_geometry((c, h, w), (1, 1, kh, kw), dict(strides=strides, pads=pads, dilations=dilations))) < 1:
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-127, 128, (2, c, h, w)).astype(np.int64)
    wt = rng.integers(-127, 128, (2 * g, c // g, kh, kw)).astype(np.int64)
    b = rng.integers(-1000, 1000, 2 * g).astype(np.int64)
    got = OPSET_V1["conv2d"].reference(x, wt, b, strides=strides, pads=pads, dilations=dilations, groups=g)
    np.testing.assert_array_equal(got, conv2d_padded(x, wt, b, strides, pads, dilations, g))


@settings(max_examples=200, deadline=None)
@given(geo=geometry(), seed=st.integers(0, 2 ** 31))
def test_max_pool_reference_matches_the_padded_definition(geo, seed):
    c, _, h, w, kh, kw, strides, pads, dilations = geo
    oh, ow = window_out(h, kh, strides[0], dilations[0], pads[0], pads[2]), \
        window_out(w, kw, strides[1], dilations[1], pads[1], pads[3])
    if min(oh, ow) < 1 or not (window.taps_hit(oh, h, kh, strides[0], dilations[0], pads[0])
                               and window.taps_hit(ow, w, kw, strides[1], dilations[1], pads[1])):
        return
    x = np.random.default_rng(seed).integers(-127, 128, (2, c, h, w)).astype(np.int64)
    got = OPSET_V1["max_pool2d"].reference(x, kernel=(kh, kw), strides=strides, pads=pads, dilations=dilations)
    np.testing.assert_array_equal(got, max_pool_padded(x, (kh, kw), strides, pads, dilations))


def test_reference_conv_with_huge_pads_allocates_nothing_large():
    """A 1x1 conv with pads near the bound and a stride that leaves a 2x2 output: the old reference
    padded a (2^20)^2 input; this one reads four values."""
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 3, 3), bits=8)
    big = 1 << 20
    y = b.op("conv2d", x, b.const(np.array([[[[3]]]], np.int8)), strides=[big, big], pads=[big, big, big, big])
    model = b.build(y)
    assert model.analysis.tensors[y].shape == (1, 3, 3)
    out = model.run(np.full((1, 1, 3, 3), 5, np.int8), backend="reference")
    want = np.zeros((1, 1, 3, 3), np.int64)
    want[0, 0, 1, 1] = 15  # only the centre output reads x[0, 0] (= 5) ... at position (0, 0)
    np.testing.assert_array_equal(out, want)
