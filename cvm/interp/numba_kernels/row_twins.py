"""Bind-time choosers of the whole-plan program's row twins (the Python half of rows_lean and rows_case,
whose files hold only the compiled kernels): `translate_row` for fused.mul_rows / copy_rows calls (the
gather twin, rows_case's flat kernels, rows_lean's one-pass or scratch twins), `translate` for the small
dense layers (rows_case's, else rows_lean's), and rows_case's `case` / `mul_rows` / `dense_rows` /
`dense16_rows`: the specialized call, or None where another kernel serves it.
"""
from __future__ import annotations

import numpy as np

from . import kargs
from .dense16 import BLOCK_ROWS as DENSE16_BLOCK_ROWS, dense_vnni16
from .fused import BLOCK_ROWS, copy_rows, mul_rows as fused_mul_rows
from .kargs import HAS_RESIDUAL, LUT1, LUT2
from .rows_case import (dense16_flat_p, dense16_flat_r, dense16_row_p, dense16_row_r, dense_flat_p, dense_flat_r,
                        dense_row_p, dense_row_r, mul_flat_p, mul_flat_p1, mul_flat_r, mul_flat_r1)
from .rows_lean import copy_rows_f, copy_rows_l, dense16_rows_l, dense_rows_l, mul_rows_f, mul_rows_l
from .simd import host_has_vnni
from .tuning import DEFAULT_TUNING, Tuning

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


def mul_rows(args) -> tuple | None:
    """The flat kernel call for a fused.mul_rows call, or None."""
    x, sc, mult, mult2, ost, res, out, hw, b0, b1 = args
    rows, c = x.shape
    if (k := case(ost)) is None or hw != 1 or not _whole(rows, b0, b1) or out.shape != x.shape:
        return None
    if any(_flat(a) is None for a in (x, sc, out)) or sc.shape != x.shape:
        return None
    m, m2 = uniform(mult), uniform(mult2)
    if k == "p":
        if m is not None:
            return mul_flat_p1, (x.reshape(-1), sc.reshape(-1), m, ost, out.reshape(-1))
        return mul_flat_p, (x.reshape(-1), sc.reshape(-1), _tile(mult, rows), ost, out.reshape(-1))
    if res.shape != out.shape or not res.flags.c_contiguous:
        return None
    if m is not None and m2 is not None:
        return mul_flat_r1, (x.reshape(-1), sc.reshape(-1), m, m2, ost, res.reshape(-1), out.reshape(-1))
    return mul_flat_r, (x.reshape(-1), sc.reshape(-1), _tile(mult, rows), _tile(mult2, rows), ost, res.reshape(-1),
                        out.reshape(-1))


def _rowwise(og: int, tuning: Tuning) -> bool:
    """A dense layer's output step row by row (multipliers untiled): Tuning.rowwise, og a multiple of
    Tuning.row_width."""
    return tuning.rowwise and og % tuning.row_width == 0


def dense_rows(args, tuning: Tuning = DEFAULT_TUNING) -> tuple | None:
    """The flat kernel call for a gemv_i32.dense_rows_i32 call (rows_lean's K <= 4 twin), or None."""
    x, w, bias, mult, mult2, ost, res, out, s = args
    rows, og = out.shape
    if (k := case(ost)) is None or not out.flags.c_contiguous or s.shape != out.shape:
        return None
    wt = np.ascontiguousarray(w[0].T)
    if _rowwise(og, tuning):
        if k == "p":
            return dense_row_p, (x, wt, bias, mult[0], ost, out, s)
        if res.shape != out.shape or not res.flags.c_contiguous:
            return None
        return dense_row_r, (x, wt, bias, mult[0], mult2[0], ost, res, out, s)
    if k == "p":
        return dense_flat_p, (x, wt, bias, _tile(mult[0], rows), ost, out.reshape(-1), s, s.reshape(-1))
    if res.shape != out.shape or not res.flags.c_contiguous:
        return None
    return dense_flat_r, (x, wt, bias, _tile(mult[0], rows), _tile(mult2[0], rows), ost, res.reshape(-1),
                          out.reshape(-1), s, s.reshape(-1))


def dense16_rows(args, tuning: Tuning = DEFAULT_TUNING) -> tuple | None:
    """The flat kernel call for a dense16.dense_vnni16 call of one block, or None."""
    x, wp, last, bias, mult, mult2, ost, res, out, geo, b0, b1 = args
    rows, og = out.shape
    if (k := case(ost)) is None or not out.flags.c_contiguous or bias.shape[0] != og:
        return None
    s = np.empty((rows, og), np.int32)
    if _rowwise(og, tuning):
        if k == "p":
            return dense16_row_p, (x, wp, last, bias, mult, ost, out, s)
        if res.shape != out.shape or not res.flags.c_contiguous:
            return None
        return dense16_row_r, (x, wp, last, bias, mult, mult2, ost, res, out, s)
    if k == "p":
        return dense16_flat_p, (x, wp, last, bias, _tile(mult, rows), ost, out.reshape(-1), s, s.reshape(-1))
    if res.shape != out.shape or not res.flags.c_contiguous:
        return None
    return dense16_flat_r, (x, wp, last, bias, _tile(mult, rows), _tile(mult2, rows), ost, res.reshape(-1),
                            out.reshape(-1), s, s.reshape(-1))


def translate_row(fn, args, tuning: Tuning) -> tuple | None:
    """The twin call for a fused.mul_rows / copy_rows call, else None (or with tuning.lean off): the
    gather twin (tuning.gather), rows_case's (tuning.special), one pass for up to tuning.lean_max_rows
    rows, or the same loops on a scratch allocated here, once, with finish_rows."""
    if not tuning.lean or (fn is not fused_mul_rows and fn is not copy_rows):
        return None
    if tuning.gather and (g := _gather_twin(fn, args, tuning.special)) is not None:
        return g
    if fn is fused_mul_rows and tuning.special and (flat := mul_rows(args)) is not None:
        return flat
    if args[0].shape[0] <= tuning.lean_max_rows:
        return (mul_rows_l if fn is fused_mul_rows else copy_rows_l), args
    x = args[0]
    s = np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32)
    return (mul_rows_f if fn is fused_mul_rows else copy_rows_f), (*args, s)


def _gather_twin(fn, args, special: bool) -> tuple | None:
    """(lut_gather.copy_rows_g, args + its scratch row and int32 table) for a copy_rows call whose
    output step is one lut and no residual, on a host with AVX-512 (numba compiling for it); else None.
    special: the flat form (copy_flat_g) for one block of one multiplier."""
    ost = args[3]
    if not (fn is copy_rows and ost[LUT1] != 0 and ost[HAS_RESIDUAL] == 0 and host_has_vnni()):
        return None
    from .lut_gather import copy_flat_g, copy_rows_g
    if np.abs(ost[ost[LUT1]:]).max(initial=0) >= 1 << 31:
        return None
    x, mult, out, c0, b0, b1 = args[0], args[1], args[5], args[6], args[7], args[8]
    if (special and (m := uniform(mult)) is not None and x.flags.c_contiguous
            and out.flags.c_contiguous and out.shape == x.shape and int(c0) == 0
            and (int(b0), int(b1)) == (0, 1) and x.shape[0] <= BLOCK_ROWS):
        return copy_flat_g, (x.reshape(-1), m, ost, out.reshape(-1), np.empty(x.size, np.int32), ost.astype(np.int32))
    return copy_rows_g, (*args, np.empty((min(BLOCK_ROWS, x.shape[0]), x.shape[1]), np.int32), ost.astype(np.int32))


def translate(call: tuple, tuning: Tuning) -> tuple:
    """call (fn, args), as the whole-plan runner translated it, or its one-pass twin (tuning.lean;
    rows_case's where tuning.special)."""
    from .gemv_i32 import dense_rows_i32
    fn, args = call
    special = tuning.special
    if tuning.lean and fn is dense_vnni16 and args[8].shape[0] <= DENSE16_BLOCK_ROWS and tuple(args[10:12]) == (0, 1):
        return (special and dense16_rows(args, tuning)) or (
            dense16_rows_l, (*args, np.empty((args[8].shape[0], args[3].shape[0]), np.int32)))
    if tuning.lean and fn is dense_rows_i32 and args[1].shape[2] <= tuning.max_dense_k:
        return (special and dense_rows(args, tuning)) or (dense_rows_l, args)
    return call
