"""The row kernels specialized by output step (numba_kernels.rows_case: flat, one block, no lut) write
what the kernels they replace write, byte for byte: fused.mul_rows, gemv_i32.dense_rows_i32 and
dense16.dense_vnni16 (the per-step path's, held to the reference by the equivalence suite), over
numba_helpers' rows_case and dense_case (every output step the planner builds; the specialized kernels take
those without a lut, and refuse the rest, the others' block ranges and per-sample scales).
Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples."""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cvm.interp.numba_kernels import calls, dense16, fused, row_twins, rows_case
from cvm.interp.numba_kernels.gemv_i32 import dense_rows_i32
from cvm.interp.numba_kernels.kargs import HAS_RESIDUAL, LUT1, LUT2
from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING
from numba_helpers import SETTINGS, dense_case, needs_vnni, rows_case as rows_call

ANY_K = dataclasses.replace(DEFAULT_TUNING, max_dense_k=1 << 20)  # (the twins' own K limit not under test)


def _takes(ost, res, out) -> bool:
    """Whether the specialized kernels serve this output step: no lut; a residual shaped like out."""
    return ost[LUT1] == 0 and ost[LUT2] == 0 and (ost[HAS_RESIDUAL] == 0 or res.shape == out.shape)


@SETTINGS
@given(rows_call(), st.booleans())
def test_flat_mul_rows_equal_fused_mul_rows(case, one_multiplier):
    """Per-channel multipliers (tiled) and one multiplier a stage (the scalar kernels)."""
    mul, head, (m1, m2, ost, res), out, tail, (b0, b1) = case
    if not mul:
        return
    if one_multiplier:
        m1, m2 = np.full_like(m1, m1[0]), np.full_like(m2, m2[0])
    got = out.copy()
    call = row_twins.mul_case(calls.call(fused.mul_rows, *head, m1, m2, ost, res, got, *tail, b0, b1), ANY_K)
    whole = tail[0] == 1 and (b0, b1) == (0, 1) and head[0].shape[0] <= fused.BLOCK_ROWS
    assert (call is not None) == (whole and _takes(ost, res, out))
    if call is None:
        return
    want = out.copy()
    fused.mul_rows(*head, m1, m2, ost, res, want, *tail, b0, b1)
    call[0](*call[1])
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(dense_case(), st.booleans())
def test_flat_dense_equals_dense_rows_i32(case, wide):
    """Any width (flat, multipliers tiled) and widths of 64 channels (row by row: Tuning.rowwise)."""
    x, w, bias, m1, m2, ost, res, out = _channels_of(case, 64) if wide else case
    got = out.copy()
    call = _dense(calls.call(dense_rows_i32, x, w, bias, m1, m2, ost, res, got, np.empty(out.shape, np.int32)))
    assert (call is not None) == _takes(ost, res, out)
    if call is None:
        return
    assert (call[0] in (rows_case.dense_row_p, rows_case.dense_row_r)) == (out.shape[1] % 64 == 0)
    want = out.copy()
    dense_rows_i32(x, w, bias, m1, m2, ost, res, want, np.empty(out.shape, np.int32))
    call[0](*call[1])
    np.testing.assert_array_equal(got, want)


def _dense(c):
    """rows_case's kernel for a dense layer's call (row by row where Tuning.rowwise takes it, else flat),
    or None."""
    return row_twins.dense_row(c, ANY_K) or row_twins.dense_flat(c, ANY_K)


def _channels_of(case, multiple: int):
    """The case with its output channels repeated up to a multiple of `multiple` (32: dense16's panels
    unpadded, as the specialized kernels need; 64: the row-by-row output step)."""
    x, w, bias, m1, m2, ost, res, out = case
    og = out.shape[1]
    idx = np.arange(-(-og // multiple) * multiple) % og
    res = res[:, idx] if res.shape == out.shape else res
    c = np.ascontiguousarray
    return x, c(w[:, idx]), c(bias[:, idx]), c(m1[:, idx]), c(m2[:, idx]), ost, c(res), c(out[:, idx])


@needs_vnni
@SETTINGS
@given(dense_case(), st.sampled_from([32, 64]))
def test_flat_dense16_equals_dense_vnni16(case, multiple):
    x, w, bias, m1, m2, ost, res, out = _channels_of(case, multiple)
    rows, k = x.shape[0], x.shape[3]
    if k < 2:
        return
    x16 = x.reshape(rows, k).astype(np.int16)
    wp, last = dense16.pack_weights(w[0].astype(np.int16))
    b = np.zeros(last.shape[0], np.int32)
    b[:bias.shape[1]] = bias[0]
    geo = np.zeros(14, np.int64)
    got = out.copy()
    call = _dense(calls.call(dense16.dense_vnni16, x16, wp, last, b, m1[0], m2[0], ost, res, got, geo, 0, 1))
    assert (call is not None) == (_takes(ost, res, out) and b.shape[0] == out.shape[1])
    if call is None:
        return
    want = out.copy()
    dense16.dense_vnni16(x16, wp, last, b, m1[0], m2[0], ost, res, want, geo, 0, 1)
    call[0](*call[1])
    np.testing.assert_array_equal(got, want)
