"""The written-out LayerNorm older exporters emit (ReduceMean, Sub, Pow 2 or Mul, ReduceMean, Add eps, Sqrt,
Div, then Mul gamma / Add beta) is found by mrt.passes.fuse_layer_norm and becomes the integer layer_norm;
look-alikes that compute something else are left alone. And an opset-12 Softmax over the last axis, which
onnx.version_converter writes as Flatten -> Softmax -> Reshape, imports as one last-axis softmax
(mrt.onnx_import.softmax_upgrade), as PaddleOCR's recogniser needs."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.pipeline import convert

T, D = 6, 24  # tokens, features


def _model(variant: str = "pow", opset: int = 13, eps: float = 1e-5) -> onnx.ModelProto:
    """dense -> written-out LayerNorm over the last axis -> gamma, beta -> dense, on (N, T, D) inputs."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def reduce_mean(x, axis=-1):
        if opset >= 18:
            return node("ReduceMean", [x, const(f"ax{len(inits)}", np.array([axis], np.int64))], keepdims=1)
        return node("ReduceMean", [x], axes=[axis], keepdims=1)

    h = node("Add", [node("MatMul", ["x", const("w0", rng.normal(0, 0.5, (D, D)).astype(np.float32))]),
                     const("b0", rng.normal(0, 2, D).astype(np.float32))])
    d = node("Sub", [h, reduce_mean(h, 1 if variant == "axis1" else -1)])
    sq = node("Mul", [d, d]) if variant == "mul" else \
        node("Pow", [d, const("p", np.float32(3.0 if variant == "cube" else 2.0))])
    std = node("Sqrt", [node("Add", [reduce_mean(sq), const("eps", np.float32(eps))])])
    z = node("Div", [d, std])
    z = node("Add", [node("Mul", [z, const("g", (1 + rng.normal(0, 0.3, D)).astype(np.float32))]),
                     const("be", rng.normal(0, 0.2, D).astype(np.float32))])
    nodes.append(helper.make_node("MatMul", [z, const("w1", rng.normal(0, 0.3, (D, 8)).astype(np.float32))], ["y"]))
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", T, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _data(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (n, T, D)).astype(np.float32)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op for n in run_pipeline(import_onnx(model.SerializeToString()), DEFAULT_PIPELINE).nodes]


@pytest.mark.parametrize("variant,opset", [("pow", 13), ("mul", 13), ("pow", 18), ("pow", 12)])
def test_written_out_layer_norm_becomes_layer_norm(variant, opset):
    ops = _ops(_model(variant, opset))
    assert ops.count("layer_norm") == 1
    assert not {"div_tensor", "sum", "sub"} & set(ops), ops


@pytest.mark.parametrize("variant", ["cube", "axis1"])
def test_look_alikes_are_not_fused(variant):
    """d / sqrt(mean(d^3) + eps) and a mean over another axis are not LayerNorms."""
    assert "layer_norm" not in _ops(_model(variant))


@pytest.mark.parametrize("variant,opset", [("pow", 12), ("mul", 17)])
def test_fused_model_converts_and_matches_onnxruntime(variant, opset):
    onnx_model = _model(variant, opset)
    model = convert(onnx_model.SerializeToString(), _data(128, 1), progress=False)
    assert "isqrt" in {n.op for n in model.graph.nodes}
    x = _data(64, 2)
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, {"x": x})[0]
    xq = model.quantize_input(x)
    ref, fast = model.run(xq, backend="reference"), model.run(xq, backend="numba")
    assert np.array_equal(ref, fast)
    got = (ref.astype(np.float64) * float(next(iter(model.meta["output_scales"].values())))).reshape(len(x), -1)
    want = want.reshape(len(x), -1)
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.99, cos.min()


def _softmax_model(axis: int) -> onnx.ModelProto:
    """Opset 12: Softmax(axis) of a rank-4 (N, 2, 3, 5) tensor times a constant."""
    w = numpy_helper.from_array(np.linspace(0.5, 2, 5).astype(np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=axis)]
    graph = helper.make_graph(nodes, "sm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3, 5])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])


@pytest.mark.parametrize("axis", [-1, 3])
def test_opset_12_last_axis_softmax_is_one_softmax(axis):
    onnx_model = _softmax_model(axis)
    graph = run_pipeline(import_onnx(onnx_model.SerializeToString()), DEFAULT_PIPELINE)
    assert [n.op for n in graph.nodes if n.op != "mul"] == ["softmax"]
    from mrt.float_exec import run_float
    x = np.random.default_rng(0).normal(0, 2, (4, 2, 3, 5)).astype(np.float32)
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, {"x": x})[0]
    got = run_float(graph, {"x": x})
    got = got[graph.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_opset_12_softmax_over_several_axes_keeps_its_meaning():
    """axis=2 of a rank-4 tensor normalises over axes 2 and 3 together: the upgrade's Flatten and Reshape are
    imported on one sample's whole tensor, so the softmax runs over both axes, as onnxruntime's."""
    from mrt.float_exec import run_float
    from tests.mrt.conftest import ort_run
    model = _softmax_model(2)
    g = import_onnx(model.SerializeToString())
    x = np.random.default_rng(0).standard_normal((3, *g.inputs[0].shape)).astype(np.float32)
    got = run_float(g, {g.inputs[0].name: x})
    for i in range(3):
        for name, want in ort_run(model, {g.inputs[0].name: x[i:i + 1]}).items():
            np.testing.assert_allclose(got[name][i], want[0], atol=1e-6)
