"""The whole-plan program's small-call twins, chosen at bind time (variants.VARIANTS lists them in
order, each with its Tuning switches): each chooser takes the bound Call it may replace (reading its
arguments by name) and the Tuning, and returns the twin's Call, or None where another kernel serves
it. gemv_vnni's and gemv_i32's kernels for a dense layer of a few pixels; lut_gather's for a copy_rows
whose output step is one lut; rows_case's (flat, specialized by output step: `case`) and rows_lean's
(one pass, or a scratch row) for the row kernels and the small dense layers.
"""
from __future__ import annotations

import numpy as np

from . import kargs
from .calls import Call, call, twin
from .conv import BLOCK_ROWS as CONV_BLOCK_ROWS
from .dense16 import BLOCK_ROWS as DENSE16_BLOCK_ROWS
from .dense16 import dense_vnni16
from .fused import BLOCK_ROWS, mul_rows
from .gemv_i32 import dense_rows_i32
from .gemv_vnni import padded_gemv_vnni
from .kargs import GROUPS, HAS_RESIDUAL, KH, KW, LUT1, LUT2, OH, OW, PL, PT
from .rows_case import (dense16_flat_p, dense16_flat_r, dense16_row_p, dense16_row_r, dense_flat_p, dense_flat_r,
                        dense_row_p, dense_row_r, mul_flat_p, mul_flat_p1, mul_flat_r, mul_flat_r1)
from .rows_lean import copy_rows_f, copy_rows_l, dense16_rows_l, dense_rows_l, mul_rows_f, mul_rows_l
from .simd import host_has_vnni
from .tuning import Tuning

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def case(ost: np.ndarray) -> str | None:
    """"p", "r" or None (a lut, or a residual that is requantized first: rows_lean's general loops)."""
    if ost[LUT1] != 0 or ost[LUT2] != 0:
        return None
    if ost[HAS_RESIDUAL] == 0:
        return "p"
    if "rmul" in kargs.OST:  # (a residual requant: only where the planner absorbed one)
        f = {n: int(ost[kargs.OST.index(n)]) for n in ("rmul", "rshift", "rlo", "rhi")}
        if not (f["rmul"] == 1 and f["rshift"] == 0 and f["rlo"] <= INT32_MIN and f["rhi"] >= INT32_MAX):
            return None
    return "r"


def _tile(m: np.ndarray, rows: int) -> np.ndarray:
    return np.ascontiguousarray(np.tile(m.reshape(-1), rows))


def uniform(mult: np.ndarray) -> int | None:
    """The one multiplier of every channel, or None when they differ."""
    m = mult.reshape(-1)
    return int(m[0]) if m.size and (m == m[0]).all() else None


def _flat(a: np.ndarray) -> np.ndarray | None:
    return a.reshape(-1) if a.flags.c_contiguous else None


def _whole(rows: int, b0, b1) -> bool:
    """One block, run whole (the flat kernels ignore block ranges: they serve single calls)."""
    return rows <= BLOCK_ROWS and (int(b0), int(b1)) == (0, 1)


def _residual_flat(res, out) -> bool:
    return res.shape == out.shape and res.flags.c_contiguous


# ------------------------------------------------------------------ a dense layer of a few pixels

def gemv(c: Call, tuning: Tuning) -> Call | None:
    """gemv_vnni.padded_gemv_vnni for a vnni.padded_conv_vnni call of at most Tuning.gemv_max_rows output
    pixels run whole (one block, every padded row), with its scratch."""
    a = c.args
    rows = a.out.shape[0]
    if (not 0 < rows <= tuning.gemv_max_rows or (a.b0, a.b1) != (0, 1)
            or (a.r0, a.r1) != (0, a.xp3.shape[0] * a.xp3.shape[1])):
        return None
    return twin(padded_gemv_vnni, a, s=np.empty((rows, a.bias.shape[1]), np.int32), bases=np.empty(rows, np.int64))


def gemv_i32(c: Call, tuning: Tuning) -> Call | None:
    """gemv_i32.dense_rows_i32 for a conv.conv_i32 call that is a dense layer of at most
    Tuning.gemv_max_rows rows run whole: one pixel in, one tap, one pixel out, that tap on the pixel."""
    a = c.args
    x, w, geo, rows = a.x, a.w, a.geo, a.out.shape[0]
    dense = (geo[KH] == geo[KW] == geo[OH] == geo[OW] == geo[GROUPS] == 1 and x.shape[1:3] == (1, 1)
             and geo[PT] == geo[PL] == 0 and x.shape[0] == rows and w.shape[2] == x.shape[3] and x.flags.c_contiguous)
    if not dense or not 0 < rows <= min(tuning.gemv_max_rows, CONV_BLOCK_ROWS) or (a.b0, a.b1) != (0, 1):
        return None
    return twin(dense_rows_i32, a, s=np.empty((rows, w.shape[1]), np.int32))


# ------------------------------------------------------------------ fused.mul_rows / copy_rows

def gather_flat(c: Call, tuning: Tuning) -> Call | None:
    """lut_gather.copy_flat_g for a copy_rows call of one block, one multiplier, whose output step is one
    lut and no residual (AVX-512)."""
    a = c.args
    x, out = a.x, a.out
    if (not _gathers(a.ost) or (m := uniform(a.mult)) is None or not x.flags.c_contiguous
            or not out.flags.c_contiguous or out.shape != x.shape or int(a.c0) != 0 or not _whole(x.shape[0], a.b0, a.b1)):
        return None
    from .lut_gather import copy_flat_g
    return call(copy_flat_g, x.reshape(-1), m, a.ost, out.reshape(-1), np.empty(x.size, np.int32), a.ost.astype(np.int32))


def gather(c: Call, tuning: Tuning) -> Call | None:
    """lut_gather.copy_rows_g (its scratch row and int32 table added) for a copy_rows call whose output
    step is one lut and no residual (AVX-512)."""
    a = c.args
    if not _gathers(a.ost):
        return None
    from .lut_gather import copy_rows_g
    return twin(copy_rows_g, a, s=np.empty((min(BLOCK_ROWS, a.x.shape[0]), a.x.shape[1]), np.int32),
                ost32=a.ost.astype(np.int32))


def _gathers(ost) -> bool:
    return (ost[LUT1] != 0 and ost[HAS_RESIDUAL] == 0 and host_has_vnni()
            and np.abs(ost[ost[LUT1]:]).max(initial=0) < 1 << 31)


def mul_case(c: Call, tuning: Tuning) -> Call | None:
    """rows_case's flat kernel for a fused.mul_rows call of one block (per-channel or one multiplier)."""
    a = c.args
    x, sc, ost, out, res = a.x, a.sc, a.ost, a.out, a.res
    rows = x.shape[0]
    if (k := case(ost)) is None or a.hw != 1 or not _whole(rows, a.b0, a.b1) or out.shape != x.shape:
        return None
    if any(_flat(v) is None for v in (x, sc, out)) or sc.shape != x.shape:
        return None
    m, m2 = uniform(a.mult), uniform(a.mult2)
    xf, sf, of = x.reshape(-1), sc.reshape(-1), out.reshape(-1)
    if k == "p":
        if m is not None:
            return call(mul_flat_p1, xf, sf, m, ost, of)
        return call(mul_flat_p, xf, sf, _tile(a.mult, rows), ost, of)
    if not _residual_flat(res, out):
        return None
    if m is not None and m2 is not None:
        return call(mul_flat_r1, xf, sf, m, m2, ost, res.reshape(-1), of)
    return call(mul_flat_r, xf, sf, _tile(a.mult, rows), _tile(a.mult2, rows), ost, res.reshape(-1), of)


def lean(c: Call, tuning: Tuning) -> Call | None:
    """rows_lean's one-pass twin (mul_rows_l / copy_rows_l) for up to Tuning.lean_max_rows rows."""
    if c.args.x.shape[0] > tuning.lean_max_rows:
        return None
    return twin(mul_rows_l if c.fn is mul_rows else copy_rows_l, c.args)


def lean_scratch(c: Call, tuning: Tuning) -> Call | None:
    """rows_lean's twin on a scratch allocated here, once (mul_rows_f / copy_rows_f)."""
    x = c.args.x
    s = np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32)
    return twin(mul_rows_f if c.fn is mul_rows else copy_rows_f, c.args, s=s)


# ------------------------------------------------------------------ the small dense layers

def _dense_in(c: Call, tuning: Tuning) -> bool:
    """A dense layer the twins below take: gemv_i32's of at most Tuning.max_dense_k inputs, or a
    dense16.dense_vnni16 call of one block."""
    a = c.args
    if c.fn is dense_rows_i32:
        return a.w.shape[2] <= tuning.max_dense_k
    return a.out.shape[0] <= DENSE16_BLOCK_ROWS and (a.b0, a.b1) == (0, 1)


def _rowwise(og: int, tuning: Tuning) -> bool:
    """A dense layer's output step row by row (multipliers untiled): Tuning.rowwise, og a multiple of
    Tuning.row_width."""
    return tuning.rowwise and og % tuning.row_width == 0


def dense_row(c: Call, tuning: Tuning) -> Call | None:
    """rows_case's row-by-row kernel (dense_row_* / dense16_row_*) for a dense layer whose width is a
    multiple of Tuning.row_width."""
    if not _dense_in(c, tuning) or (k := _dense_case(c)) is None or not _rowwise(c.args.out.shape[1], tuning):
        return None
    a, dense16 = c.args, c.fn is dense_vnni16
    if k == "r" and not _residual_flat(a.res, a.out):
        return None
    kern = {("p", False): dense_row_p, ("r", False): dense_row_r, ("p", True): dense16_row_p,
            ("r", True): dense16_row_r}[k, dense16]
    if dense16:
        return twin(kern, a, s=np.empty(a.out.shape, np.int32))
    return twin(kern, a, wt=np.ascontiguousarray(a.w[0].T), mult=a.mult[0], mult2=a.mult2[0])


def dense_flat(c: Call, tuning: Tuning) -> Call | None:
    """rows_case's flat kernel (dense_flat_* / dense16_flat_*): the multipliers tiled to every row."""
    if not _dense_in(c, tuning) or (k := _dense_case(c)) is None:
        return None
    a, dense16 = c.args, c.fn is dense_vnni16
    if k == "r" and not _residual_flat(a.res, a.out):
        return None
    rows = a.out.shape[0]
    s = np.empty(a.out.shape, np.int32) if dense16 else a.s
    mult, mult2 = (a.mult, a.mult2) if dense16 else (a.mult[0], a.mult2[0])
    named = dict(mult=_tile(mult, rows), mult2=_tile(mult2, rows), res=a.res.reshape(-1), out=a.out.reshape(-1),
                 s=s, sf=s.reshape(-1))
    if dense16:
        return twin(dense16_flat_p if k == "p" else dense16_flat_r, a, **named)
    return twin(dense_flat_p if k == "p" else dense_flat_r, a, wt=np.ascontiguousarray(a.w[0].T), **named)


def _dense_case(c: Call) -> str | None:
    """case(ost) where the dense layer's operands let a rows_case kernel take it (out contiguous; gemv_i32's
    scratch of out's shape, dense16's bias of out's width)."""
    a = c.args
    ok = a.bias.shape[0] == a.out.shape[1] if c.fn is dense_vnni16 else a.s.shape == a.out.shape
    return case(a.ost) if a.out.flags.c_contiguous and ok else None


def dense_lean(c: Call, tuning: Tuning) -> Call | None:
    """rows_lean's dense_rows_l (gemv_i32's dense layer) or dense16_rows_l (with its scratch)."""
    if not _dense_in(c, tuning):
        return None
    a = c.args
    if c.fn is dense_rows_i32:
        return twin(dense_rows_l, a)
    return twin(dense16_rows_l, a, s=np.empty((a.out.shape[0], a.bias.shape[0]), np.int32))
