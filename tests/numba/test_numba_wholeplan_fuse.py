"""wholeplan_fuse: a gate slice read in place by its only reader (lut_gather.copy_cols_g) writes what the
copy (wholeplan_ops.take_runs) then copy_flat_g write, byte for byte; and the peephole takes only a slice
whose value one step reads, immediately after it, from exactly the slice's buffer. The recurrent fixtures
end to end: test_numba_wholeplan. The gather cases are skipped where the host has no AVX-512 VNNI."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cvm.interp.numba_kernels import wholeplan_fuse
from cvm.interp.numba_kernels.calls import call, twin
from cvm.interp.numba_kernels.lut_gather import copy_cols_g, copy_flat_g
from cvm.interp.numba_kernels.kargs import RND2
from cvm.interp.numba_kernels.plan import OPEN_HI, OPEN_LO, OutputStep
from cvm.interp.numba_kernels.wholeplan_ops import take_runs
from numba_helpers import SETTINGS, needs_vnni

GATHERS = needs_vnni


def _gate(rng, w: int, m: int, shift: int) -> np.ndarray:
    table = rng.integers(-2047, 2048, 4095).astype(np.int64)
    return OutputStep(np.full(w, m, np.int64), shift, -2047, 2047, None, np.ones(w, np.int64), 0, OPEN_LO,
                      OPEN_HI, "y", (), table, -2047, None, 0).params()


@GATHERS
@SETTINGS
@given(st.integers(1, 9), st.integers(1, 70), st.integers(0, 40), st.integers(0, 40),
       st.sampled_from([np.int16, np.int32]), st.integers(1, 5000), st.integers(0, 24), st.integers(0, 2**32 - 1))
def test_a_slice_read_in_place_equals_the_copy_then_the_lookups(rows, w, c0, extra, dtype, m, shift, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (rows, c0 + w + extra), endpoint=True).astype(dtype)
    ost = _gate(rng, w, m, shift)
    sliced = np.empty((rows, w), dtype)
    take_runs(x, c0, 1, 1, sliced)
    want, got = np.empty(rows * w, np.int16), np.empty(rows * w, np.int16)
    copy_flat_g(sliced.reshape(-1), m, ost, want, np.empty(rows * w, np.int32), ost.astype(np.int32))
    copy_cols_g(x, c0, m, ost, got, np.empty(rows * w, np.int32), ost.astype(np.int32))
    np.testing.assert_array_equal(got, want)
    if dtype is np.int16:  # out over x (the program may place the reader's output there)
        over = x.reshape(-1)[:rows * w]
        copy_cols_g(x, c0, m, ost, over, np.empty(rows * w, np.int32), ost.astype(np.int32))
        np.testing.assert_array_equal(over, want)


def _pair(rows=8, width=128, c0=32, w=32):
    rng = np.random.default_rng(1)
    x = rng.integers(-(1 << 20), 1 << 20, (rows, width)).astype(np.int32)
    buf = np.empty((rows, w), np.int32)
    ost = _gate(rng, w, 3001, 20)
    dst = np.empty(rows * w, np.int16)
    reader = call(copy_flat_g, buf.reshape(-1), 3001, ost, dst, np.empty(rows * w, np.int32), ost.astype(np.int32))
    return call(take_runs, x, c0, 1, 1, buf), reader, x, buf, dst


@GATHERS
def test_the_peephole_takes_only_a_solo_slice_read_next_from_its_buffer():
    copy, reader, x, buf, dst = _pair()
    solo, shared, step2 = (0, True), (0, False), (1, False)
    (fn, args), = wholeplan_fuse.fuse([(copy, solo), (reader, step2)])
    assert fn is copy_cols_g and args.x is x and args.c0 == 32 and args.out is dst
    assert wholeplan_fuse.fuse([(copy, shared), (reader, step2)]) == [copy, reader]  # another step reads it
    other = twin(copy_flat_g, reader.args, x=np.empty_like(buf).reshape(-1))
    assert wholeplan_fuse.fuse([(copy, solo), (other, step2)]) == [copy, other]  # not its buffer
    strided = call(take_runs, x, 1, 2, 1, buf)
    assert wholeplan_fuse.fuse([(strided, solo), (reader, step2)]) == [strided, reader]  # a step of 2
    assert wholeplan_fuse.fuse([(copy, solo)]) == [copy]  # no reader after it
    again = [(copy, solo), (reader, step2), (reader, step2)]  # its step reads the buffer again
    assert wholeplan_fuse.fuse(again) == [copy, reader, reader]
    over = twin(copy_flat_g, reader.args, out=x.reshape(-1)[:dst.size // 2].view(np.int16))
    assert wholeplan_fuse.fuse([(copy, solo), (over, step2)]) == [copy, over]  # its output over the source
    clobber = call(take_runs, np.zeros_like(x), 0, 1, 1, x[:, :32])
    assert wholeplan_fuse.fuse([(copy, solo), (clobber, step2), (reader, (2, False))]) == [copy, clobber, reader]
    fn(*args)
    want = np.empty_like(dst)
    copy.fn(*copy.args)
    reader.fn(*reader.args._replace(out=want))
    np.testing.assert_array_equal(dst, want)


@SETTINGS
@given(st.integers(1, 9), st.integers(1, 70), st.integers(0, 40), st.integers(0, 40), st.booleans(),
       st.integers(1, 1 << 20), st.integers(0, 30), st.integers(0, 2**32 - 1))
def test_a_product_of_a_slice_read_in_place_equals_the_flat_kernel(rows, w, c0, extra, residual, m, shift, seed):
    """rows_case.mul_cols_p1 / mul_cols_r1 == mul_flat_p1 / mul_flat_r1 on the copied slice."""
    from cvm.interp.numba_kernels.rows_case import mul_cols_p1, mul_cols_r1, mul_flat_p1, mul_flat_r1
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32768, (rows, c0 + w + extra)).astype(np.int16)
    sc = rng.integers(-32768, 32768, rows * w).astype(np.int16)
    ost = OutputStep(np.full(w, m, np.int64), shift, -30000, 30000, "r" if residual else None,
                     np.full(w, 7, np.int64), 3, -2047, 2047, "y", ()).params()
    assert not residual or ost[RND2] >= 0
    res = rng.integers(-30000, 30000, rows * w).astype(np.int16)
    sliced = np.ascontiguousarray(x[:, c0:c0 + w]).reshape(-1)
    want, got = np.empty(rows * w, np.int16), np.empty(rows * w, np.int16)
    if residual:
        mul_flat_r1(sliced, sc, m, 7, ost, res, want)
        mul_cols_r1(x, c0, sc, m, 7, ost, res, got)
    else:
        mul_flat_p1(sliced, sc, m, ost, want)
        mul_cols_p1(x, c0, sc, m, ost, got)
    np.testing.assert_array_equal(got, want)
