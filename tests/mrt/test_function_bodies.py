"""Ops ONNX defines by a function body, and model-local functions, import as their bodies
(mrt.onnx_import.functions): converted end to end and compared with onnxruntime's float run."""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt import pipeline
from mrt.errors import UnsupportedOp
from mrt.onnx_import import import_onnx

RNG = np.random.default_rng(7)


def _model(nodes, inputs, outputs, inits=(), opset=23, functions=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("local", 1)], functions=list(functions))
    model.ir_version = 10
    return model


def _float(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _converted(model, x):
    m = pipeline.convert(model, x, softmax="integer", progress=False)
    q = m.quantize_input(x, m.inputs[0].name)
    return m.dequantize_output(m.run(q, backend="reference"), m.outputs[0].name)


def test_rms_normalization_imports_as_its_body():
    x = RNG.normal(size=(16, 6, 32)).astype(np.float32)
    scale = numpy_helper.from_array(RNG.uniform(0.5, 1.5, 32).astype(np.float32), "scale")
    model = _model([helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=-1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 32])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6, 32])], [scale])
    assert _cosine(_converted(model, x), _float(model, {"x": x})) > 0.999


def test_an_unset_attribute_takes_the_schemas_default():
    x = RNG.normal(size=(16, 8)).astype(np.float32)
    model = _model([helper.make_node("Shrink", ["x"], ["y"], lambd=0.5)],  # bias unset: its default 0
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], opset=18)
    assert _cosine(_converted(model, x), _float(model, {"x": x})) > 0.999


def test_causal_attention_imports_as_its_body():
    feeds = {n: RNG.normal(size=(1, 2, 4, 8)).astype(np.float32) for n in "qkv"}
    model = _model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 8]) for n in "qkv"],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 8])])
    graph = import_onnx(model)
    assert {"matmul", "softmax"} <= {n.op for n in graph.nodes}
    m = pipeline.convert(model, {n: a.reshape(1, 2, 4, 8) for n, a in feeds.items()}, softmax="integer",
                         progress=False)
    got = m.run({s.name: m.quantize_input(feeds[s.name[0]], s.name) for s in m.inputs}, backend="reference")
    got = m.dequantize_output(got, m.outputs[0].name)
    assert _cosine(got, _float(model, feeds)) > 0.999  # the causal mask a constant penalty at the scores' scale


def test_a_model_local_function_is_inlined():
    body = onnx.helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                                     [helper.make_opsetid("", 18)])
    x = RNG.normal(size=(16, 4)).astype(np.float32)
    model = _model([helper.make_node("Twice", ["x"], ["y"], domain="local")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], opset=18, functions=[body])
    assert [n.op for n in import_onnx(model).nodes] == ["add"]
    assert _cosine(_converted(model, x), 2 * x) > 0.999


def test_a_body_that_cannot_import_names_the_op_it_expanded():
    model = _model([helper.make_node("Range", ["s", "e", "d"], ["y"])],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in "sed"],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M"])], opset=18)
    with pytest.raises(UnsupportedOp, match="Range"):
        import_onnx(model, {"s": (), "e": (), "d": ()})


def test_an_empty_split_piece_is_left_out_of_a_concat():
    x = RNG.normal(size=(16, 8)).astype(np.float32)
    sizes = numpy_helper.from_array(np.array([8, 0], np.int64), "sizes")
    model = _model([helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
                    helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [sizes], opset=18)
    assert _cosine(_converted(model, x), x) > 0.999


def test_a_constant_infinity_becomes_a_finite_mask_value():
    x = RNG.normal(size=(16, 4)).astype(np.float32)
    mask = numpy_helper.from_array(np.array([0, 0, -np.inf, 0], np.float32), "mask")
    model = _model([helper.make_node("Add", ["x", "mask"], ["s"]), helper.make_node("Softmax", ["s"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [mask], opset=18)
    graph = import_onnx(model)
    assert all(np.isfinite(v).all() for v in graph.initializers.values())
    got = _converted(model, x)
    assert np.all(got[:, 2] == 0) and _cosine(got, _float(model, {"x": x})) > 0.999  # masked: exactly 0


def test_dequantize_linear_imports_as_its_arithmetic():
    """DequantizeLinear of an int8 input with a per-axis scale and zero point (mrt.onnx_import.decompose)."""
    x = RNG.integers(-128, 128, size=(32, 3, 4)).astype(np.int8)
    scale = numpy_helper.from_array(np.array([0.5, 0.25, 2.0], np.float32), "scale")
    zero = numpy_helper.from_array(np.array([3, -2, 0], np.int8), "zero")
    model = _model([helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.INT8, ["N", 3, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4])], [scale, zero], opset=21)
    assert [n.op for n in import_onnx(model).nodes][-1] == "mul"
    want = (x.astype(np.float32) - np.array([3, -2, 0]).reshape(3, 1)) * np.array([0.5, 0.25, 2]).reshape(3, 1)
    assert _cosine(_converted(model, x), want) > 0.9999


@pytest.mark.parametrize("left, w_shape, x_shape", [(False, (2, 4, 5), (1, 2, 3, 4)), (True, (3, 4), (1, 2, 4, 5))])
def test_a_matmul_by_a_constant_stack_or_left_matrix_is_dense(left, w_shape, x_shape):
    """A constant on either side of a MatMul, or a stack of constant matrices, becomes dense layers
    (mrt.passes.matmul_as_dense)."""
    w = numpy_helper.from_array(RNG.normal(size=w_shape).astype(np.float32), "w")
    node = helper.make_node("MatMul", ["w", "x"] if left else ["x", "w"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w], opset=18)
    x = RNG.normal(size=(16, *x_shape[1:])).astype(np.float32)
    want = np.concatenate([_float(model, {"x": x[i:i + 1]}) for i in range(16)])
    got = _converted(model, x).reshape(want.shape)
    from mrt.passes import DEFAULT_PIPELINE, run_pipeline
    graph = run_pipeline(import_onnx(model), DEFAULT_PIPELINE)
    assert "matmul" not in {n.op for n in graph.nodes} and _cosine(got, want) > 0.999


def test_a_computed_mask_and_a_constant_causal_mask_fuse_into_one_masked_softmax():
    """softmax(q k^T + (causal + where(keep, 0, -inf))): the keep flags a table, the causal part a constant."""
    keep = helper.make_node("Where", ["keep", "zero", "ninf"], ["pad"])
    nodes = [keep, helper.make_node("Add", ["causal", "pad"], ["bias"]), helper.make_node("Add", ["s", "bias"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    inits = [numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(-np.inf), "ninf"),
             numpy_helper.from_array(np.triu(np.full((4, 4), -np.inf, np.float32), 1), "causal")]
    model = _model(nodes, [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 4, 4]),
                           helper.make_tensor_value_info("keep", TensorProto.BOOL, ["N", 1, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 4])], inits, opset=18)
    feeds = {"s": RNG.normal(size=(32, 4, 4)).astype(np.float32),
             "keep": np.concatenate([np.ones((32, 1, 2), bool), RNG.random((32, 1, 2)) < 0.7], axis=2)}
    m = pipeline.convert(model, feeds, softmax="integer", progress=False)
    from mrt.passes import DEFAULT_PIPELINE, run_pipeline
    fused = [n for n in run_pipeline(import_onnx(model), DEFAULT_PIPELINE).nodes if n.op == "masked_softmax"]
    assert len(fused) == 1 and len(fused[0].inputs) == 3  # scores, the keep flags, the causal constant
    got = m.dequantize_output(m.run({s.name: m.quantize_input(feeds[s.name], s.name) for s in m.inputs},
                                    backend="reference"), m.outputs[0].name)
    want = _float(model, feeds)
    assert _cosine(got, want) > 0.999 and np.all(got[want == 0] == 0)
