"""Cross-layer equalization: the float function is unchanged, channel ranges are balanced, and on a
model whose channels span orders of magnitude the integer model gets closer to float."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mrt
from mrt.evaluate import cosine
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.passes.equalize import equalize, pairs


def _model(depthwise: bool) -> onnx.ModelProto:
    """conv 3->8, relu, (depthwise 8 or conv 8->8), relu, conv 8->4, flatten, gemm: output channels of
    the first conv scaled by 10^(-2..2)."""
    rng = np.random.default_rng(0)
    spread = 10.0 ** np.linspace(-2, 2, 8)
    w1 = rng.normal(size=(8, 3, 3, 3)) * spread[:, None, None, None]
    w2 = rng.normal(size=(8, 1, 3, 3)) if depthwise else rng.normal(size=(8, 8, 3, 3)) / spread[None, :, None, None]
    w3 = rng.normal(size=(4, 8, 1, 1))
    wg = rng.normal(size=(4 * 6 * 6, 5))
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for a, n in
             ((w1, "w1"), (rng.normal(size=8) * spread, "b1"), (w2, "w2"), (rng.normal(size=8), "b2"),
              (w3, "w3"), (wg, "wg"))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8 if depthwise else 1),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["c3"], strides=[1, 1]),
             helper.make_node("Flatten", ["c3"], ["f"]),
             helper.make_node("MatMul", ["f", "wg"], ["y"])]
    graph = helper.make_graph(nodes, "eq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x(n=64, seed=1):
    return np.random.default_rng(seed).normal(size=(n, 3, 6, 6)).astype(np.float32)


def test_float_function_unchanged_and_ranges_balanced():
    for depthwise in (False, True):
        g = run_pipeline(import_onnx(_model(depthwise)), DEFAULT_PIPELINE)
        eq = equalize(g)
        x = _x()
        before, after = run_float(g, {"x": x})[g.outputs[0]], run_float(eq, {"x": x})[eq.outputs[0]]
        np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4 * np.abs(before).max())
        assert len(pairs(g)) == 2
        p, _, q = pairs(eq)[0]
        r1 = np.abs(eq.initializers[p.inputs[1]]).reshape(8, -1).max(axis=1)
        assert r1.max() / r1.min() < 100  # was 10^4 before


def test_equalized_conversion_is_closer_to_float():
    model, calib, x = _model(False), _x(64, 1), _x(128, 2)
    ref = run_float(import_onnx(model), {"x": x})
    ref = ref[next(iter(k for k in ref if k == "y"), None) or list(ref)[-1]]
    plain = mrt.convert(model, calib, progress=False)
    equal = mrt.convert(model, calib, progress=False, equalize=True)
    out = {name: m.dequantize_output(m.run(m.quantize_input(x))) for name, m in (("plain", plain), ("eq", equal))}
    assert cosine(out["eq"], ref) > cosine(out["plain"], ref)
    assert equal.hash != plain.hash
