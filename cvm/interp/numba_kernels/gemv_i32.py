"""The portable int32 dense of a few rows (a recurrent cell's dense layers at batch 1 with int16
inputs, or on the portable ISA), for the whole-plan runner.

conv.conv_i32 packs its input rows into a buffer (im2col) and allocates that buffer and its int32
scratch on every call; for a dense layer (a 1x1 input, one group, K = C) a row of the input is already
the packed row (conv_i32 packs with offset 0). This kernel computes each accumulator with conv's own
_dot_i32 (int32, the planner proved every partial sum fits: the same values as the tiled GEMM) straight
from the input, then the same output step (step.out_rows), on a scratch row_twins.gemv_i32 allocates once.
"""
from __future__ import annotations

from numba import njit

from .conv import _dot_i32
from .step import out_rows


@njit(cache=True, nogil=True)
def dense_rows_i32(x, w, bias, mult, mult2, ost, res, out, s):
    """conv_i32 of a dense layer: x (rows, 1, 1, K), w (1, og, K), bias (1, og); s (rows, og) int32."""
    rows, k = out.shape[0], w.shape[2]
    xf = x.reshape(rows, k)
    wg, bg = w[0], bias[0]
    for m in range(rows):
        xr, sr = xf[m], s[m]
        for n in range(wg.shape[0]):
            sr[n] = _dot_i32(xr, wg[n], bg[n])
    out_rows(s, rows, out, 0, 0, mult[0], mult2[0], ost, res)
