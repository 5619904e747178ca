"""The opset-2 text ops (cvm/ops/text.py, docs/spec.md section 15): gather and isqrt against a naive
big-integer twin written from the spec text, their checks and rule ids, bounds, gas and opset placement
(numba == reference on hypothesis-drawn graphs: tests/numba/test_numba_text.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cvm
from cvm import gas
from cvm.arith import bits_max
from cvm.ir import Graph
from cvm.ops import OPSET_V1, OPSETS


# ---------------------------------------------------------------- the big-integer twin (spec text only)

def big_gather(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """y[i..., j...] = t[x[i...], j...], one Python int at a time."""
    out = np.empty(x.shape + table.shape[1:], object)
    for i in np.ndindex(*x.shape):
        row = table[int(x[i])]
        for j in np.ndindex(*table.shape[1:]):
            out[i + j] = int(row[j])
    return out


def big_isqrt(x: np.ndarray) -> np.ndarray:
    """The largest y >= 0 with y*y <= max(x, 0), by bisection on Python ints."""
    out = np.empty(x.shape, object)
    for i in np.ndindex(*x.shape):
        v, lo, hi = max(int(x[i]), 0), 0, 1 << 16
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if mid * mid <= v else (lo, mid - 1)
        out[i] = lo
    return out


def _model(op, shape, bits, *consts, pre=None):
    b = cvm.GraphBuilder()
    x = b.input("x", shape, bits)
    if pre is not None:
        x = pre(b, x)
    return b.build(b.op(op, x, *(b.const(c) for c in consts), name="y"))


def _ints(rng, lo, hi, shape, dtype):
    return rng.integers(lo, hi + 1, shape).astype(dtype)


@pytest.mark.parametrize("xshape, tshape, tdtype", [((7,), (11, 4), np.int8), ((2, 3), (5,), np.int16),
                                                    ((4,), (300, 2, 3), np.int32), ((), (9, 6), np.int8)])
def test_gather_matches_bigint(xshape, tshape, tdtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(tdtype)
    table = _ints(rng, info.min, info.max, tshape, tdtype)
    model = _model("gather", xshape, 16, table, pre=lambda b, x: b.op("clip", x, lo=0, hi=tshape[0] - 1))
    x = _ints(rng, -bits_max(16), bits_max(16), (3,) + xshape, np.int16)
    want = big_gather(np.clip(x, 0, tshape[0] - 1), table)
    for backend in ("reference", "numba"):
        got = model.run(x, backend=backend)
        assert got.shape == want.shape and (got.astype(object) == want).all(), backend


def test_isqrt_matches_bigint_at_squares_and_extremes():
    edges = [k * k + d for k in (0, 1, 2, 3, 46340, 46339, 4095, 65535 // 2) for d in (-1, 0, 1)]
    edges += [bits_max(32), bits_max(32) - 1, -bits_max(32), 0, 2 ** 30, 2 ** 30 - 1]
    x = np.array([e for e in edges if abs(e) <= bits_max(32)], np.int32).reshape(1, -1)
    model = _model("isqrt", x.shape[1:], 32)
    want = big_isqrt(x)
    for backend in ("reference", "numba"):
        assert (model.run(x, backend=backend).astype(object) == want).all(), backend
    rng = np.random.default_rng(2)
    x = rng.integers(-bits_max(32), bits_max(32) + 1, (4, 2000)).astype(np.int32)
    model = _model("isqrt", (2000,), 32)
    for backend in ("reference", "numba"):
        assert (model.run(x, backend=backend).astype(object) == big_isqrt(x)).all(), backend


def test_bounds_gas_and_opset():
    table = np.array([[-5, 3], [7, 100], [0, -20]], np.int8)
    m = _model("gather", (4,), 8, table, pre=lambda b, x: b.op("clip", x, lo=0, hi=2))
    y = m.analysis.tensors["y"]
    assert (y.lo, y.hi, y.shape) == (-20, 100, (4, 2)) and m.graph.opset == 2
    gather_gas = m.analysis.node_costs[-1]
    assert gather_gas == gas.GAS_PER_NODE + 4 * gas.GAS_PER_LOOKUP + 8 * gas.GAS_PER_ELEMENT
    m = _model("isqrt", (3,), 20)
    y = m.analysis.tensors["y"]
    assert (y.lo, y.hi) == (0, math.isqrt(bits_max(20)))
    assert m.analysis.node_costs[-1] == gas.GAS_PER_NODE + 3 * (gas.GAS_PER_DIVISION + gas.GAS_PER_ELEMENT)
    assert "gather" not in OPSET_V1 and {"gather", "isqrt"} <= set(OPSETS[2])


def test_gather_index_must_be_proven_inside_the_table():
    table = np.zeros((10, 2), np.int8)
    with pytest.raises(cvm.VerifyError, match="value.gather_index"):
        _model("gather", (4,), 8, table)  # [-127, 127] is not inside 0..9
    with pytest.raises(cvm.VerifyError, match="value.gather_index"):
        _model("gather", (4,), 8, table, pre=lambda b, x: b.op("clip", x, lo=0, hi=10))
    with pytest.raises(cvm.VerifyError, match="node.const_input"):
        b = cvm.GraphBuilder()
        x = b.input("x", (2,), 4)
        b.build(b.op("gather", b.op("relu", x), b.op("relu", x)))


def test_opset_1_graph_naming_gather_is_refused():
    table = np.zeros((10, 2), np.int8)
    m = _model("gather", (4,), 8, table, pre=lambda b, x: b.op("clip", x, lo=0, hi=9))
    g = m.graph
    with pytest.raises(cvm.VerifyError, match="node.op"):
        cvm.Model(Graph(g.inputs, g.constants, g.nodes, g.outputs, opset=1))
