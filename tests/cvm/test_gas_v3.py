"""Gas schedule v3 (opset 4, docs/spec.md section 17): opset 2's semantics, v2's prices but for large
data-movement nodes (LARGE), an EDGE charge per listed input, a LOAD charge per constant byte once per
call, and at most MAX_NODE_INPUTS inputs a node; the committed constants cover the committed evidence."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm import gas_v2, gas_v3
from cvm.errors import LimitError
from cvm.limits import MAX_NODE_INPUTS
from cvm.ops import OPSET_V2, OPSETS, REPRICES, SCHEDULES

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "scripts" / "perf" / "results" / "gas_v3_memory_epyc2.json"


def _one(shape, make, opset, bits=8):
    b = cvm.GraphBuilder(opset=opset)
    x = b.input("x", shape, bits)
    return b.build(make(b, x))


def test_opset_4_reprices_opset_2_and_nothing_else():
    assert REPRICES[4] == 2 and set(OPSETS[4]) == set(OPSET_V2) and SCHEDULES[4] is gas_v3.SCHEDULE_V3
    for name, op in OPSETS[4].items():
        old = OPSET_V2[name]
        assert op.cost is not old.cost
        for field in ("shape", "bound", "reference", "attrs", "const_inputs", "activation_inputs", "min_inputs",
                      "max_inputs"):
            assert getattr(op, field) == getattr(old, field), (name, field)


@pytest.mark.parametrize("n, large", [(1 << 16, False), ((1 << 16) + 1, True)])
def test_a_data_movement_node_is_large_above_the_threshold(n, large):
    t3 = _one((1, n), lambda b, x: b.op("transpose", x, perm=(1, 0)), 3)
    t4 = _one((1, n), lambda b, x: b.op("transpose", x, perm=(1, 0)), 4)
    units = n  # one element written per element (schedule v1's copy cost)
    if large:
        assert t4.gas == gas_v2.NODE + gas_v3.EDGE + -(-units * gas_v3.LARGE["transpose"] // gas_v2.FACTOR_SCALE)
    else:
        assert t4.gas == t3.gas + gas_v3.EDGE
    assert t4.gas >= t3.gas + gas_v3.EDGE


def test_every_listed_input_pays_an_edge_and_opset_4_bounds_them():
    def wide(k):
        return lambda b, x: b.op("concat", *([x] * k), axis=0)
    three, four = _one((1,), wide(MAX_NODE_INPUTS), 3), _one((1,), wide(MAX_NODE_INPUTS), 4)
    assert four.gas == three.gas + MAX_NODE_INPUTS * gas_v3.EDGE
    with pytest.raises(LimitError, match="node_inputs"):
        _one((1,), wide(MAX_NODE_INPUTS + 1), 4)
    assert _one((1,), wide(100_000), 3).gas  # opset 3 keeps accepting what it accepted


def test_a_call_pays_for_the_constants_it_loads():
    b = cvm.GraphBuilder(opset=4)
    y = b.op("clip", b.input("x", (1,), 8), lo=0, hi=99)
    table = np.arange(100 * 77).reshape(100, 77) % 250 - 125
    m = b.build(b.op("gather", y, b.const(table, dtype="int8")))
    io = 1 + 77  # one int8 index in, one int8 row out
    assert m.call_gas(1) == gas_v3.CALL + -(-100 * 77 * gas_v3.LOAD_NUM // gas_v3.LOAD_DEN) + m.gas + -(-io // 16)
    assert m.call_gas(3) - m.call_gas(1) == 2 * m.gas + (-(-3 * io // 16) - -(-io // 16))  # loaded once a call


def test_a_large_node_is_never_cheaper_than_in_opset_3():
    from cvm.tools import adversarial
    for name in ("gather_chain_2_20", "transpose_64mib", "slice_strided_64mib", "pad_64mib"):
        m3, _ = adversarial.build(name, opset=3)
        m4, _ = adversarial.build(name, opset=4)
        assert m4.gas > m3.gas, name


def _gas_memory():
    spec = importlib.util.spec_from_file_location("gas_memory", ROOT / "scripts" / "perf" / "gas_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_constants_cover_the_committed_measurements():
    """Each LARGE row (with its MEMORY_MARGIN), EDGE, LOAD and CALL at least what scripts/perf/gas_memory.py's
    recorded run needs (the reference machine's seconds at the anchor rate): never below its own evidence."""
    needs = _gas_memory().derive(json.loads(EVIDENCE.read_text()))
    assert set(needs) == set(gas_v3.LARGE) | {"EDGE", "LOAD", "CALL"}
    for row, (need, probe) in needs.items():
        have = {"EDGE": gas_v3.EDGE, "LOAD": gas_v3.LOAD_NUM / gas_v3.LOAD_DEN, "CALL": gas_v3.CALL}.get(row) \
            or gas_v3.LARGE[row]
        assert have >= need, (row, need, probe)
