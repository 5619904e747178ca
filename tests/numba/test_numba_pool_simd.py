"""max_pool2d's AVX-512 kernel (pool_simd.max_pool_nhwc_simd: a window's maximum over 64 bytes of
channels in a register) equals the reference and its plain twin (pool.max_pool_nhwc) bit for bit: int8,
unsigned (a relu output stored as uint8) and int16 inputs with whole 64-byte channel runs, kernels,
strides, dilations and padding as the verifier allows, windows cut by the image's edges, serial and split
between threads. Each case runs once per kernel path; on the VNNI one (skipped, naming it, where the CPU
lacks it) it checks that the SIMD kernel ran.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 -> 50)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp.numba_kernels import pool
from cvm.interp.numba_kernels.kargs import WINDOW, pack
from numba_helpers import check, each_isa, kernels, needs_vnni, vnni_runner
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


@st.composite
def simd_pool(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    bits = draw(st.sampled_from([8, 9, 13]))  # 9: a relu in 0..255, stored as uint8 (with a requant reading the pool)
    c = draw(st.sampled_from([64, 128] if bits < 13 else [32, 64, 96]))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, (k - 1) * d)) for k, d in ((kh, dh), (kw, dw), (kh, dh), (kw, dw)))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]), 9))
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), bits) if bits != 9 else None
    if bits == 9:  # a conv's relu output in 0..254, stored as uint8 (as ResNet's stem pool reads it)
        x = b.op("conv2d", b.input("x", (c, h, w), 8), b.const(2 * np.eye(c, dtype=np.int64).reshape(c, c, 1, 1)))
        x = b.op("relu", b.op("requant", x, b.const([1]), shift=0, bits=9))
    elif draw(st.booleans()):
        x = b.op("relu", x)
    y = b.op("max_pool2d", x, kernel=(kh, kw), strides=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             dilations=(dh, dw), pads=pads)
    if bits == 9:  # a uint8 reader: the pool's output is stored as uint8 too
        y = b.op("requant", y, b.const([1]), shift=0, bits=9)
    lim = (1 << (min(bits, 8) - 1)) - 1 if bits < 13 else (1 << 12) - 1
    n = draw(st.integers(1, 3))
    try:
        model = b.build(y)
    except cvm.VerifyError:  # a geometry the verifier rejects (a window with no input tap)
        assume(False)
    return Case(model, {"x": rng.integers(-lim, lim + 1, (n, c, h, w)).astype(np.int8 if bits < 13 else np.int16)})


@pytest.mark.parametrize("isa", each_isa())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=simd_pool(), threads=st.integers(1, 3))
def test_simd_max_pool_matches_reference(isa, case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto", isas=[isa])
    if isa == "vnni":
        assert "max_pool_nhwc_simd" in kernels(vnni_runner(case), case.inputs)


@needs_vnni
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.uint8, np.int8, np.int16]))
def test_simd_max_pool_equals_its_plain_twin(seed, dtype):
    from cvm.interp.numba_kernels import pool_simd
    rng = np.random.default_rng(seed)
    lanes = 64 // np.dtype(dtype).itemsize
    n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(3, 12)), int(rng.integers(3, 12)), lanes * int(rng.integers(1, 3))
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (n, h, w, c)).astype(dtype)
    geo = pack(WINDOW, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1, pt=1, pl=1)
    oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
    want, got = np.zeros((n, oh, ow, c), dtype), np.zeros((n, oh, ow, c), dtype)
    pool.max_pool_nhwc(x, want, geo, 0, n * oh)
    pool_simd.max_pool_nhwc_simd(x, got, geo, 0, n * oh)
    assert np.array_equal(want, got)
