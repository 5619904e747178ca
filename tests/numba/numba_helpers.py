"""What the numba backend's tests share (issue 29, item 5): the hypothesis settings, the bit-for-bit
comparison with the reference on every kernel path, the kernel paths as test parameters (a path this
CPU lacks is a visible skip naming the feature, never a pass that ran nothing), the VNNI runner and
the kernels a run calls, and the row-kernel calls the row twins are held to.

Imported by name (`from numba_helpers import ...`): pytest puts this folder on sys.path for its test
modules (rootdir-relative, no __init__.py: a package here would shadow the real `numba`).
CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, what CI runs)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import fused
from cvm.interp.numba_kernels.plan import OPEN_HI, OPEN_LO, OutputStep
from cvm.interp.numba_kernels.simd import host_has_vbmi
from strategies import Case, values

EXAMPLES = int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])
ISAS = nb.available_isas()  # the kernel paths this machine runs
VNNI = "vnni" in ISAS
NO_VNNI = "needs AVX-512 VNNI (vpdpbusd), which this CPU or numba's target lacks"
NO_VBMI = "needs AVX-512 VBMI (vpermi2b) with the VNNI kernels, which this CPU or numba's target lacks"
needs_vnni = pytest.mark.skipif(not VNNI, reason=NO_VNNI)
needs_vbmi = pytest.mark.skipif(not (VNNI and host_has_vbmi()), reason=NO_VBMI)


def each_isa() -> list:
    """pytest parameters, one per kernel path the backend has ("portable", "vnni"): the VNNI one is a
    skip naming the feature where this machine lacks it."""
    return ["portable", pytest.param("vnni", marks=needs_vnni)]


def assert_same(got: dict, want: dict, what: str = "") -> None:
    assert got.keys() == want.keys()
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype, f"{what}{name}: dtype {g.dtype} != reference {w.dtype}"
        assert g.shape == w.shape, f"{what}{name}: shape {g.shape} != reference {w.shape}"
        if not np.array_equal(g, w):
            bad = np.argwhere(g != w)[:5]
            raise AssertionError(f"{what}{name}: {len(np.argwhere(g != w))} values differ, e.g. at "
                                 f"{bad.tolist()}: {g[tuple(bad.T)].tolist()} != {w[tuple(bad.T)].tolist()}")


def check(case: Case, threads: int = 1, split: str = "auto", isas=None) -> None:
    """The backend equals the reference on each of `isas` (default: every path this machine runs),
    twice (the second run reuses the buffers)."""
    graph, analysis = case.model.graph, case.model.analysis
    want = reference.run(graph, analysis, case.inputs)
    for isa in ISAS if isas is None else isas:
        runner = nb.prepare(graph, analysis, isa=isa, threads=threads, split=split)
        assert_same(runner(case.inputs), want, f"[{isa}] ")
        assert_same(runner(case.inputs), want, f"[{isa}, second run] ")  # reused buffers


def vnni_runner(case: Case):
    """The case prepared on the VNNI path (one thread); a test calling it is marked needs_vnni."""
    return nb.prepare(case.model.graph, case.model.analysis, isa="vnni", threads=1)


def kernels(runner, xs: dict) -> set:
    """The kernels a bound run calls (bound as numba._Bound binds, with zero inputs)."""
    p = runner.plan
    env = {name: np.zeros(x.shape, p.values[name].dtype) for name, x in xs.items()}
    names = set()
    for step in p.steps:
        ins = [env[i] for i in step.inputs]
        out = np.empty((ins[0].shape[0],) + step.value.stored, step.value.dtype)
        names.update(getattr(fn, "__name__", "") for fn, _ in step.bind(ins, out))
        env[step.output] = out
    return names


# ------------------------------------------------------------ row-kernel calls (rows_lean, rows_case, lut_gather)

DTYPES = {8: np.int8, 16: np.int16, 32: np.int32}


@st.composite
def _stage(draw, c: int):
    """(mult[c], shift, lo, hi, table | None, offset): a requant/clamp stage; with a table, the
    clamp keeps every value inside it (as the verifier proves of a lut's input)."""
    mult = values(draw, (c,), -(1 << 20), 1 << 20)
    shift = draw(st.integers(0, 40))
    if draw(st.booleans()):
        lo = draw(st.integers(-300, 0))
        hi = draw(st.integers(lo, 300))
        return mult, shift, lo, hi, values(draw, (hi - lo + 1,), -(1 << 15), 1 << 15), lo
    if draw(st.booleans()):
        return mult, shift, OPEN_LO, OPEN_HI, None, 0
    lo = draw(st.integers(-(1 << 20), 0))
    return mult, shift, lo, draw(st.integers(lo, 1 << 20)), None, 0


@st.composite
def rows_case(draw):
    """A row kernel call: (kind, args before the output step, output step, out, block range)."""
    mul = draw(st.booleans())
    c, c_extra, c0 = draw(st.integers(1, 40)), draw(st.integers(0, 5)), 0
    hw = draw(st.sampled_from([1, 1, 2, 3])) if mul else 1
    samples = draw(st.integers(1, 3))
    rows = samples * hw if mul else draw(st.integers(1, 140))
    xbits = draw(st.sampled_from([8, 16] if mul else [8, 16, 32]))
    x = values(draw, (rows, c), -(1 << (xbits - 1)), (1 << (xbits - 1)) - 1).astype(DTYPES[xbits])
    if mul:
        sbits = draw(st.sampled_from([8, 16]))
        sc = values(draw, (rows // hw, c), -(1 << (sbits - 1)), (1 << (sbits - 1)) - 1).astype(DTYPES[sbits])
    else:
        c0 = draw(st.integers(0, c_extra))
    width = c if mul else c + c_extra
    m1, s1, lo1, hi1, t1, off1 = draw(_stage(c))
    kind = draw(st.sampled_from(["none", "tensor", "row"]))
    m2, s2, lo2, hi2, t2, off2 = draw(_stage(c)) if kind != "none" else (np.ones(c, np.int64), 0, OPEN_LO, OPEN_HI,
                                                                          None, 0)
    out_dtype = DTYPES[draw(st.sampled_from([16, 32]))]
    if kind == "tensor":
        res = values(draw, (rows, width), -(1 << 15), (1 << 15) - 1).astype(out_dtype)
    elif kind == "row":
        res = values(draw, (1, width), -(1 << 15), (1 << 15) - 1)
    else:
        res = np.zeros((1, 1), out_dtype)
    ost = OutputStep(m1, s1, lo1, hi1, "r" if kind == "tensor" else None, m2, s2, lo2, hi2, "y", (), t1, off1, t2, off2,
                     res[0] if kind == "row" else None)
    blocks = -(-rows // fused.BLOCK_ROWS)
    b0 = draw(st.integers(0, blocks - 1))
    b1 = draw(st.integers(b0 + 1, blocks))
    out = np.full((rows, width), -7, out_dtype)
    head = (x, sc) if mul else (x,)
    tail = (np.int64(hw),) if mul else (np.int64(c0),)
    return mul, head, (m1, m2, ost.params(), res), out, tail, (b0, b1)


@st.composite
def dense_case(draw):
    """A dense layer of a few rows, int8/int16 inputs and weights (partial sums in int32, as the
    planner proves before it picks the int32 path), with an output step."""
    rows, k, og = draw(st.integers(1, 8)), draw(st.integers(1, 6)), draw(st.integers(1, 70))
    xb, wb = draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 12, 16]))
    x = values(draw, (rows, 1, 1, k), -(1 << (xb - 1)), (1 << (xb - 1)) - 1).astype(DTYPES[xb])
    w = values(draw, (1, og, k), -(1 << (wb - 1)), (1 << (wb - 1)) - 1).astype(np.int16 if wb > 8 else np.int8)
    bias = values(draw, (1, og), -(1 << 24), 1 << 24).astype(np.int32)
    m1, s1, lo1, hi1, t1, off1 = draw(_stage(og))
    with_res = draw(st.booleans())
    m2, s2, lo2, hi2, t2, off2 = draw(_stage(og)) if with_res else (np.ones(og, np.int64), 0, OPEN_LO, OPEN_HI, None, 0)
    res = values(draw, (rows, og), -(1 << 20), 1 << 20).astype(np.int32) if with_res else np.zeros((1, 1), np.int16)
    ost = OutputStep(m1, s1, lo1, hi1, "r" if with_res else None, m2, s2, lo2, hi2, "y", (), t1, off1, t2, off2)
    out = np.full((rows, og), -7, DTYPES[draw(st.sampled_from([16, 32]))])
    return x, w, bias, m1.reshape(1, -1), m2.reshape(1, -1), ost.params(), res, out
