"""The VNNI conv/dense for a few output pixels (a recurrent cell's dense layers at batch 1): one
pixel x 16 channels per accumulator, for the whole-plan runner.

vnni.conv_vnni computes tiles of 6 (or 8) pixels: for one pixel it does six pixels' work (the
tile's other rows repeat the last pixel) and allocates its scratch, about half a microsecond for
the LSTM fixture's 128 x 32 dense layers. This kernel reads the same padded uint8 input, packed
weights and folded bias (layout in vnni.py), runs the same vpdpbusd over the same bytes in the same
order for each pixel and panel, and ends with the same output step (step.out_rows), so it writes
what padded_conv_vnni writes. row_twins.gemv swaps it in for a padded_conv_vnni call of at most
Tuning.gemv_max_rows pixels that is not split between threads, with its scratch preallocated.
"""
from __future__ import annotations

from numba import njit

from .kargs import V_CG, V_GROUPS, V_OG, V_SEG4, V_USEG, V_USTRIDE, V_VSEG, V_VSTRIDE
from .simd import dpbusd, vbroadcast4, vload, vstore
from .step import out_rows
from .vnni import pixel_bases, to_padded_u8


@njit(cache=True, nogil=True)
def padded_gemv_vnni(x, xp3, pt, pl, z, r0, r1, xp, wp, bias, mult, mult2, ost, res, out, geo, s, bases):
    """padded_conv_vnni's arguments (b0, b1 = the one block) with its scratch: s (rows, lds) int32,
    bases (rows,) int64."""
    to_padded_u8(x, xp3, pt, pl, z, r0, r1)
    rows = out.shape[0]
    groups, cg, og = geo[V_GROUPS], geo[V_CG], geo[V_OG]
    useg, vseg, seg4, ustride, vstride = geo[V_USEG], geo[V_VSEG], geo[V_SEG4], geo[V_USTRIDE], geo[V_VSTRIDE]
    lds = bias.shape[1]
    nv = lds // 16
    ldw = wp.shape[1] // nv
    xf = xp.reshape(xp.size)
    pixel_bases(0, rows, geo, bases, 0)
    for g in range(groups):
        wg, bg, off = wp[g], bias[g], g * cg
        for m in range(rows):
            a = bases[m] + off
            for j in range(nv):
                c = vload(bg, 16 * j)
                w0 = j * ldw
                for u in range(useg):
                    for v in range(vseg):
                        p = a + u * ustride + v * vstride
                        for t in range(seg4):
                            c = dpbusd(c, vbroadcast4(xf, p + 4 * t), vload(wg, w0))
                            w0 += 64
                vstore(s, m * lds + 16 * j, c)
        out_rows(s, rows, out, 0, g * og, mult[g], mult2[g], ost, res)
