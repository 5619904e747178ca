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

from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import dense16, fused
from cvm.interp.numba_kernels.gemv_i32 import dense_rows_i32
from cvm.interp.numba_kernels.rows_lean import (copy_rows_f, copy_rows_l, dense16_rows_l, dense_rows_l, mul_rows_f,
                                                mul_rows_l)
from numba_helpers import ISAS, SETTINGS, assert_same, dense_case, needs_vnni, rows_case

ROOT = Path(__file__).resolve().parents[2]


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


@SETTINGS
@given(dense_case())
def test_one_pass_dense_equals_dense_rows_i32(case):
    x, w, bias, m1, m2, ost, res, out = case
    want, got = out.copy(), out.copy()
    dense_rows_i32(x, w, bias, m1, m2, ost, res, want, np.empty(out.shape, np.int32))
    dense_rows_l(x, w, bias, m1, m2, ost, res, got, np.empty(out.shape, np.int32))
    np.testing.assert_array_equal(got, want)


@needs_vnni
@SETTINGS
@given(dense_case())
def test_dense16_rows_equal_dense_vnni16(case):
    """dense16_rows_l (dense16's accumulators, the scratch passed in, step.scratch_rows) writes what
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
def test_recurrent_fixture_through_each_twin_matches_reference(name, lean, converted):
    """Both twins the whole-plan runner may pick for the fused row kernels (one pass, or the scratch
    twins) and the originals (Tuning.lean off) run the fixture, converted with today's defaults, at batch
    1 and 3 as the reference does, on every ISA."""
    tuning = nb.Tuning(lean=lean)
    model = converted(name)
    spec = model.inputs[0]
    lim = (1 << (spec.bits - 1)) - 1
    for batch in (1, 3):
        x = np.random.default_rng(batch).integers(-lim, lim + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)
        want = reference.run(model.graph, model.analysis, {spec.name: x})
        for isa in ISAS:
            runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=1, wholeplan="always", tuning=tuning)
            assert_same(runner({spec.name: x}), want, f"[{name}, {isa}, batch {batch}, lean={lean}] ")
