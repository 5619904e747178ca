"""Gas schedule v2 (opset 3, cvm.gas_v2): opset 2's ops with the same semantics, priced by measured
time; chosen only by name, so that every model written without naming it keeps its opset, bytes, hash
and gas; charged by the precompile under the model's own opset's schedule."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm import gas_v2
from cvm.gas import CALL_BASE_GAS, GAS_PER_IO_BYTE, GAS_PER_NODE, SCHEDULE_V1, call_gas, sample_io_bytes
from cvm.ops import LATEST_OPSET, OPSET_V2, OPSET_V3, OPSETS, REPRICES, SCHEDULES, lowest_opset
from cvm.repricing import repriced

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "models"
FIXTURES = sorted(FIX.glob("*.cvm"))


def test_opset_3_reprices_opset_2_and_nothing_else():
    assert set(OPSET_V3) == set(OPSET_V2) and REPRICES[3] == 2
    for name, op in OPSET_V3.items():
        old = OPSET_V2[name]
        assert op.cost is not old.cost
        for field in ("shape", "bound", "reference", "attrs", "const_inputs", "activation_inputs", "accumulates",
                      "table", "bilinear", "compares", "min_inputs", "max_inputs"):
            assert getattr(op, field) == getattr(old, field), (name, field)
    assert SCHEDULES[1] is SCHEDULES[2] is SCHEDULE_V1 and SCHEDULES[3] is gas_v2.SCHEDULE_V2


def test_opset_3_is_never_chosen_for_a_graph_that_does_not_name_it():
    assert LATEST_OPSET == 2 and lowest_opset(set(OPSET_V3)) == 2 and lowest_opset({"dense"}) == 1
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), 8)
    assert b.build(b.op("relu", x)).graph.opset == 1
    b3 = cvm.GraphBuilder(opset=3)
    x = b3.input("x", (4,), 8)
    assert b3.build(b3.op("relu", x)).graph.opset == 3


def test_factor_rows_name_ops_and_an_unpriced_op_gets_the_dearest_row():
    rows = set(OPSET_V2) | {gas_v2.DEPTHWISE}
    assert set(gas_v2.FACTOR) <= rows and set(gas_v2.OP_NODE) <= set(gas_v2.FACTOR)
    assert set(gas_v2.LANE_PIXEL) == set(gas_v2.LANE_BLOCK) == {"conv2d", gas_v2.DEPTHWISE, "conv_transpose2d"}
    cost = gas_v2.op_cost("an_op_added_later", lambda args, attrs, out: 10_000)
    assert cost(None, None, None) == max(gas_v2.OP_NODE.values()) + max(gas_v2.FACTOR.values())


def _conv_model(opset):
    b = cvm.GraphBuilder(opset=opset)
    x = b.input("x", (3, 8, 8), 8)
    w = np.arange(4 * 3 * 3 * 3).reshape(4, 3, 3, 3) % 7 - 3
    y = b.op("requant", b.op("conv2d", x, b.const(w), pads=(1, 1, 1, 1)), b.const([3]), shift=4, bits=8)
    return b.build(y)


def test_node_costs_follow_the_v2_formula():
    v1, v3 = _conv_model(None), _conv_model(3)
    assert v1.graph.opset == 1 and v3.graph.opset == 3
    conv_units = 4 * 8 * 8 * (3 * 3 * 3 + 1)  # E(out) * (C*KH*KW MACs + 1 element), the v1 formula
    requant_units = 4 * 8 * 8 * (3 + 1)
    assert v1.analysis.node_costs == [GAS_PER_NODE + conv_units, GAS_PER_NODE + requant_units]
    lanes = math.ceil((64 * gas_v2.LANE_PIXEL["conv2d"] + 1 * gas_v2.LANE_BLOCK["conv2d"]) / gas_v2.FACTOR_SCALE)
    assert v3.analysis.node_costs == [
        gas_v2.NODE + gas_v2.OP_NODE.get("conv2d", 0)
        + math.ceil(conv_units * gas_v2.FACTOR["conv2d"] / gas_v2.FACTOR_SCALE)
        + lanes,  # one lane (one group), 8 x 8 = 64 output pixels: one block
        gas_v2.NODE + math.ceil(requant_units * gas_v2.FACTOR["requant"] / gas_v2.FACTOR_SCALE)]
    assert gas_v2.model_gas(v1) == v3.gas


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_repriced_fixture_runs_the_same_and_costs_v2(path):
    model = cvm.load(path)
    v3 = repriced(model)
    assert v3.graph.opset == 3 and v3.hash != model.hash and model.graph.opset in (1, 2)
    assert v3.gas == gas_v2.model_gas(model) < model.gas
    assert v3.graph.nodes == model.graph.nodes and v3.meta == model.meta
    again = cvm.Model.from_bytes(v3.to_bytes())
    assert again.hash == v3.hash and again.gas == v3.gas and again.graph.opset == 3
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    x = np.random.default_rng(1).integers(-m, m + 1, (3, *spec.shape[1:])).astype(spec.dtype)
    want = model.run(x, backend="reference")
    for backend in ("reference", "numba"):
        got = v3.run(x, backend=backend)
        assert got.dtype == want.dtype and np.array_equal(got, want), backend


def test_repriced_refuses_an_opset_that_does_not_reprice_the_models():
    model = _conv_model(None)
    assert repriced(model, 1) is model
    with pytest.raises(ValueError, match="opset 2 does not reprice opset 1"):
        repriced(model, 2)
    with pytest.raises(ValueError, match="opset 9"):
        repriced(model, 9)


def test_call_gas_per_schedule():
    v1 = cvm.load(FIX / "mnist_cnn.cvm")
    v3 = repriced(v1)
    io = sample_io_bytes(v1)
    for batch in (1, 5):
        assert call_gas(v1, batch) == v1.call_gas(batch) == CALL_BASE_GAS + v1.gas * batch + GAS_PER_IO_BYTE * io * batch
        assert call_gas(v3, batch) == v3.call_gas(batch) == gas_v2.CALL + v3.gas * batch + -(-io * batch * gas_v2.IO_NUM // gas_v2.IO_DEN)


def test_precompile_charges_the_models_own_schedule():
    pytest.importorskip("eth")
    from cvm.chain.precompile import precompile_gas, sample_bytes
    v1 = cvm.load(FIX / "mnist_cnn.cvm")
    v3 = repriced(v1)
    n = 3 * sample_bytes(v1.inputs[0])
    assert precompile_gas(v1, n) == v1.call_gas(3)
    assert precompile_gas(v3, n) == call_gas(v3, 3) < precompile_gas(v1, n)


def test_every_opset_has_a_schedule_and_limits():
    from cvm.limits import LIMITS
    assert set(SCHEDULES) == set(OPSETS) == set(LIMITS)
    assert LIMITS[3] == LIMITS[2]


@pytest.mark.parametrize("groups, cin, cout, lanes", [(1, 3, 4, 1), (4, 8, 8, 4), (8, 8, 8, 1), (8, 8, 16, 8)])
def test_lanes_count_groups_except_depthwise(groups, cin, cout, lanes):
    """A lane is a group, except that a depthwise conv (one input and one output channel per group) is
    one lane; 10 x 10 output pixels are two blocks of 64."""
    attrs = {"groups": groups}
    assert gas_v2.lane_counts("conv2d", (cin, 10, 10), (cout, 10, 10), attrs) == (lanes * 100, lanes * 2)
    assert gas_v2.lane_counts("conv_transpose2d", (cin, 5, 5), (cout, 10, 10), attrs) == (groups * 100, groups * 2)
    assert gas_v2.lane_counts("dense", (cin,), (cout,), {}) == (0, 0)


def test_thousands_of_groups_on_a_1x1_map_pay_per_group():
    """The calibration's conv_groups_1x1 (4096 groups, two outputs each, 1x1): its v1 formula counts
    16,384 units; schedule v2 charges every group its block."""
    b = cvm.GraphBuilder(opset=3)
    x = b.input("x", (4096, 1, 1), 8)
    m = b.build(b.op("conv2d", x, b.const(np.ones((8192, 1, 1, 1), np.int64)), groups=4096))
    per_group = (gas_v2.LANE_PIXEL["conv2d"] + gas_v2.LANE_BLOCK["conv2d"]) / gas_v2.FACTOR_SCALE
    assert m.gas >= 4096 * per_group


def test_a_depthwise_conv_is_priced_by_its_own_row_and_as_one_lane():
    b = cvm.GraphBuilder(opset=3)
    x = b.input("x", (16, 10, 10), 8)
    m = b.build(b.op("conv2d", x, b.const(np.ones((16, 1, 3, 3), np.int64)), groups=16, pads=(1, 1, 1, 1)))
    units = 16 * 100 * (9 + 1)
    d = gas_v2.DEPTHWISE
    lanes = math.ceil((100 * gas_v2.LANE_PIXEL[d] + 2 * gas_v2.LANE_BLOCK[d]) / gas_v2.FACTOR_SCALE)
    assert m.gas == gas_v2.NODE + gas_v2.OP_NODE[d] + math.ceil(units * gas_v2.FACTOR[d] / gas_v2.FACTOR_SCALE) + lanes
    assert gas_v2.price_row("conv2d", (16, 10, 10), (32, 10, 10), {"groups": 16}) == "conv2d"
