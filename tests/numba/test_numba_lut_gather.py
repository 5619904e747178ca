"""The AVX-512 gather twin of a requant -> lut row chain (numba_kernels.lut_gather.copy_rows_g, picked by
row_twins' gather choosers in the whole-plan program) writes what fused.copy_rows writes, byte for byte,
over the output steps it takes (one lut, no residual: every clamp, table, block range, channel offset,
input width and row count of numba_helpers.rows_case), and is not picked for the others.
Skipped where the host has no AVX-512 VNNI (the twin is never picked there)."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cvm.interp.numba_kernels import fused, row_twins
from cvm.interp.numba_kernels.calls import call
from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING
from cvm.interp.numba_kernels.kargs import HAS_RESIDUAL, LUT1
from numba_helpers import SETTINGS, needs_vnni, rows_case

pytestmark = needs_vnni


@SETTINGS
@given(rows_case(), st.booleans(), st.booleans())
def test_gather_twin_equals_copy_rows(case, one_multiplier, special):
    """Per-channel multipliers (copy_rows_g) and one multiplier for every channel (copy_flat_g, where
    the call is one block written whole and Tuning.special is on)."""
    mul, head, (m1, m2, ost, res), out, tail, (b0, b1) = case
    if one_multiplier:
        m1 = np.full_like(m1, m1[0])
    kernel = fused.mul_rows if mul else fused.copy_rows
    got = out.copy()
    c = call(kernel, *head, m1, m2, ost, res, got, *tail, b0, b1)
    twin = None if mul else (special and row_twins.gather_flat(c, DEFAULT_TUNING)) or row_twins.gather(c, DEFAULT_TUNING)
    takes = not mul and ost[LUT1] != 0 and ost[HAS_RESIDUAL] == 0
    assert (twin is not None) == takes
    if twin is None:
        return
    want = out.copy()
    fused.copy_rows(*head, m1, m2, ost, res, want, *tail, b0, b1)
    twin[0](*twin[1])
    np.testing.assert_array_equal(got, want)


def test_a_gate_chain_of_one_multiplier_takes_the_flat_kernel():
    """A recurrent gate's call (8 rows of 96 int32 sums, one multiplier, a 12-bit table) runs as
    copy_flat_g and writes what fused.copy_rows writes."""
    from cvm.interp.numba_kernels.lut_gather import copy_flat_g
    from cvm.interp.numba_kernels.plan import OPEN_HI, OPEN_LO, OutputStep
    rng = np.random.default_rng(0)
    x = rng.integers(-(1 << 20), 1 << 20, (8, 96)).astype(np.int32)
    mult = np.full(96, 3001, np.int64)
    table = rng.integers(-2047, 2048, 4095).astype(np.int64)
    ost = OutputStep(mult, 20, -2047, 2047, None, np.ones(96, np.int64), 0, OPEN_LO, OPEN_HI, "y", (), table,
                     -2047, None, 0).params()
    res = np.zeros((1, 1), np.int16)
    want, got = np.zeros((8, 96), np.int16), np.zeros((8, 96), np.int16)
    fused.copy_rows(x, mult, mult, ost, res, want, np.int64(0), 0, 1)
    fn, args = row_twins.gather_flat(call(fused.copy_rows, x, mult, mult, ost, res, got, np.int64(0), 0, 1),
                                     DEFAULT_TUNING)
    assert fn is copy_flat_g
    fn(*args)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 100
