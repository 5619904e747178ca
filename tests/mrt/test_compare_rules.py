"""Comparisons, Where and Max/Min of two activations through the integer pipeline (mrt.quantize.rules_compare):
0/1 flags exact at scale 1 on integer inputs, and Where/Max/Min as close to float as their operands' scale."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from mrt.pipeline import convert
from tests.mrt.conftest import IR_VERSION, ort_run

N = helper.make_node


def _model(nodes, inputs, out_type=TensorProto.BOOL):
    graph = helper.make_graph(nodes, "cmp", [helper.make_tensor_value_info(n, t, ["N", 6]) for n, t in inputs.items()],
                              [helper.make_tensor_value_info("y", out_type, None)])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])


def _run(model, feeds):
    m = convert(model, feeds, progress=False)
    x = {s.name: m.quantize_input(feeds[s.name], s.name) for s in m.inputs}
    y = m.run(x, backend="reference")
    return m.dequantize_output(y, m.outputs[0].name)


@pytest.mark.parametrize("op", ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"])
def test_comparisons_of_integers_are_exact(op):
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(-20, 20, (64, 6)), "b": rng.integers(-20, 20, (64, 6))}
    model = _model([N(op, ["a", "b"], ["y"])], {"a": TensorProto.INT64, "b": TensorProto.INT64})
    want = ort_run(model, feeds)["y"]
    np.testing.assert_array_equal(_run(model, feeds), want.astype(np.float64))


def test_where_picks_by_a_computed_flag():
    rng = np.random.default_rng(1)
    feeds = {"a": rng.standard_normal((64, 6)).astype(np.float32), "b": rng.standard_normal((64, 6)).astype(np.float32)}
    model = _model([N("Greater", ["a", "b"], ["c"]), N("Where", ["c", "b", "a"], ["y"])],
                   {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT}, TensorProto.FLOAT)
    want = ort_run(model, feeds)["y"]  # the smaller of the two
    got = _run(model, feeds)
    assert np.abs(got - want).max() < 0.05


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_and_min_of_two_activations(op):
    rng = np.random.default_rng(2)
    feeds = {"a": rng.standard_normal((64, 6)).astype(np.float32), "b": rng.standard_normal((64, 6)).astype(np.float32)}
    model = _model([N(op, ["a", "b"], ["y"])], {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT}, TensorProto.FLOAT)
    want = ort_run(model, feeds)["y"]
    assert np.abs(_run(model, feeds) - want).max() < 0.05
