"""The one-pass row kernels of the whole-plan runner (cvm.interp.numba_kernels.rows_lean) write what
the fused row kernels they replace (fused.mul_rows, fused.copy_rows: the per-step path's, held to
the reference by the equivalence suite) and the small dense layers (gemv_i32.dense_rows_i32, dense16.dense_vnni16) write, byte for byte, over every output step the planner
builds (requant and clamp, a lut, a residual tensor or per-channel constant, a second requant and
clamp, a second lut), block ranges, channel offsets (a concat's slice) and per-sample scales; and
a recurrent fixture run through them equals the reference on every ISA.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI runs)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import dense16, fused, rows_lean
from cvm.interp.numba_kernels.plan import OPEN_HI, OPEN_LO, OutputStep
from cvm.interp.numba_kernels.gemv_i32 import dense_rows_i32
from cvm.interp.numba_kernels.rows_lean import (copy_rows_f, copy_rows_l, dense16_rows_l, dense_rows_l, mul_rows_f,
                                                mul_rows_l)
from strategies import values
from test_numba_equivalence import ISAS, SETTINGS, assert_same

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {8: np.int8, 16: np.int16, 32: np.int32}


@st.composite
def _stage(draw, c: int):
    """(mult[c], shift, lo, hi, table | None, offset): a requant/clamp stage; with a table, the
    clamp keeps every value inside it (as the verifier proves of a lut's input)."""
    mult = values(draw, (c,), -(1 << 20), 1 << 20)
    shift = draw(st.integers(0, 40))
    if draw(st.booleans()):
        lo = draw(st.integers(-300, 0))
        hi = draw(st.integers(lo, 300))
        return mult, shift, lo, hi, values(draw, (hi - lo + 1,), -(1 << 15), 1 << 15), lo
    if draw(st.booleans()):
        return mult, shift, OPEN_LO, OPEN_HI, None, 0
    lo = draw(st.integers(-(1 << 20), 0))
    return mult, shift, lo, draw(st.integers(lo, 1 << 20)), None, 0


@st.composite
def rows_case(draw):
    """A row kernel call: (kind, args before the output step, output step, out, block range)."""
    mul = draw(st.booleans())
    c, c_extra, c0 = draw(st.integers(1, 40)), draw(st.integers(0, 5)), 0
    hw = draw(st.sampled_from([1, 1, 2, 3])) if mul else 1
    samples = draw(st.integers(1, 3))
    rows = samples * hw if mul else draw(st.integers(1, 140))
    xbits = draw(st.sampled_from([8, 16] if mul else [8, 16, 32]))
    x = values(draw, (rows, c), -(1 << (xbits - 1)), (1 << (xbits - 1)) - 1).astype(DTYPES[xbits])
    if mul:
        sbits = draw(st.sampled_from([8, 16]))
        sc = values(draw, (rows // hw, c), -(1 << (sbits - 1)), (1 << (sbits - 1)) - 1).astype(DTYPES[sbits])
    else:
        c0 = draw(st.integers(0, c_extra))
    width = c if mul else c + c_extra
    m1, s1, lo1, hi1, t1, off1 = draw(_stage(c))
    kind = draw(st.sampled_from(["none", "tensor", "row"]))
    m2, s2, lo2, hi2, t2, off2 = draw(_stage(c)) if kind != "none" else (np.ones(c, np.int64), 0, OPEN_LO, OPEN_HI,
                                                                          None, 0)
    out_dtype = DTYPES[draw(st.sampled_from([16, 32]))]
    if kind == "tensor":
        res = values(draw, (rows, width), -(1 << 15), (1 << 15) - 1).astype(out_dtype)
    elif kind == "row":
        res = values(draw, (1, width), -(1 << 15), (1 << 15) - 1)
    else:
        res = np.zeros((1, 1), out_dtype)
    ost = OutputStep(m1, s1, lo1, hi1, "r" if kind == "tensor" else None, m2, s2, lo2, hi2, "y", (), t1, off1, t2, off2,
                     res[0] if kind == "row" else None)
    blocks = -(-rows // fused.BLOCK_ROWS)
    b0 = draw(st.integers(0, blocks - 1))
    b1 = draw(st.integers(b0 + 1, blocks))
    out = np.full((rows, width), -7, out_dtype)
    head = (x, sc) if mul else (x,)
    tail = (np.int64(hw),) if mul else (np.int64(c0),)
    return mul, head, (m1, m2, ost.params(), res), out, tail, (b0, b1)


@SETTINGS
@given(rows_case())
def test_row_twins_equal_the_fused_kernels(case):
    mul, head, (m1, m2, ost, res), out, tail, (b0, b1) = case
    want, got, got_f = out.copy(), out.copy(), out.copy()
    scratch = np.empty((min(fused.BLOCK_ROWS, head[0].shape[0]), head[0].shape[1]), np.int32)
    if mul:
        fused.mul_rows(*head, m1, m2, ost, res, want, *tail, b0, b1)
        mul_rows_l(*head, m1, m2, ost, res, got, *tail, b0, b1)
        mul_rows_f(*head, m1, m2, ost, res, got_f, *tail, b0, b1, scratch)
    else:
        fused.copy_rows(*head, m1, m2, ost, res, want, *tail, b0, b1)
        copy_rows_l(*head, m1, m2, ost, res, got, *tail, b0, b1)
        copy_rows_f(*head, m1, m2, ost, res, got_f, *tail, b0, b1, scratch)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_f, want)


@st.composite
def dense_case(draw):
    """A dense layer of a few rows, int8/int16 inputs and weights (partial sums in int32, as the
    planner proves before it picks the int32 path), with an output step."""
    rows, k, og = draw(st.integers(1, 8)), draw(st.integers(1, 6)), draw(st.integers(1, 70))
    xb, wb = draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 12, 16]))
    x = values(draw, (rows, 1, 1, k), -(1 << (xb - 1)), (1 << (xb - 1)) - 1).astype(DTYPES[xb])
    w = values(draw, (1, og, k), -(1 << (wb - 1)), (1 << (wb - 1)) - 1).astype(np.int16 if wb > 8 else np.int8)
    bias = values(draw, (1, og), -(1 << 24), 1 << 24).astype(np.int32)
    m1, s1, lo1, hi1, t1, off1 = draw(_stage(og))
    with_res = draw(st.booleans())
    m2, s2, lo2, hi2, t2, off2 = draw(_stage(og)) if with_res else (np.ones(og, np.int64), 0, OPEN_LO, OPEN_HI, None, 0)
    res = values(draw, (rows, og), -(1 << 20), 1 << 20).astype(np.int32) if with_res else np.zeros((1, 1), np.int16)
    ost = OutputStep(m1, s1, lo1, hi1, "r" if with_res else None, m2, s2, lo2, hi2, "y", (), t1, off1, t2, off2)
    out = np.full((rows, og), -7, DTYPES[draw(st.sampled_from([16, 32]))])
    return x, w, bias, m1.reshape(1, -1), m2.reshape(1, -1), ost.params(), res, out


@SETTINGS
@given(dense_case())
def test_one_pass_dense_equals_dense_rows_i32(case):
    x, w, bias, m1, m2, ost, res, out = case
    want, got = out.copy(), out.copy()
    dense_rows_i32(x, w, bias, m1, m2, ost, res, want, np.empty(out.shape, np.int32))
    dense_rows_l(x, w, bias, m1, m2, ost, res, got, np.empty(out.shape, np.int32))
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("vnni" not in ISAS, reason="AVX-512 VNNI not available on this machine")
@SETTINGS
@given(dense_case())
def test_dense16_rows_equal_dense_vnni16(case):
    """dense16_rows_l (dense16's accumulators, the scratch passed in, finish_rows) writes what
    dense16.dense_vnni16 writes, for int16 inputs (its only input dtype) of any k (odd: the last column)."""
    x, w, bias, m1, m2, ost, res, out = case
    rows, k = x.shape[0], x.shape[3]
    if k < 2:
        return
    x16 = x.reshape(rows, k).astype(np.int16)
    wp, last = dense16.pack_weights(w[0].astype(np.int16))
    b = np.zeros(last.shape[0], np.int32)
    b[:bias.shape[1]] = bias[0]
    geo = np.zeros(14, np.int64)
    want, got = out.copy(), out.copy()
    dense16.dense_vnni16(x16, wp, last, b, m1[0], m2[0], ost, res, want, geo, 0, 1)
    dense16_rows_l(x16, wp, last, b, m1[0], m2[0], ost, res, got, geo, 0, 1, np.empty((rows, b.shape[0]), np.int32))
    np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def converted():
    """name -> the recurrent fixture converted from its ONNX (cached for the module)."""
    from mrt.pipeline import convert
    cache = {}

    def get(name):
        if name not in cache:
            calib = np.load(ROOT / "fixtures/data" / f"{name}_calib.npz")["x"]
            cache[name] = convert(ROOT / "fixtures/models" / f"{name}.onnx", calib, progress=False)
        return cache[name]
    return get


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("name", ["rnn_sunspots_lstm", "rnn_digits_gru"])
def test_recurrent_fixture_through_each_twin_matches_reference(name, lean, monkeypatch, converted):
    """Both twins the whole-plan runner may pick for the fused row kernels (one pass, or the scratch
    twins) and the originals (lean off) run the fixture, converted with today's defaults, at batch 1 and 3
    as the reference does, on every ISA."""
    monkeypatch.setattr(rows_lean, "LEAN", lean)
    model = converted(name)
    spec = model.inputs[0]
    lim = (1 << (spec.bits - 1)) - 1
    for batch in (1, 3):
        x = np.random.default_rng(batch).integers(-lim, lim + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)
        want = reference.run(model.graph, model.analysis, {spec.name: x})
        for isa in ISAS:
            runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=1, wholeplan="always")
            assert_same(runner({spec.name: x}), want, f"[{name}, {isa}, batch {batch}, lean={lean}] ")
