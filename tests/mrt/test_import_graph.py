"""The float graph IR (mrt.graph) and the float interpreter (mrt.float_exec): queries, printing,
copying, the checks a Graph makes when built, batch independence and activation capture."""
import numpy as np
import pytest

from mrt.errors import GraphError
from mrt.float_exec import run_float
from mrt.graph import Graph, Node, TensorSpec, toposort


def f32(a):
    return np.asarray(a, dtype=np.float32)


def small_graph(rng):
    return Graph(
        inputs=[TensorSpec("x", (2, 4, 4))], outputs=["y"],
        initializers={"w": f32(rng.standard_normal((3, 2, 3, 3))), "b": f32(np.zeros(3)),
                      "fw": f32(rng.standard_normal((5, 12)))},
        nodes=[Node("conv", ("x", "w", "b"), ("c",), {"strides": [1, 1], "pads": [0, 0, 0, 0],
                                                      "dilations": [1, 1], "groups": 1}, "conv1"),
               Node("relu", ("c",), ("r",), {}, "relu1"),
               Node("flatten", ("r",), ("f",), {}, "flat"),
               Node("dense", ("f", "fw"), ("y",), {}, "fc")],
        name="small")


def test_queries_shapes_and_printing(rng):
    g = small_graph(rng)
    assert g.shapes == {"x": (2, 4, 4), "c": (3, 2, 2), "r": (3, 2, 2), "f": (12,), "y": (5,)}
    assert g.producer("r").name == "relu1" and g.producer("x") is None
    assert [n.name for n in g.consumers("r")] == ["flat"]
    assert g.is_constant("w") and not g.is_constant("c")
    assert g.nodes[0].attrs["strides"] == (1, 1)  # attributes are frozen to tuples
    text = str(g)
    assert text.splitlines()[0] == "graph small"
    assert "c = conv(x, w, b) {dilations=(1, 1), groups=1, pads=(0, 0, 0, 0), strides=(1, 1)}" \
        "  # conv1  -> [3, 2, 2]" in text
    assert sum(line.startswith("  ") and "=" in line for line in text.splitlines()) == 4


def test_copy_is_deep(rng):
    g = small_graph(rng)
    c = g.copy()
    c.initializers["w"][...] = 0
    assert g.initializers["w"].any()
    assert str(c).replace("w: float32", "") == str(g).replace("w: float32", "")


def test_toposort_and_order_check(rng):
    g = small_graph(rng)
    shuffled = list(g.nodes[::-1])
    with pytest.raises(GraphError, match="topologically ordered"):
        g.replace(nodes=shuffled)
    assert toposort(shuffled, ["x", *g.initializers]) == g.nodes
    with pytest.raises(GraphError, match="undefined or cyclic"):
        toposort([Node("relu", ("a",), ("b",)), Node("relu", ("b",), ("a",))], ["x"])


@pytest.mark.parametrize("node, message", [
    (Node("swizzle", ("x",), ("y",)), "unknown op 'swizzle'"),
    (Node("relu", ("x",), ("y",), {"alpha": 1.0}), "attributes"),
    (Node("add", ("x",), ("y",)), "takes 2..2 inputs"),
    (Node("transpose", ("x",), ("y",), {"perm": (1, 0, 2, 3)}), "moves the batch axis"),
    (Node("softmax", ("x",), ("y",), {"axis": 0}), "batch axis"),
    (Node("sum", ("x",), ("y",), {"axes": (0, 1), "keepdims": True}), "non-batch axes"),
    (Node("reshape", ("x",), ("y",), {"shape": (5,)}), "cannot reshape"),
    (Node("concat", ("x", "w"), ("y",), {"axis": 1}), "every input must be batched"),
    (Node("div", ("x", "x"), ("y",)), "divisor must be a constant"),
    (Node("add", ("x", "bad"), ("y",)), "broadcasts against the batch axis"),
    (Node("matmul", ("x", "w"), ("y",)), "inner dims differ"),
    (Node("conv", ("x", "x"), ("y",), {"strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1),
                                       "groups": 1}), "weight must be a constant"),
], ids=lambda v: v.op if isinstance(v, Node) else "")
def test_bad_nodes_are_refused_by_name(node, message, rng):
    node = Node(node.op, node.inputs, node.outputs, node.attrs, "the_node")
    with pytest.raises(GraphError, match=message) as err:
        Graph([TensorSpec("x", (2, 4, 4))], ["y"],
              {"w": f32(np.ones((3, 2, 3, 3))), "bad": f32(np.ones((3, 1, 1, 1)))}, [node])
    assert "'the_node'" in str(err.value)


def test_bad_graph_structure():
    spec = TensorSpec("x", (3,))
    with pytest.raises(GraphError, match="defined once"):
        Graph([spec], ["y"], {}, [Node("relu", ("x",), ("y",)), Node("relu", ("x",), ("y",))])
    with pytest.raises(GraphError, match="output 'z' is not defined"):
        Graph([spec], ["z"], {}, [Node("relu", ("x",), ("y",))])
    with pytest.raises(GraphError, match="float32 or int64"):
        Graph([spec], ["y"], {"c": np.ones(3)}, [Node("add", ("x", "c"), ("y",))])


def test_run_float_is_per_sample_and_captures(rng):
    g = small_graph(rng)
    x = f32(rng.standard_normal((6, 2, 4, 4)))
    batch = run_float(g, x)["y"]
    single = np.concatenate([run_float(g, {"x": x[i:i + 1]})["y"] for i in range(6)])
    np.testing.assert_allclose(batch, single, rtol=1e-6, atol=1e-6)
    outputs, values = run_float(g, x, capture=True)
    assert set(values) == {"x", "c", "r", "f", "y"}
    assert values["r"].shape == (6, 3, 2, 2) and (values["r"] >= 0).all()
    np.testing.assert_array_equal(outputs["y"], values["y"])


def test_run_float_checks_its_inputs(rng):
    g = small_graph(rng)
    with pytest.raises(GraphError, match="shape"):
        run_float(g, f32(np.ones((1, 2, 4, 5))))
    with pytest.raises(GraphError, match="missing"):
        run_float(g, {"z": f32(np.ones((1, 2, 4, 4)))})
