"""Element-wise functions and univariate fusion: imports checked against onnxruntime, the fusion pass
against the unfused graph, and whole conversions of activations that have no rule of their own."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, fuse_univariate, run_pipeline
from mrt.pipeline import convert

N = helper.make_node


def _const(name, value):
    value = np.asarray(value, np.float32)
    return helper.make_tensor(name, TensorProto.FLOAT, value.shape, value.reshape(-1))


def _model(nodes, inits=(), shape=(4, 6, 6), opset=20):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits))
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, x):
    return ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]


# name -> (nodes, initializers): each computes y from x the way an exporter writes it
ACTIVATIONS = {
    "silu": ([N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])], []),
    "hard_swish_op": ([N("HardSwish", ["x"], ["y"])], []),
    "hard_swish_paddle": ([N("Add", ["x", "three"], ["a"]), N("Clip", ["a", "zero", "six"], ["c"]),
                           N("Mul", ["x", "c"], ["m"]), N("Div", ["m", "six"], ["y"])],
                          [_const("three", 3), _const("zero", 0), _const("six", 6)]),
    "mish": ([N("Mish", ["x"], ["y"])], []),
    "mish_composed": ([N("Softplus", ["x"], ["s"]), N("Tanh", ["s"], ["t"]), N("Mul", ["x", "t"], ["y"])], []),
    "gelu_erf": ([N("Div", ["x", "sqrt2"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["a"]),
                  N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "half"], ["y"])],
                 [_const("sqrt2", np.sqrt(2)), _const("one", 1), _const("half", 0.5)]),
    "gelu_tanh": ([N("Gelu", ["x"], ["y"], approximate="tanh")], []),
    "gelu_op": ([N("Gelu", ["x"], ["y"])], []),
    "elu": ([N("Elu", ["x"], ["y"], alpha=0.7)], []),
    "selu": ([N("Selu", ["x"], ["y"])], []),
    "celu": ([N("Celu", ["x"], ["y"], alpha=1.3)], []),
    "softsign": ([N("Softsign", ["x"], ["y"])], []),
    "exp_log": ([N("Abs", ["x"], ["a"]), N("Add", ["a", "one"], ["b"]), N("Log", ["b"], ["l"]),
                 N("Exp", ["l"], ["y"])], [_const("one", 1)]),
    "pow_sqrt_reciprocal": ([N("Pow", ["x", "two"], ["p"]), N("Add", ["p", "one"], ["a"]), N("Sqrt", ["a"], ["s"]),
                             N("Reciprocal", ["s"], ["y"])], [_const("two", 2), _const("one", 1)]),
    "where_compare": ([N("Greater", ["x", "zero"], ["g"]), N("Neg", ["x"], ["n"]), N("Where", ["g", "x", "n"], ["y"])],
                      [_const("zero", 0)]),
    "min_max": ([N("Max", ["x", "lo"], ["a"]), N("Min", ["a", "hi"], ["y"])], [_const("lo", -0.5), _const("hi", 0.8)]),
    "thresholded_relu": ([N("ThresholdedRelu", ["x"], ["y"], alpha=0.3)], []),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_float_import_matches_onnxruntime(name):
    nodes, inits = ACTIVATIONS[name]
    model = _model(nodes, inits)
    x = np.random.default_rng(1).normal(scale=2, size=(3, 4, 6, 6)).astype(np.float32)
    g = import_onnx(model)
    want = _ort(model, x)
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=2e-6, atol=2e-6)
    fused = run_pipeline(g, DEFAULT_PIPELINE)
    assert [n.op for n in fused.nodes] == ["univariate"], name
    np.testing.assert_allclose(run_float(fused, {"x": x})["y"], want, rtol=2e-6, atol=2e-6)


def test_prelu_per_channel_and_scalar():
    slope = np.array([0.1, -0.2, 0.3, 0.5], np.float32).reshape(4, 1, 1)
    x = np.random.default_rng(2).normal(size=(3, 4, 6, 6)).astype(np.float32)
    for s in (slope, np.float32(0.25)):
        model = _model([N("PRelu", ["x", "s"], ["y"])], [_const("s", s)])
        np.testing.assert_allclose(run_float(import_onnx(model), {"x": x})["y"], _ort(model, x), rtol=1e-6)


def _conv_net(act_nodes, act_inits):
    """conv -> activation -> conv: the activation sits between two quantized points."""
    rng = np.random.default_rng(3)
    w1, w2 = rng.normal(scale=0.3, size=(4, 3, 3, 3)), rng.normal(scale=0.3, size=(2, 4, 3, 3))
    rename = {"x": "h", "y": "act_out"}
    acts = [N(n.op_type, [rename.get(i, i) for i in n.input], [rename.get(o, o) for o in n.output],
              **{a.name: helper.get_attribute_value(a) for a in n.attribute}) for n in act_nodes]
    nodes = [N("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]), *acts, N("Conv", ["act_out", "w2"], ["y"])]
    return _model(nodes, [_const("w1", w1), _const("w2", w2), *act_inits], shape=(3, 8, 8))


@pytest.mark.parametrize("name", ["silu", "hard_swish_paddle", "mish", "gelu_erf", "selu", "where_compare"])
def test_fused_activation_converts_close_to_float(name):
    model = _conv_net(*ACTIVATIONS[name])
    rng = np.random.default_rng(4)
    calib, x = rng.normal(size=(64, 3, 8, 8)).astype(np.float32), rng.normal(size=(32, 3, 8, 8)).astype(np.float32)
    m = convert(model, calib, progress=False)
    assert "lut" in {n.op for n in m.graph.nodes}
    got = m.dequantize_output(m.run(m.quantize_input(x), backend="numba"))
    ref = m.dequantize_output(m.run(m.quantize_input(x), backend="reference"))
    np.testing.assert_array_equal(got, ref)
    want = _ort(model, x)
    cos = (got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want)
    assert cos > 0.995, (name, cos)


def test_lone_rule_ops_are_not_fused():
    """relu then a constant multiply keeps its rules (cheaper than a table)."""
    model = _model([N("Relu", ["x"], ["r"]), N("Mul", ["r", "k"], ["y"])], [_const("k", 0.5)])
    g = fuse_univariate(import_onnx(model))
    assert [n.op for n in g.nodes] == ["relu", "mul"]


def test_shared_intermediate_keeps_both_consumers():
    """s = sigmoid(x) read by the fused x * s and by a second output: both stay right."""
    nodes = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"]), N("Identity", ["s"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "yz"])
    model = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(5).normal(size=(4, 5)).astype(np.float32)
    g = run_pipeline(import_onnx(model), DEFAULT_PIPELINE)
    out = run_float(g, {"x": x})
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_allclose(out["y"], want[0], rtol=1e-6)
    np.testing.assert_allclose(out[g.outputs[1]], want[1], rtol=1e-6)


@pytest.mark.parametrize("groups", [1, 2])
def test_batchnorm_folds_into_conv_transpose(groups):
    rng = np.random.default_rng(6)
    c = 4
    inits = [_const("w", rng.normal(size=(c, 6 // groups, 3, 3))), _const("sc", rng.uniform(0.5, 2, 6)),
             _const("b", rng.normal(size=6)), _const("m", rng.normal(size=6)), _const("v", rng.uniform(0.5, 2, 6))]
    nodes = [N("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], group=groups),
             N("BatchNormalization", ["t", "sc", "b", "m", "v"], ["y"])]
    model = _model(nodes, inits, shape=(c, 5, 5))
    g = run_pipeline(import_onnx(model), DEFAULT_PIPELINE)
    assert [n.op for n in g.nodes] == ["conv_transpose"]
    x = rng.normal(size=(2, c, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], _ort(model, x), rtol=1e-4, atol=1e-4)
