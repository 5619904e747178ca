"""Unsigned activations: a relu output holds 0..255 at 8 bits (stored int16), which halves its
quantization step; the option can be turned off, and it does not change gas."""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mrt import pipeline

FIX = Path(__file__).parents[2] / "fixtures"


def _mnist():
    with np.load(FIX / "data" / "mnist_cnn_calib.npz") as d:
        return FIX / "models" / "mnist_cnn.onnx", d["x"][:64]


def test_relu_outputs_use_the_sign_bit():
    path, calib = _mnist()
    on = pipeline.convert(path, calib, progress=False)
    off = pipeline.convert(path, calib, progress=False, unsigned_activations=False)
    relus = [n.output for n in on.graph.nodes if n.op == "relu"]
    assert relus and all(on.analysis.tensors[r].hi == 255 and on.analysis.tensors[r].lo == 0 for r in relus)
    assert all(off.analysis.tensors[n.output].hi <= 127 for n in off.graph.nodes if n.op == "relu")
    assert on.gas == off.gas and on.meta["quantization"]["unsigned_activations"] is True


def test_a_sigmoid_table_is_unsigned():
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Sigmoid", ["h"], ["s"]),
                           helper.make_node("Add", ["s", "s"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    m = pipeline.convert(model, x, progress=False)
    lut = next(n for n in m.graph.nodes if n.op == "lut")
    assert m.analysis.tensors[lut.output].lo >= 0 and m.analysis.tensors[lut.output].hi > 127
