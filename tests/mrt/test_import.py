"""import_onnx against onnxruntime on hand-built models, and its loud refusals."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx

N = helper.make_node


def f32(a):
    return np.asarray(a, dtype=np.float32)


def i64(a):
    return np.asarray(a, dtype=np.int64)


def assert_matches_ort(model, ort, rng, batch=4, atol=1e-5):
    graph = import_onnx(model)
    feeds = {s.name: f32(rng.standard_normal((batch, *s.shape))) for s in graph.inputs}
    want, got = ort(model, feeds), run_float(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=atol, err_msg=name)
    return graph


# -- models that import --------------------------------------------------------------------------

def test_torch_style_shape_plumbing(onnx_model, ort, rng):
    """x.view(x.size(0), -1) exports Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    inits = {"zero": i64(0), "axes0": i64([0]), "minus1": i64([-1]),
             "w": f32(rng.standard_normal((3, 2, 3, 3)))}
    model = onnx_model([
        N("Conv", ["x", "w"], ["c"]), N("Shape", ["c"], ["s"]),
        N("Gather", ["s", "zero"], ["n"], axis=0), N("Unsqueeze", ["n", "axes0"], ["n1"]),
        N("Concat", ["n1", "minus1"], ["target"], axis=0), N("Reshape", ["c", "target"], ["y"]),
    ], {"x": (2, 5, 5)}, ["y"], inits)
    g = assert_matches_ort(model, ort, rng)
    assert [n.op for n in g.nodes] == ["conv", "reshape"]
    assert g.nodes[1].attrs == {"shape": (27,)} and g.shapes["y"] == (27,)


def test_reshape_forms_that_keep_the_batch(onnx_model, ort, rng):
    """view(-1, K) with K the whole sample, a 0 head (copy) and -1 in the tail."""
    model = onnx_model([
        N("Reshape", ["x", "t1"], ["a"]), N("Reshape", ["a", "t2"], ["b"]),
        N("Constant", [], ["t3"], value=numpy_helper.from_array(i64([0, 4, -1]))),
        N("Reshape", ["b", "t3"], ["y"]),
    ], {"x": (2, 3, 4)}, ["y"], {"t1": i64([-1, 24]), "t2": i64([0, 6, -1])})
    g = assert_matches_ort(model, ort, rng)
    assert g.shapes == {"x": (2, 3, 4), "a": (24,), "b": (6, 4), "y": (4, 6)}


def test_batch_one_model(ort, rng):
    """A model exported with batch size 1 (Reshape to [1, -1]) runs at any batch size."""
    graph = helper.make_graph(
        [N("Reshape", ["x", "t"], ["r"]), N("Relu", ["r"], ["y"])], "b1",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])],
        [numpy_helper.from_array(i64([1, -1]), "t")])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(model)
    x = f32(rng.standard_normal((1, 2, 3)))
    np.testing.assert_allclose(run_float(g, x)["y"], ort(model, {"x": x})["y"])
    xs = f32(rng.standard_normal((3, 2, 3)))
    np.testing.assert_allclose(run_float(g, xs)["y"], np.maximum(xs.reshape(3, 6), 0))


def test_gemm_attributes_fold_into_dense(onnx_model, ort, rng):
    inits = {"b": f32(rng.standard_normal((5, 6))), "c": f32(rng.standard_normal((1, 5))),
             "b2": f32(rng.standard_normal((5, 3))), "c2": f32(0.5)}
    model = onnx_model([
        N("Gemm", ["x", "b", "c"], ["h"], transB=1, alpha=0.5, beta=2.0),
        N("Gemm", ["h", "b2", "c2"], ["y"], beta=-1.0),
    ], {"x": (6,)}, ["y"], inits)
    g = assert_matches_ort(model, ort, rng)
    assert [n.op for n in g.nodes] == ["dense", "dense"]
    assert g.initializers[g.nodes[1].inputs[1]].shape == (3, 5)


@pytest.mark.parametrize("attrs", [
    dict(auto_pad="SAME_UPPER", strides=[2, 2]), dict(auto_pad="SAME_LOWER", strides=[2, 1]),
    dict(auto_pad="VALID", strides=[1, 2]), dict(pads=[0, 1, 2, 1], dilations=[2, 1]),
    dict(group=2, pads=[1, 1, 1, 1]),
], ids=["same_upper", "same_lower", "valid", "dilated", "grouped"])
def test_conv_padding_forms(attrs, onnx_model, ort, rng):
    groups = attrs.get("group", 1)
    inits = {"w": f32(rng.standard_normal((4, 4 // groups, 3, 2))),
             "b": f32(rng.standard_normal(4))}
    model = onnx_model([N("Conv", ["x", "w", "b"], ["y"], **attrs)], {"x": (4, 7, 6)}, ["y"], inits)
    assert_matches_ort(model, ort, rng, atol=1e-4)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1),
    dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2]),
], ids=["ceil", "ceil_pads", "same_upper"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_forms(op, attrs, onnx_model, ort, rng):
    model = onnx_model([N(op, ["x"], ["y"], **attrs)], {"x": (2, 6, 7)}, ["y"])
    assert_matches_ort(model, ort, rng)


def test_activations_and_layout(onnx_model, ort, rng):
    inits = {"lo": f32(-0.5), "hi": f32(0.7), "pads": i64([0, 0, 1, 0, 0, 2]), "pv": f32(0.25),
             "k": f32(rng.standard_normal(6))}
    model = onnx_model([
        N("LeakyRelu", ["x"], ["a"], alpha=0.1), N("Clip", ["a", "lo", "hi"], ["b"]),
        N("HardSigmoid", ["x"], ["c"], alpha=0.3, beta=0.4), N("Tanh", ["x"], ["d"]),
        N("Sigmoid", ["x"], ["e"]), N("Clip", ["x", "", "hi"], ["f"]),
        N("Concat", ["b", "c", "d", "e", "f"], ["g"], axis=-1),
        N("Transpose", ["g"], ["h"], perm=[0, 2, 1]), N("Softmax", ["h"], ["i"], axis=1),
        N("Pad", ["i", "pads", "pv"], ["j"], mode="constant"), N("Mul", ["j", "k"], ["k2"]),
        N("Div", ["k2", "hi"], ["y"]),
    ], {"x": (3, 4)}, ["y"], inits)
    assert_matches_ort(model, ort, rng)


def test_matmul_of_two_activations(onnx_model, ort, rng):
    model = onnx_model([N("MatMul", ["a", "b"], ["y"])], {"a": (2, 3, 4), "b": (2, 4, 5)}, ["y"])
    g = assert_matches_ort(model, ort, rng)
    assert g.nodes[0].op == "matmul" and g.shapes["y"] == (2, 3, 5)


def test_constant_folding_of_float_subgraphs(onnx_model, ort, rng):
    """Weights computed from constants (Transpose, Mul) are folded at import."""
    model = onnx_model([
        N("Constant", [], ["s"], value_float=3.0), N("Transpose", ["w"], ["wt"]),
        N("Mul", ["wt", "s"], ["ws"]), N("MatMul", ["x", "ws"], ["y"]),
    ], {"x": (4,)}, ["y"], {"w": f32(rng.standard_normal((2, 4)))})
    g = assert_matches_ort(model, ort, rng)
    assert [n.op for n in g.nodes] == ["dense"]


# -- scikit-learn ----------------------------------------------------------------------------

def _linear_classifier(n_features, coefs, intercepts, labels, post):
    node = N("LinearClassifier", ["x"], ["label", "scores"], domain="ai.onnx.ml",
             coefficients=list(coefs), intercepts=list(intercepts), classlabels_ints=labels,
             post_transform=post)
    graph = helper.make_graph(
        [node], "lc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n_features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
    return helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_binary_linear_classifier_like_onnxruntime(post, ort, rng):
    """One score column, two classes: expanded to two columns exactly as onnxruntime does."""
    model = _linear_classifier(3, rng.standard_normal(3), [0.3], [0, 1], post)
    g = assert_matches_ort(model, ort, rng, batch=8)
    assert g.outputs == ("scores",) and g.shapes["scores"] == (2,)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
def test_multiclass_linear_classifier_like_onnxruntime(post, ort, rng):
    model = _linear_classifier(3, rng.standard_normal(12), rng.standard_normal(4), [0, 1, 2, 3],
                               post)
    assert_matches_ort(model, ort, rng, batch=8)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_like_onnxruntime(norm, ort, rng):
    node = N("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm=norm)
    graph = helper.make_graph([node], "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    assert_matches_ort(model, ort, rng)


@pytest.mark.parametrize("dataset", ["breast_cancer", "iris"])
def test_sklearn_pipeline(dataset, ort):
    """Pipeline(StandardScaler, LogisticRegression) through skl2onnx with zipmap off: the graph's
    one output is the probabilities; the label output is dropped."""
    from skl2onnx import to_onnx
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    x = x.astype(np.float32)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    model = to_onnx(pipe, x[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 1})
    model.ir_version = 8
    g = import_onnx(model)
    assert g.outputs == ("probabilities",)
    assert "normalize" not in [n.op for n in g.nodes]  # Normalizer L1 after softmax: identity
    got = run_float(g, x)["probabilities"]
    np.testing.assert_allclose(got, ort(model, {"X": x})["probabilities"], atol=1e-5)
    np.testing.assert_allclose(got, pipe.predict_proba(x), atol=1e-5)


# -- loud refusals ---------------------------------------------------------------------------

REFUSED = {
    "unknown_op": ([N("NonZero", ["x"], ["y"], name="e1")], {}, "NonZero node 'e1': op NonZero"),
    "reshape_literal_batch": ([N("Reshape", ["x", "t"], ["y"], name="r")], {"t": i64([4, 6])},
                              "Reshape node 'r': cannot reshape [1, 2, 3] to [4, 6]"),
    "pad_wrap": ([N("Pad", ["x", "p"], ["y"], mode="wrap", name="p")],
                 {"p": i64([0, 0, 1, 0, 0, 1])}, "mode 'wrap'"),
    "conv_weight_input": ([N("Conv", ["x", "x"], ["y"], name="c")], {}, "Conv weight"),
    "unknown_attribute": ([N("Relu", ["x"], ["y"], name="r", foo=1)], {}, "['foo']"),
    "shape_arithmetic": ([N("Shape", ["x"], ["s"]), N("Mul", ["s", "two"], ["t"], name="m"),
                          N("Reshape", ["x", "t"], ["y"])], {"two": i64(2)}, "cannot reshape [1, 2, 3] to [2, 4, 6]"),
    "random_op": ([N("RandomNormal", [], ["r"], shape=[2, 3], name="rnd"),
                   N("Add", ["x", "r"], ["y"])], {}, "RandomNormal node 'rnd'"),
    "maxpool_indices": ([N("MaxPool", ["x"], ["y", "i"], kernel_shape=[2], name="m")], {},
                        "Indices"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_op(case, onnx_model):
    nodes, inits, message = REFUSED[case]
    model = onnx_model(nodes, {"x": (2, 3)}, ["y"], inits)
    with pytest.raises(UnsupportedOp, match=message.replace("[", r"\[").replace("]", r"\]")):
        import_onnx(model)


def _with_input(dims, elem=TensorProto.FLOAT, opset=17):
    graph = helper.make_graph([N("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem, dims)],
                              [helper.make_tensor_value_info("y", elem, None)])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("model, message", [
    (_with_input(["N", "M"]), "are symbolic; fix them with --input-shape"),
    (_with_input(["N", 3], TensorProto.STRING), "STRING inputs are not supported"),
    (_with_input(["N", 3], opset=6), "opsets 7..28"),
    (_with_input(["N", 3], opset=29), "opsets 7..28"),
], ids=["symbolic_dim", "string_input", "too_old_opset", "too_new_opset"])
def test_refused_inputs_and_opsets(model, message):
    with pytest.raises(UnsupportedOp, match=message):
        import_onnx(model)


@pytest.mark.parametrize("opset", [7, 9, 11, 12])
def test_old_opsets_are_upgraded(opset):
    """Clip's min/max were attributes before opset 11 and Softmax coerced to 2-D before 13: the
    upgraded model computes what the old one did (onnxruntime runs the original)."""
    import onnxruntime as ort
    clip = (N("Clip", ["x"], ["c"], min=-0.5, max=0.75) if opset < 11 else
            N("Clip", ["x", "lo", "hi"], ["c"]))
    inits = [] if opset < 11 else [helper.make_tensor("lo", TensorProto.FLOAT, [], [-0.5]),
                                   helper.make_tensor("hi", TensorProto.FLOAT, [], [0.75])]
    graph = helper.make_graph([clip, N("Softmax", ["c"], ["y"], axis=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, ir_version=7, opset_imports=[helper.make_opsetid("", opset)])
    x = np.random.default_rng(opset).normal(size=(4, 5)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    g = import_onnx(model)
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=1e-6, atol=1e-7)


def test_symbolic_dims_fixed_by_given_shape():
    g = import_onnx(_with_input(["N", "C", 4]), {"x": (3, 4)})
    assert g.inputs[0].shape == (3, 4)
    with pytest.raises(UnsupportedOp, match="does not fit the declared per-sample dims"):
        import_onnx(_with_input(["N", "C", 4]), {"x": (3, 5)})
    with pytest.raises(UnsupportedOp, match="not graph inputs"):
        import_onnx(_with_input(["N", "C", 4]), {"a": (3, 4), "b": (1,)})


def test_import_from_path_and_bytes(onnx_model, tmp_path):
    model = onnx_model([N("Relu", ["x"], ["y"])], {"x": (3,)}, ["y"])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert str(import_onnx(path)) == str(import_onnx(str(path))) == \
        str(import_onnx(model.SerializeToString()))
    with pytest.raises(TypeError):
        import_onnx(42)
