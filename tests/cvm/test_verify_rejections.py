"""Every verifier rule rejects a bad model with a message naming the node and the rule."""
import numpy as np
import pytest

import cvm
from cvm.ir import Graph, Input, Node


def graph(nodes, consts=None, inputs=None, outputs=None, opset=None):
    inputs = inputs or [Input("x", (4,), 8)]
    consts = {k: np.asarray(v, np.int8) if not isinstance(v, np.ndarray) else v for k, v in (consts or {}).items()}
    return Graph(inputs, consts, nodes, outputs or [nodes[-1].output], opset)


def relu_chain(n, opset=None):
    return graph([Node("relu", ("x" if i == 0 else f"n{i - 1}",), f"n{i}") for i in range(n)], opset=opset)


W = {"w": [[1, 2, 3, 4]]}
CASES = {
    "unknown op": (graph([Node("softmax", ("x",), "y")]), "node.op", "unknown op 'softmax'"),
    "cycle / use before definition": (graph([Node("relu", ("z",), "y"), Node("relu", ("y",), "z")]),
                                      "structure.order", "'z' is not defined before"),
    "duplicate name": (graph([Node("relu", ("x",), "x")]), "structure.unique", "defined twice"),
    "bad name": (graph([Node("relu", ("x",), "a b")]), "structure.name", "'a b'"),
    "arity": (graph([Node("relu", ("x", "x"), "y")]), "node.arity", "relu takes 1..1 inputs, got 2"),
    "weight not constant": (graph([Node("dense", ("x", "x"), "y")]), "node.const_input", "must be a constant"),
    "constant where activation": (graph([Node("dense", ("w", "w"), "y")], W), "node.activation_input", "must not be"),
    "unknown attribute": (graph([Node("relu", ("x",), "y", {"alpha": 1})]), "attrs.unknown", "'alpha'"),
    "missing attribute": (graph([Node("clip", ("x",), "y", {"lo": 0})]), "attrs.missing", "'hi'"),
    "attribute type": (graph([Node("clip", ("x",), "y", {"lo": 0, "hi": (1, 2)})]), "attrs.type", "must be an int"),
    "shape mismatch": (graph([Node("dense", ("x", "w"), "y")], {"w": [[1, 2, 3]]}), "shape.contract", "last axis is 4"),
    "broadcast": (graph([Node("add", ("x", "c"), "y")], {"c": [1, 2, 3]}), "shape.broadcast", "do not broadcast"),
    "overflow": (graph([Node("dense", ("x", "w"), "y")], {"w": np.full((2, 4), 2 ** 31 - 1, np.int32)},
                       inputs=[Input("x", (4,), 32)]), "bits.overflow", "> 32 (int32)"),
    "lut domain": (graph([Node("lut", ("x", "t"), "y", {"offset": 0})], {"t": np.arange(10, dtype=np.int8)}),
                   "value.lut_domain", "not covered"),
    "divisor may be zero": (graph([Node("div", ("x", "x"), "y")]), "value.divisor", "not proven >= 1"),
    "huge dimension": (graph([Node("relu", ("x",), "y")], inputs=[Input("x", (1 << 21,), 8)]), "limits.dim", "> 1048576"),
    "too many elements, opset 1": (graph([Node("relu", ("x",), "y")], inputs=[Input("x", (4096, 8192), 8)], opset=1),
                                   "limits.elements", "33554432 elements > 16777216"),
    "too many elements": (graph([Node("relu", ("x",), "y")], inputs=[Input("x", (8192, 8193), 8)]),
                          "limits.elements", "67117056 elements > 67108864"),
    "rank": (graph([Node("relu", ("x",), "y")], inputs=[Input("x", (1,) * 7, 8)]), "limits.rank", "rank 7"),
    "wrong dtype": (graph([Node("dense", ("x", "w"), "y")], {"w": np.ones((1, 4), np.int64)}),
                    "structure.dtype", "dtype int64"),
    "input bits": (graph([Node("relu", ("x",), "y")], inputs=[Input("x", (4,), 33)]), "structure.bits", "bits 33"),
    "const only": (graph([Node("relu", ("x",), "y"), Node("add", ("w", "w"), "z")], W), "node.const_only", "only constant"),
    "output not a node": (graph([Node("relu", ("x",), "y")], outputs=["x"]), "structure.outputs", "'x'"),
    "empty output": (graph([Node("slice", ("x",), "y", {"starts": (2,), "ends": (2,), "steps": (1,)})]),
                     "attrs.slice", "not a non-empty range"),
    "pool window in padding": (graph([Node("max_pool2d", ("x",), "y", {"kernel": (1, 1), "pads": (1, 0, 0, 0)})],
                                     inputs=[Input("x", (1, 2, 2), 8)]), "attrs.pads", "entirely in the padding"),
    "unknown opset": (Graph([Input("x", (4,), 8)], {}, [Node("relu", ("x",), "y")], ["y"], opset=99),
                      "structure.opset", "unknown opset 99"),
    "too many nodes, opset 1": (relu_chain(4097, opset=1), "limits.nodes", "4097 nodes > 4096"),
    "too many nodes": (relu_chain(16385), "limits.nodes", "16385 nodes > 16384"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rejected_with_named_rule(case):
    g, rule, text = CASES[case]
    with pytest.raises(cvm.VerifyError) as info:
        cvm.Model(g)
    assert info.value.rule == rule
    assert text in str(info.value)
    assert f"[rule: {rule}]" in str(info.value)


def test_message_names_the_node():
    g, _, _ = CASES["overflow"]
    with pytest.raises(cvm.VerifyError, match="node 'y'"):
        cvm.Model(g)


def test_requant_int64_rule():
    # With int32 constants and <= 32-bit inputs the product cannot leave int64, so no file can reach
    # this rule; it guards the op's own bound function against a future wider dtype.
    from cvm.ops.base import Arg, RuleError
    from cvm.ops.rescale import REQUANT
    x = Arg((4,), -(2 ** 40), 2 ** 40)
    m = Arg((1,), 2 ** 31 - 1, 2 ** 31 - 1, np.array([2 ** 31 - 1]))
    with pytest.raises(RuleError, match="beyond int64"):
        REQUANT.bound([x, m], {"shift": 0, "bits": 8, "axis": 0}, (4,))
