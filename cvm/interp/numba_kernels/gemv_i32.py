"""The portable int32 dense of a few rows (a recurrent cell's dense layers at batch 1 with int16
inputs, or on the portable ISA), for the whole-plan runner.

conv.conv_i32 packs its input rows into a buffer (im2col) and allocates that buffer and its int32
scratch on every call; for a dense layer (a 1x1 input, one group, K = C) a row of the input is already
the packed row (conv_i32 packs with offset 0). This kernel computes each accumulator with conv's own
_dot_i32 (int32, the planner proved every partial sum fits: the same values as the tiled GEMM) straight
from the input, then the same output step (conv.out_rows), on a scratch `translate` allocates once.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import BLOCK_ROWS, _dot_i32, conv_i32, out_rows
from .kargs import GROUPS, KH, KW, OH, OW, PL, PT


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


def translate(fn, args, max_rows: int) -> tuple | None:
    """(dense_rows_i32, args) for a conv_i32 call that is a dense layer of at most max_rows rows
    (Tuning.gemv_max_rows, as gemv_vnni) run whole, else None."""
    if fn is not conv_i32:
        return None
    x, w, bias, mult, mult2, ost, res, out, geo, b0, b1 = args
    rows = out.shape[0]
    # a dense layer: one pixel in, one tap, one pixel out, and that tap on the pixel (not in the padding)
    dense = (geo[KH] == geo[KW] == geo[OH] == geo[OW] == geo[GROUPS] == 1 and x.shape[1:3] == (1, 1)
             and geo[PT] == geo[PL] == 0
             and x.shape[0] == rows and w.shape[2] == x.shape[3] and x.flags.c_contiguous)
    if not dense or not 0 < rows <= min(max_rows, BLOCK_ROWS) or (b0, b1) != (0, 1):
        return None
    s = np.empty((rows, w.shape[1]), np.int32)
    return dense_rows_i32, (x, w, bias, mult, mult2, ost, res, out, s)
