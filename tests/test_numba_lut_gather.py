"""The AVX-512 gather twin of a requant -> lut row chain (numba_kernels.lut_gather.copy_rows_g, picked by
rows_lean.translate_row in the whole-plan program) writes what fused.copy_rows writes, byte for byte,
over the output steps it takes (one lut, no residual: every clamp, table, block range, channel offset,
input width and row count of test_numba_rows_lean's cases), and is not picked for the others.
Skipped where the host has no AVX-512 VNNI (the twin is never picked there)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from cvm.interp import numba as nb
from cvm.interp.numba_kernels import fused, rows_lean
from cvm.interp.numba_kernels.kargs import HAS_RESIDUAL, LUT1
from test_numba_equivalence import SETTINGS
from test_numba_rows_lean import rows_case

pytestmark = pytest.mark.skipif(not nb.host_has_vnni(), reason="no AVX-512 VNNI on this host")


@SETTINGS
@given(rows_case())
def test_gather_twin_equals_copy_rows(case):
    mul, head, (m1, m2, ost, res), out, tail, (b0, b1) = case
    kernel = fused.mul_rows if mul else fused.copy_rows
    got = out.copy()
    twin = rows_lean._gather_twin(kernel, (*head, m1, m2, ost, res, got, *tail, b0, b1))
    takes = not mul and ost[LUT1] != 0 and ost[HAS_RESIDUAL] == 0
    assert (twin is not None) == takes
    if twin is None:
        return
    want = out.copy()
    fused.copy_rows(*head, m1, m2, ost, res, want, *tail, b0, b1)
    twin[0](*twin[1])
    np.testing.assert_array_equal(got, want)
