"""The portable conv kernel skips kernel taps that read only padding (conv.block_taps): bit for bit
equal to the reference on kernels larger than the image, far pads, strides and dilations, and the
box it multiplies is exactly the taps some pixel of the block reads inside the input.

Why: gas schedule v2 (opset 3) is calibrated on the portable path; before this, a 2^20-tap kernel
with all but two taps in the padding multiplied 2^20 zeros per output pixel and set the conv price
ten times higher than any real layer needs."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import conv
from cvm.interp.numba_kernels.kargs import GEO
from numba_helpers import assert_same

EXAMPLES = int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000"))
SETTINGS = settings(max_examples=max(1, EXAMPLES // 4), deadline=None, derandomize=True, database=None,
                    print_blob=False, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def padded_conv(draw):
    """A conv whose kernel overhangs a small image: many of its taps read only padding."""
    groups, cg, og = draw(st.sampled_from([1, 1, 2])), draw(st.integers(1, 4)), draw(st.integers(1, 9))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    kh, kw = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pt, pb = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    pl, pr = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    pb = max(pb, dh * (kh - 1) + 1 - h - pt)
    pr = max(pr, dw * (kw - 1) + 1 - w - pl)
    xbits = draw(st.sampled_from([4, 8, 12, 16]))
    lim = max(1, min(127 if xbits <= 8 else 1000, ((1 << 31) - 1) // (cg * kh * kw * (1 << (xbits - 1)))))
    b = cvm.GraphBuilder()
    x = b.input("x", (groups * cg, h, w), xbits)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    weights = rng.integers(-lim, lim + 1, (groups * og, cg, kh, kw))
    args = [x, b.const(weights)]
    if draw(st.booleans()):
        args.append(b.const(rng.integers(-1000, 1001, groups * og)))
    y = b.op("conv2d", *args, pads=(pt, pl, pb, pr), strides=(sh, sw), dilations=(dh, dw), groups=groups)
    model = b.build(y)
    batch = draw(st.integers(1, 3))
    m = (1 << (xbits - 1)) - 1
    return model, {"x": rng.integers(-m, m + 1, (batch, groups * cg, h, w)).astype(model.inputs[0].dtype)}


@SETTINGS
@given(case=padded_conv(), threads=st.sampled_from([1, 2]))
def test_padded_taps_skipped_bit_exact(case, threads):
    model, inputs = case
    want = reference.run(model.graph, model.analysis, inputs)
    runner = nb.prepare(model.graph, model.analysis, isa="portable", threads=threads, split="always")
    assert_same(runner(inputs), want, "[portable] ")


def _geo(kh, kw, sh, sw, dh, dw, pt, pl, oh, ow):
    values = dict(kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, groups=1, cg=1, og=1, k=kh * kw,
                  oh=oh, ow=ow)
    return np.array([values[name] for name in GEO], np.int64)


@settings(max_examples=max(1, EXAMPLES // 4), deadline=None, derandomize=True, database=None)
@given(h=st.integers(1, 6), w=st.integers(1, 6), kh=st.integers(1, 12), kw=st.integers(1, 12),
       sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 3), dw=st.integers(1, 3),
       pt=st.integers(0, 15), pl=st.integers(0, 15), r0=st.integers(0, 30), nrows=st.integers(1, 64))
def test_block_taps_is_the_box_of_in_image_taps(h, w, kh, kw, sh, sw, dh, dw, pt, pl, r0, nrows):
    oh, ow = 4, 5
    nrows = min(nrows, 2 * oh * ow - r0)
    got = conv.block_taps(_geo(kh, kw, sh, sw, dh, dw, pt, pl, oh, ow), h, w, r0, nrows)
    taps = [(u, v) for p in range(r0, r0 + nrows) for u in range(kh) for v in range(kw)
            if 0 <= (p % (oh * ow)) // ow * sh + u * dh - pt < h and 0 <= p % ow * sw + v * dw - pl < w]
    if not taps:
        assert got == (0, 0, 0, 0)
    else:
        us, vs = [u for u, _ in taps], [v for _, v in taps]
        assert got == (min(us), max(us) + 1, min(vs), max(vs) + 1)


def test_tall_kernel_multiplies_only_its_in_image_taps():
    """The adversarial catalogue's tall kernel (2^20 x 1, two taps inside the image): the block's box
    is those two taps."""
    from cvm.tools.adversarial import build
    model, x = build("conv_tall_kernel")
    node = model.graph.nodes[0]
    kh = model.graph.constants[node.inputs[1]].shape[2]
    pt = model.analysis.attrs[0]["pads"][0]
    assert conv.block_taps(_geo(kh, 1, 1, 1, 1, 1, pt, 0, 1, 1), 2, 1, 0, 1) == (kh - 2, kh, 0, 1)
    want = reference.run(model.graph, model.analysis, {"x": x})
    assert_same(nb.prepare(model.graph, model.analysis, isa="portable")({"x": x}), want)


def test_tall_pool_window_visits_only_its_in_image_taps():
    """max_pool2d's portable kernel loops over each window's in-image taps only (conv.tap_range): the
    catalogue's 2^20 x 1 pool over two rows equals the reference."""
    from cvm.tools.adversarial import build
    model, x = build("maxpool_tall_kernel")
    want = reference.run(model.graph, model.analysis, {"x": x})
    assert_same(nb.prepare(model.graph, model.analysis, isa="portable")({"x": x}), want)


@settings(max_examples=max(1, EXAMPLES // 10), deadline=None, derandomize=True, database=None)
@given(o=st.integers(0, 40), stride=st.integers(1, 5), dilation=st.integers(1, 5), pad=st.integers(0, 30),
       size=st.integers(1, 12), taps=st.integers(1, 20))
def test_tap_range_is_exactly_the_in_image_taps(o, stride, dilation, pad, size, taps):
    inside = [t for t in range(taps) if 0 <= o * stride + t * dilation - pad < size]
    lo, hi = _tap_range(o, stride, dilation, pad, size, taps)
    assert list(range(lo, hi)) == (list(range(inside[0], inside[-1] + 1)) if inside else [])


def _tap_range(*args):
    """conv.tap_range through block_taps (tap_range itself has no Python entry point)."""
    o, stride, dilation, pad, size, taps = args
    ua, ub, _, _ = conv.block_taps(_geo(taps, 1, stride, 1, dilation, 1, pad, 0, o + 1, 1), size, 1, o, 1)
    return ua, ub
