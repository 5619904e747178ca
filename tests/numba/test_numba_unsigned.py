"""Unsigned activations stored as uint8 (plan.Planner.unsigned_storage): a relu output proven in
0..255 (a 9-bit requant, then relu, as in the torchvision ResNets) that only convs, dense layers, max
pools and requants read is stored one byte an element; a VNNI conv with no padding and whole 4-byte
runs then reads it in place (pad_fuse.reads_in_place: no padded copy). The outputs equal the reference's
bit for bit, with residual adds read from uint8, pools over uint8, and the graph's outputs keeping
their spec dtype. The tests of the VNNI path run once per kernel path; the VNNI one is skipped, naming
it, where the CPU lacks it."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import vnni
from numba_helpers import check, each_isa
from strategies import Case

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


def _requant_relu(b, y, rng, og: int, bits: int = 9):
    y = b.op("requant", y, b.const(rng.integers(1 << 13, 1 << 15, og)), shift=24, bits=bits, axis=0)
    return b.op("relu", y)


@st.composite
def unsigned_chain(draw) -> Case:
    """conv (k x k, padded or not) -> requant(9 bits) -> relu [-> max_pool] -> 1x1 conv (in place) ->
    requant -> add(requant of the first relu output) -> relu -> [1x1 conv | dense]."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.sampled_from([3, 4, 8, 16]))
    m = draw(st.sampled_from([4, 8, 12, 32, 64]))  # 4-byte runs (in place) or not (12: 1x1 runs of 12)
    og = draw(st.sampled_from([4, 32, 64, 96]))
    k = draw(st.sampled_from([1, 3]))
    pad = draw(st.sampled_from([0, k // 2]))
    pool = draw(st.booleans())
    h, w = draw(st.integers(k + 2, 9)), draw(st.integers(k + 2, 11))
    n = draw(st.integers(1, 3))
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), 8)
    a = b.op("conv2d", x, b.const(rng.integers(-127, 128, (m, c, k, k))), b.const(rng.integers(-999, 999, m)),
             pads=(pad,) * 4)
    a = _requant_relu(b, a, rng, m)
    if pool:
        a = b.op("max_pool2d", a, kernel=(2, 2), strides=(1, 1))
    y = b.op("conv2d", a, b.const(rng.integers(-127, 128, (m, m, 1, 1))), b.const(rng.integers(-999, 999, m)))
    y = b.op("requant", y, b.const(rng.integers(1 << 13, 1 << 15, m)), shift=24, bits=10, axis=0)
    rm, rs = draw(st.sampled_from([(5, 2), (1889620750, 28)]))  # the residual's requant: its clamp
    r = b.op("requant", a, b.const([rm]), shift=rs, bits=draw(st.sampled_from([9, 12])))  # active at 9 bits
    y = b.op("relu", b.op("requant", b.op("add", y, r), b.const([3]), shift=3, bits=9))
    if draw(st.booleans()):
        out = b.op("conv2d", y, b.const(rng.integers(-127, 128, (og, m, 1, 1))), b.const(rng.integers(-99, 99, og)))
    else:
        flat = b.op("flatten", y)
        out = b.op("dense", flat, b.const(rng.integers(-127, 128, (og, m * (h - k + 1 + 2 * pad - pool) *
                                                                        (w - k + 1 + 2 * pad - pool)))))
    model = b.build(b.op("requant", out, b.const([1]), shift=8, bits=16))
    return Case(model, {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)})


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=unsigned_chain(), threads=st.integers(1, 3))
def test_unsigned_activations_match_reference(case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto")


@pytest.mark.parametrize("isa", each_isa())
def test_relu_outputs_stored_uint8_and_read_in_place(isa):
    rng = np.random.default_rng(7)
    b = cvm.GraphBuilder()
    x = b.input("x", (8, 6, 6), 8)
    a = _requant_relu(b, b.op("conv2d", x, b.const(rng.integers(-127, 128, (32, 8, 3, 3))), pads=(1, 1, 1, 1)),
                      rng, 32)
    y = _requant_relu(b, b.op("conv2d", a, b.const(rng.integers(-127, 128, (32, 32, 1, 1)))), rng, 32)
    model = b.build(y)
    case = Case(model, {"x": rng.integers(-128, 128, (2, 8, 6, 6)).astype(np.int8)})
    check(case, isas=[isa])
    p = nb.prepare(model.graph, model.analysis, isa=isa).plan
    dtypes = [p.values[s.output].dtype for s in p.steps if s.label.startswith("conv2d")]
    assert dtypes == [np.uint8, np.int16], dtypes  # the graph's output keeps its spec dtype
    if isa == "vnni":
        runner = nb.prepare(model.graph, model.analysis, isa="vnni", wholeplan="never")
        step = [s for s in runner.plan.steps if s.label.startswith("conv2d")][-1]
        x4 = np.zeros((2, 6, 6, 32), np.uint8)
        calls = step.bind([x4], np.empty((2, 6, 6, 32), np.int16))
        assert len(calls) == 1 and np.shares_memory(calls[0][1][0], x4)  # the conv reads x4: no padded copy
        assert getattr(calls[0][0], "__name__", "") != vnni.to_padded_u8.__name__


@pytest.mark.parametrize("isa", each_isa())
def test_residual_requant_absorbed_on_the_vnni_path(isa):
    """A per-tensor requant of a stored activation, read only by the add after a VNNI conv, becomes
    the conv's output step's residual requant (no step of its own); the portable plan keeps it."""
    rng = np.random.default_rng(11)
    b = cvm.GraphBuilder()
    x = b.input("x", (8, 6, 6), 8)
    a = _requant_relu(b, b.op("conv2d", x, b.const(rng.integers(-127, 128, (32, 8, 3, 3))), pads=(1, 1, 1, 1)),
                      rng, 32)
    y = b.op("conv2d", a, b.const(rng.integers(-127, 128, (32, 32, 1, 1))))
    y = b.op("requant", y, b.const(rng.integers(1 << 13, 1 << 15, 32)), shift=24, bits=12, axis=0)
    r = b.op("requant", a, b.const([1889620750]), shift=28, bits=13)
    y = b.op("relu", b.op("requant", b.op("add", y, r), b.const([5]), shift=3, bits=9))
    model = b.build(y)
    check(Case(model, {"x": rng.integers(-128, 128, (3, 8, 6, 6)).astype(np.int8)}), isas=[isa])
    labels = [s.label for s in nb.prepare(model.graph, model.analysis, isa=isa).plan.steps]
    if isa == "portable":
        assert "requant" in labels
    else:
        assert "requant" not in labels and any("+requant+requant+add" in s for s in labels), labels


@pytest.mark.parametrize("isa", each_isa())
def test_residual_requant_clamp_left_open_only_where_inactive(isa):
    """The absorbed requant's clamp is opened only where the proven input interval never reaches it."""
    from cvm.interp.numba_kernels.kargs import OST, RHI, RLO
    for bits, open_ in ((13, True), (9, False)):  # 0..255 x 1889620750 / 2^28: 0..1795
        rng = np.random.default_rng(5)
        b = cvm.GraphBuilder()
        x = b.input("x", (8, 6, 6), 8)
        a = _requant_relu(b, b.op("conv2d", x, b.const(rng.integers(-127, 128, (32, 8, 1, 1)))), rng, 32)
        y = b.op("requant", b.op("conv2d", a, b.const(rng.integers(-127, 128, (32, 32, 1, 1)))),
                 b.const(rng.integers(1 << 13, 1 << 15, 32)), shift=24, bits=12, axis=0)
        y = b.op("add", y, b.op("requant", a, b.const([1889620750]), shift=28, bits=bits))
        model = b.build(b.op("relu", b.op("requant", y, b.const([5]), shift=3, bits=9)))
        check(Case(model, {"x": rng.integers(-128, 128, (2, 8, 6, 6)).astype(np.int8)}), isas=[isa])
        if isa == "vnni":
            runner = nb.prepare(model.graph, model.analysis, isa="vnni", wholeplan="never")
            step = [s for s in runner.plan.steps if "+add" in s.label][0]
            calls = step.bind([np.zeros((2, 6, 6, 32), np.uint8)] * 2, np.empty((2, 6, 6, 32), np.uint8))
            ost = [a for a in calls[-1][1] if isinstance(a, np.ndarray) and a.dtype == np.int64 and a.shape == (len(OST),)][0]
            assert (ost[RLO] < -(1 << 30) and ost[RHI] > 1 << 30) == open_, (bits, ost)
