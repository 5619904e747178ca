"""A worked example of the next opset: one new op (`neg`) added by its OpDef, a derived op table and
one numba lowering, and nothing else; the verifier, the reference interpreter and the numba backend
run it, and opset 1 models are untouched. (A shipped opset 2 would put OPSET_V2 into cvm.ops.OPSETS
and the lowering into cvm.interp.numba.LOWERINGS; the test patches those two tables instead.)"""
from __future__ import annotations

import numpy as np
import pytest

import cvm
from cvm import gas
from cvm.interp import numba as numba_backend
from cvm.interp import reference
from cvm.ops import OPSET_V1, OpDef, by_opset, derive
from cvm.ops.base import TABLE_ANY, elements

NEG = OpDef("neg", 1, 1, {}, lambda args, a: args[0].shape, lambda args, a, out: (-args[0].hi, -args[0].lo),
            lambda args, a, out: elements(out) * gas.GAS_PER_ELEMENT, lambda x: -x,
            activation_inputs=(0,), doc="y = -x", table=TABLE_ANY)  # decreasing: not TABLE_MONOTONE
OPSET_V2 = derive(OPSET_V1, [NEG])


def lower_neg(p, index, node, attrs):
    x = p.values[node.inputs[0]]
    p.add("neg", node.inputs, node.output, p.spec_value(node.output).with_layout(x.layout, x.chw),
          lambda ins, out: [(np.negative, (ins[0], out))])


@pytest.fixture
def opset2(monkeypatch):
    tables = {1: OPSET_V1, 2: OPSET_V2}
    monkeypatch.setattr(cvm.verify, "OPSETS", tables)
    monkeypatch.setattr(reference, "OPSETS", tables)
    monkeypatch.setattr(numba_backend, "LOWERINGS", by_opset(
        {1: numba_backend.LOWERINGS_V1, 2: derive(numba_backend.LOWERINGS_V1, {"neg": lower_neg})}))


def _model(opset):
    b = cvm.GraphBuilder(opset=opset)
    x = b.input("x", (2, 3), 8)
    return b.build(b.op("relu", b.op("neg", x, name="n"), name="r"))


def test_new_op_runs_on_every_backend_that_lowers_it(opset2):
    model = _model(2)
    x = np.arange(-6, 6, dtype=np.int8).reshape(2, 2, 3)
    want = np.maximum(-x.astype(np.int64), 0)
    for backend in ("reference", "numba"):
        assert np.array_equal(model.run({"x": x}, backend=backend), want)
    assert model.analysis.tensors["n"].lo == -127


def test_the_op_is_unknown_to_opset_1(opset2):
    with pytest.raises(cvm.VerifyError, match="unknown op 'neg' \\(opset 1\\)"):
        _model(1)
