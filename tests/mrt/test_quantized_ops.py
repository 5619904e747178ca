"""ONNX's quantized-integer ops (mrt.onnx_import.decompose_qlinear) through the whole pipeline, against onnxruntime,
and integer outputs at the width their proven range needs (mrt.quantize.emit): exact where every value the chain
computes is one the activation bits resolve, within one step of ONNX's where the input is a float activation."""
from functools import lru_cache

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.pipeline import convert
from tests.mrt.conftest import IR_VERSION, ort_run

N = helper.make_node
WIDTH = 6


def _model(node, inputs: dict, out_type, inits=None, opset=21):
    """inputs: {name: (elem type, per-sample shape)}; inits: {name: array}."""
    ins = [helper.make_tensor_value_info(n, t, ["N", *s]) for n, (t, s) in inputs.items()]
    graph = helper.make_graph([node], "q", ins, [helper.make_tensor_value_info("y", out_type, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", opset)])


def _run(m, feeds):
    x = {s.name: m.quantize_input(feeds[s.name], s.name) for s in m.inputs}
    y = m.run(x, backend="reference")
    return m.dequantize_output(y, m.outputs[0].name)


def _compare(model, feeds):
    """(CVM's integers, onnxruntime's) of the converted model on the calibration data itself."""
    return _run(convert(model, feeds, progress=False), feeds), ort_run(model, feeds)["y"].astype(np.float64)


# ---------------------------------------------------------------- QuantizeLinear

GRID = np.arange(-127, 128, dtype=np.float32).reshape(-1, 1) * np.float32(0.05)  # an input the 8 bits resolve


@pytest.mark.parametrize("zero", [np.uint8(10), np.uint8(240), np.int8(-100), np.int8(100)])
def test_quantize_linear_of_a_resolved_input_is_exact_and_saturates(zero):
    """x on the activation grid (threshold 127 steps of 0.05), y_scale 0.15: round(k / 3) has no ties."""
    to = TensorProto.UINT8 if zero.dtype == np.uint8 else TensorProto.INT8
    model = _model(N("QuantizeLinear", ["x", "s", "z"], ["y"]), {"x": (TensorProto.FLOAT, (WIDTH,))}, to,
                   {"s": np.float32(0.15), "z": zero})
    x = np.repeat(GRID, WIDTH, axis=1)
    got, want = _compare(model, {"x": x})
    np.testing.assert_array_equal(got, want)
    assert want.min() in (0, -128) or want.max() in (255, 127)  # some values saturate


def test_quantize_linear_per_axis_is_within_one_step():
    model = _model(N("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1), {"x": (TensorProto.FLOAT, (3,))},
                   TensorProto.UINT8, {"s": np.float32([0.02, 0.05, 0.01]), "z": np.uint8([128, 100, 0])})
    x = np.random.default_rng(1).normal(size=(64, 3)).astype(np.float32)
    got, want = _compare(model, {"x": x})
    assert np.abs(got - want).max() <= 1 and np.mean(got == want) > 0.5


def test_quantize_linear_to_a_float_type_and_dynamic_quantize_are_refused():
    to_float8 = _model(N("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.FLOAT8E4M3FN),
                       {"x": (TensorProto.FLOAT, (WIDTH,))}, TensorProto.FLOAT8E4M3FN, {"s": np.float32(0.1)})
    with pytest.raises(UnsupportedOp, match="QuantizeLinear to FLOAT8E4M3FN"):
        convert(to_float8, {"x": np.ones((4, WIDTH), np.float32)}, progress=False)
    dynamic = helper.make_graph([N("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "d",
                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
                                [helper.make_tensor_value_info(n, t, None) for n, t in
                                 (("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8))])
    model = helper.make_model(dynamic, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(UnsupportedOp, match="data-dependent scale"):
        convert(model, {"x": np.ones((4, WIDTH), np.float32)}, progress=False)


def test_a_computed_scale_is_refused_by_name():
    model = _model(N("QuantizeLinear", ["x", "s"], ["y"]), {"x": (TensorProto.FLOAT, (WIDTH,)),
                                                          "s": (TensorProto.FLOAT, (WIDTH,))}, TensorProto.UINT8)
    with pytest.raises(UnsupportedOp, match="QuantizeLinear scale must be a constant"):
        convert(model, {"x": np.ones((4, WIDTH), np.float32), "s": np.ones((4, WIDTH), np.float32)}, progress=False)


# ---------------------------------------------------------------- MatMulInteger, ConvInteger


@lru_cache(maxsize=None)
def _matmul_integer(resolved: bool):
    """a (uint8, zero point 128) by a constant b (uint8, zero point 100 per column): with `resolved`, every centred
    value within +-127 and each column reaching 127, so activations and weights are read at scale 1."""
    rng = np.random.default_rng(2)
    b = rng.integers(0, 228 if resolved else 256, (WIDTH, 4)).astype(np.uint8)
    if resolved:
        b[0] = 227
    model = _model(N("MatMulInteger", ["a", "b", "az", "bz"], ["y"]), {"a": (TensorProto.UINT8, (WIDTH,))},
                   TensorProto.INT32, {"b": b, "az": np.uint8(128), "bz": np.full(4, 100, np.uint8)}, opset=13)
    a = rng.integers(1, 256, (40, WIDTH)).astype(np.uint8)
    a[:2] = [[1], [255]]  # the calibrated range is +-127 after the zero point
    return _compare(model, {"a": a})


def test_matmul_integer_is_exact_where_its_operands_are_resolved():
    got, want = _matmul_integer(True)
    np.testing.assert_array_equal(got, want)


def test_matmul_integer_is_approximate_otherwise():
    """Weights past +-127 after the zero point are rounded to the weight bits: the integers move, relatively little."""
    got, want = _matmul_integer(False)
    assert np.abs(got - want).max() / np.abs(want).max() < 0.02


def test_conv_integer_against_onnxruntime():
    rng = np.random.default_rng(3)
    w = rng.integers(0, 256, (2, 1, 2, 2)).astype(np.uint8)
    node = N("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    model = _model(node, {"x": (TensorProto.UINT8, (1, 5, 5))}, TensorProto.INT32,
                   {"w": w, "xz": np.uint8(128), "wz": np.uint8(120)}, opset=13)
    got, want = _compare(model, {"x": rng.integers(0, 256, (16, 1, 5, 5)).astype(np.uint8)})
    assert np.abs(got - want).max() / np.abs(want).max() < 0.02


# ---------------------------------------------------------------- QLinearMatMul, QLinearConv


def test_qlinear_matmul_is_within_one_step():
    rng = np.random.default_rng(4)
    inits = {"as": np.float32(0.02), "az": np.uint8(120), "b": rng.integers(0, 256, (WIDTH, 3)).astype(np.uint8),
             "bs": np.float32([0.01, 0.02, 0.015]), "bz": np.uint8([128, 110, 140]), "ys": np.float32(0.2),
             "yz": np.uint8(128)}
    node = N("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    model = _model(node, {"a": (TensorProto.UINT8, (WIDTH,))}, TensorProto.UINT8, inits)
    got, want = _compare(model, {"a": rng.integers(0, 256, (40, WIDTH)).astype(np.uint8)})
    assert np.abs(got - want).max() <= 1 and np.mean(got == want) > 0.5


def test_qlinear_conv_with_bias_is_close():
    """Nine taps of activations and weights each rounded to 8 bits: a few outputs move by up to 3 steps."""
    rng = np.random.default_rng(5)
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128), "w": rng.integers(-127, 128, (2, 1, 3, 3)).astype(np.int8),
             "ws": np.float32([0.01, 0.03]), "wz": np.int8([0, 0]), "ys": np.float32(0.05), "yz": np.uint8(100),
             "B": np.int32([500, -800])}
    node = N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"], ["y"], pads=[1, 1, 1, 1])
    model = _model(node, {"x": (TensorProto.UINT8, (1, 6, 6))}, TensorProto.UINT8, inits, opset=13)
    got, want = _compare(model, {"x": rng.integers(0, 256, (16, 1, 6, 6)).astype(np.uint8)})
    assert np.abs(got - want).max() <= 3 and np.mean(np.abs(got - want) <= 1) > 0.95 and np.mean(got == want) > 0.5


# ---------------------------------------------------------------- integer outputs at their width


def test_an_integer_output_keeps_the_bits_its_range_needs():
    """A uint16 BitwiseNot reaches 65535, past the 16-bit outputs of float tensors: it comes out whole."""
    model = _model(N("BitwiseNot", ["x"], ["y"]), {"x": (TensorProto.UINT16, (WIDTH,))}, TensorProto.UINT16, opset=18)
    x = np.arange(0, 240).reshape(-1, WIDTH).astype(np.uint16)
    m = convert(model, {"x": x}, progress=False)
    assert m.outputs[0].bits > 16
    np.testing.assert_array_equal(_run(m, {"x": x}), 65535 - x.astype(np.int64))


def test_a_float_output_keeps_its_16_bits():
    model = _model(N("Relu", ["x"], ["y"]), {"x": (TensorProto.FLOAT, (WIDTH,))}, TensorProto.FLOAT)
    m = convert(model, {"x": np.random.default_rng(6).normal(size=(16, WIDTH)).astype(np.float32)}, progress=False)
    assert m.outputs[0].bits == 16
