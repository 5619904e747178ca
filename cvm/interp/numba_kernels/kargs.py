"""The layouts of the kernels' int64 argument arrays, with named indices: one place that says what
`geo[9]` is, for every kernel that reads it. Kernels index with these module constants (numba folds
them at compile time); planners build the arrays with `pack`, by name.

GEO    portable MAC and pooling kernels (conv.py, pool.py): the window, then the GEMM's sizes
VGEO   the VNNI kernel (vnni.py): the window over the padded input, the padded sizes, the tap runs
DGEO   the VNNI depthwise kernel (dw_vnni.py): the window over the padded input, the padded sizes
OST    the fused output step (plan.OutputStep, step.out_rows); its lookup tables follow the fields
"""
from __future__ import annotations

import numpy as np

WINDOW = ("kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl")  # kernel, strides, dilations, pads before
GEO = WINDOW + ("groups", "cg", "og", "k", "oh", "ow")  # k = kh*kw*cg, the summed length
KH, KW, SH, SW, DH, DW, PT, PL, GROUPS, CG, OG, K, OH, OW = range(len(GEO))

VGEO = ("kh", "kw", "sh", "sw", "dh", "dw", "groups", "cg", "og", "oh", "ow", "hp", "wp", "c",
        "useg", "vseg", "seg4", "ustride", "vstride")  # hp, wp: padded input; runs of taps (vnni.runs)
(V_KH, V_KW, V_SH, V_SW, V_DH, V_DW, V_GROUPS, V_CG, V_OG, V_OH, V_OW, V_HP, V_WP, V_C,
 V_USEG, V_VSEG, V_SEG4, V_USTRIDE, V_VSTRIDE) = range(len(VGEO))

DGEO = ("kh", "kw", "sh", "sw", "dh", "dw", "oh", "ow", "hp", "wp", "c", "nq")  # hp, wp: the padded
# input; nq: quads of taps per kernel row, ceil(kw / 4)
D_KH, D_KW, D_SH, D_SW, D_DH, D_DW, D_OH, D_OW, D_HP, D_WP, D_C, D_NQ = range(len(DGEO))

OST = ("rnd", "shift", "lo", "hi", "has_residual", "rnd2", "shift2", "lo2", "hi2",
       "lut1", "lut1_off", "lut2", "lut2_off",  # lutK: index in the array where stage K's table starts (0: none)
       "rmul", "rrnd", "rshift", "rlo", "rhi")  # the residual's own per-tensor requant and clamp (identity:
# 1, 0, 0 and the open clamp), applied to it before the add (plan.OutputStep.res_*; step.out_rows)
(RND, SHIFT, LO, HI, HAS_RESIDUAL, RND2, SHIFT2, LO2, HI2, LUT1, LUT1_OFF, LUT2, LUT2_OFF,
 RMUL, RRND, RSHIFT, RLO, RHI) = range(len(OST))


def pack(layout: tuple[str, ...], **values: int) -> np.ndarray:
    """The int64 array of `layout`, every field given by name (a missing or unknown one is an error)."""
    if set(values) != set(layout):
        raise TypeError(f"fields {sorted(set(layout) ^ set(values))} missing or unknown in {layout}")
    return np.array([int(values[name]) for name in layout], np.int64)
