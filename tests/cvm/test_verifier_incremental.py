"""The incremental Verifier (used by MRT's quantizer) proves exactly what verify() proves."""
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm.errors import VerifyError
from cvm.verify import Verifier, verify

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MODELS = sorted((FIXTURES / "models").glob("*.cvm")) + [FIXTURES / "cvm" / "tiny_cnn.cvm"]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_one_node_at_a_time_equals_verify(path):
    g = cvm.load(path).graph
    v = Verifier(g.opset)
    for inp in g.inputs:
        v.add_input(inp)
    for name, values in g.constants.items():
        v.add_constant(name, values)
    for node in g.nodes:
        info = v.add_node(node)
        assert v.tensors[node.output] == info
    assert v.finish(g.outputs) == verify(g)


def test_a_node_is_checked_when_added():
    v = Verifier(1)
    v.add_input(cvm.ir.Input("x", (4,), 8))
    v.add_constant("w", np.ones((3, 4), np.int8))
    with pytest.raises(VerifyError, match="structure.order"):
        v.add_node(cvm.ir.Node("dense", ("x", "nope"), "y", {}))
    with pytest.raises(VerifyError, match="is not the output of a node"):
        v.finish(["x"])
