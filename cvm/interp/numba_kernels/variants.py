"""Every kernel the backend may run in place of another, in one ordered table, as plan.FUSION lists the
fusions: VARIANTS. A row names the variant, the stage that asks for it, the Tuning switches that must
all be on for it (tests/numba/test_tuning.py runs each switch both ways), the kernels it stands in
for, and its chooser: the replacement, or None where the variant does not apply.

Stages, each asked by one caller with its own subject and context:
  "prepare": a MAC step's lower_mac.KernelCall at plan time (lower_mac._gemm_step; context: the
             Planner, the Gemm);
  "bind":    that KernelCall for one output buffer (lower_mac._bind_gemm; context: the Planner, the
             step's output name, the buffer);
  "program": a bound calls.Call in the whole-plan program (wholeplan_ops.translate; no context): the
             small-call twins of row_twins, which read the call's arguments by name.

`choose` applies the first row (in table order) that is on, stands in for the subject's kernel and
answers, then asks again about its answer, until no row answers: so a twin of a twin (gemv_i32's
dense layer, then rows_case's) is two rows, and an earlier row wins over a later one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from . import conv, dense16, dw_vnni, fused, gemv_i32, pad_fuse, row_twins, vnni, vnni_direct
from .kargs import HAS_RESIDUAL, SHIFT
from .tuning import Tuning


@dataclass(frozen=True)
class Variant:
    name: str
    stage: str  # "prepare" | "bind" | "program"
    switches: tuple[str, ...]  # Tuning fields that must all be on
    replaces: tuple  # the kernels it stands in for
    choose: Callable  # (subject, tuning, *context) -> the replacement subject, or None


def _kernel(subject):
    return getattr(subject, "kern", None) or subject.fn


def choose(stage: str, subject, tuning: Tuning, *context):
    """subject (a KernelCall, or a Call) with the variants of `stage` chosen (see the module's text)."""
    while True:
        kern = _kernel(subject)
        for v in VARIANTS:
            if (v.stage == stage and any(kern is k for k in v.replaces) and all(getattr(tuning, s) for s in v.switches)
                    and (chosen := v.choose(subject, tuning, *context)) is not None):
                subject = chosen
                break
        else:
            return subject


# ------------------------------------------------------------------ "prepare": a MAC step's kernel

def _direct(kc, tuning: Tuning, p, m):
    """vnni_direct.conv_vnni_direct (the output step on the accumulators) where the output step has no
    lookup and no residual (vnni_direct.eligible)."""
    params = m.tail[2]
    if params[HAS_RESIDUAL] or not vnni_direct.eligible(params, m.gm["oh"] * m.gm["ow"], tuning.gemv_max_rows):
        return None
    return _direct_call(kc, vnni_direct.conv_vnni_direct, vnni_direct.NO_RQ, m)


def _direct_res(kc, tuning: Tuning, p, m):
    """vnni_direct.conv_vnni_direct_res where the step adds a residual tensor of at most 16 bits whose
    stage has an exact int32 form (vnni_direct.residual_stage): mult2 becomes that stage's requants."""
    _, mult2, params = m.tail
    if (not params[HAS_RESIDUAL] or not vnni_direct.eligible(params, m.gm["oh"] * m.gm["ow"], tuning.gemv_max_rows)
            or m.res is None or m.res.dtype.itemsize > 2):  # (a constant residual, or one of more than 16 bits)
        return None
    rq = vnni_direct.residual_stage(params, mult2, m.res.lo, m.res.hi, tuning)
    return None if rq is None else _direct_call(kc, vnni_direct.conv_vnni_direct_res, rq, m)


def _direct_call(kc, kern, rq, m):
    """conv_vnni's prepared arguments for vnni_direct's kern: the multipliers padded (int32 where they fit)."""
    mult, _, params = m.tail
    wp, bias = kc.args["wp"], kc.args["bias"]
    multp = vnni_direct.pad_mult(mult, bias.shape[1], int(params[SHIFT]))
    return replace(kc, kern=kern, args=dict(wp=wp, bias=bias, multp=multp, rq=rq, ost=params))


def _dw_in_place(kc, tuning: Tuning, p, m):
    """dw_vnni.conv_dw_vnni_in_place: the tap quads read from the stored 8-bit input itself (channels a
    multiple of 16), no padded copy."""
    g, gm = m.shape[0], m.gm
    if g % 16 or m.x.dtype not in (np.uint8, np.int8):
        return None
    pad = np.array([gm["pt"], gm["pl"], gm["h"], gm["w"], pad_fuse.vnni_offset(m.x)], np.int64)
    return replace(kc, kern=dw_vnni.conv_dw_vnni_in_place, args=dict(kc.args, pad=pad), scratch=0,
                   first=lambda x4: (x4.reshape(-1), []))


# ------------------------------------------------------------------ the table

_ROWS = (fused.mul_rows, fused.copy_rows)
_DENSE = (gemv_i32.dense_rows_i32, dense16.dense_vnni16)

VARIANTS = (
    Variant("direct", "prepare", ("direct",), (vnni.conv_vnni,), _direct),
    Variant("direct_res", "prepare", ("direct",), (vnni.conv_vnni,), _direct_res),
    Variant("dw_in_place", "prepare", ("dw_in_place",), (dw_vnni.conv_dw_vnni,), _dw_in_place),
    Variant("padded_output", "bind", (), (vnni_direct.conv_vnni_direct,), pad_fuse.padded_output),
    Variant("gemv", "program", (), (vnni.padded_conv_vnni,), row_twins.gemv),
    Variant("gemv_i32", "program", (), (conv.conv_i32,), row_twins.gemv_i32),
    Variant("gather_flat", "program", ("lean", "gather", "special"), (fused.copy_rows,), row_twins.gather_flat),
    Variant("gather", "program", ("lean", "gather"), (fused.copy_rows,), row_twins.gather),
    Variant("mul_case", "program", ("lean", "special"), (fused.mul_rows,), row_twins.mul_case),
    Variant("lean", "program", ("lean",), _ROWS, row_twins.lean),
    Variant("lean_scratch", "program", ("lean",), _ROWS, row_twins.lean_scratch),
    Variant("dense_row", "program", ("lean", "special", "rowwise"), _DENSE, row_twins.dense_row),
    Variant("dense_flat", "program", ("lean", "special"), _DENSE, row_twins.dense_flat),
    Variant("dense_lean", "program", ("lean",), _DENSE, row_twins.dense_lean),
)
