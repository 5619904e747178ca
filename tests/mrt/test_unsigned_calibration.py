"""Unsigned activations end to end: mse calibration sizes a non-negative tensor's threshold for the
2^bits - 1 steps it will hold (not the 2^(bits-1) - 1 of a signed one), and a tensor the verifier
proves non-negative that reaches a MAC through a sum pool (ReLU -> global average pool -> dense,
the head of ResNet and VGG) keeps its unsigned range instead of losing a bit at the dense input."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mrt import pipeline
from mrt.calibrate import calibrate, mse_threshold
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline


def _relu_pool_dense():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=(8, 5)).astype(np.float32), "d")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "d"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model, rng.normal(size=(64, 3, 6, 6)).astype(np.float32)


def test_mse_uses_the_unsigned_steps_of_a_non_negative_tensor():
    model, x = _relu_pool_dense()
    graph = run_pipeline(import_onnx(model, {"x": x.shape[1:]}), DEFAULT_PIPELINE)
    signed = calibrate(graph, x, method="mse", progress=False)
    unsigned = calibrate(graph, x, method="mse", progress=False, unsigned=True)
    relu = next(n.outputs[0] for n in graph.nodes if n.op == "relu")
    conv = next(n.outputs[0] for n in graph.nodes if n.op == "conv")
    assert unsigned[relu] > signed[relu]  # 255 steps: less clipping pays
    assert unsigned[conv] == signed[conv]  # the conv output takes negative values: signed steps


def test_mse_threshold_with_more_steps_clips_less():
    v = np.abs(np.random.default_rng(1).standard_t(3, 50_000))
    hist, edges = np.histogram(v, bins=2048, range=(0, v.max()))
    assert mse_threshold(hist, edges, 255) > mse_threshold(hist, edges, 127)


def test_a_pooled_relu_reaches_the_dense_layer_unsigned():
    model, x = _relu_pool_dense()
    on = pipeline.convert(model, x, progress=False)
    off = pipeline.convert(model, x, progress=False, unsigned_activations=False)
    dense = next(n for n in on.graph.nodes if n.op == "dense")
    t = on.analysis.tensors[dense.inputs[0]]
    assert t.lo == 0 and t.hi == 255  # the requant before the dense keeps 0..255
    assert off.analysis.tensors[next(n for n in off.graph.nodes if n.op == "dense").inputs[0]].hi <= 127
    xt = np.random.default_rng(5).normal(size=(256, 3, 6, 6)).astype(np.float32)
    graph = run_pipeline(import_onnx(model, {"x": x.shape[1:]}), DEFAULT_PIPELINE)
    want = run_float(graph, {"x": xt})["y"]
    err = {k: np.linalg.norm(m.dequantize_output(m.run(m.quantize_input(xt))) - want) for k, m in (("on", on), ("off", off))}
    assert err["on"] < err["off"]


def test_an_output_beyond_the_calibrated_range_is_not_clipped():
    """Graph outputs keep twice their calibrated range (QuantConfig.output_headroom_bits), calibrated at
    the output's 16 bits: a forecast 30% above anything calibration saw comes out whole."""
    w = numpy_helper.from_array(np.array([[1.0], [0.5]], np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    u = np.random.default_rng(2).uniform(0, 1, (256, 1))
    calib = np.concatenate([u, 1 - u], axis=1).astype(np.float32)  # y = u + (1 - u) / 2 <= 1 on calibration
    m = pipeline.convert(model, calib, progress=False)
    x = np.array([[0.99, 0.99]], np.float32)  # each feature within its calibrated range, y = 1.485
    y = float(m.dequantize_output(m.run(m.quantize_input(x))).reshape(-1)[0])
    assert abs(y - 1.485) < 0.02
