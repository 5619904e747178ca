"""ONNX ops composed of IR ops MRT already has (mrt.onnx_import.ops_tail): each a one-node model with a symbolic
batch, imported and compared with onnxruntime (onnx's reference evaluator for ops onnxruntime lacks) in float,
then converted and run on CVM."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.pipeline import convert

N = helper.make_node


def _model(node, shape, inits=None, opset=18, inputs=("x",), out_shape=None):
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, ["N", *shape]) for i in inputs],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", opset)])


def _i64(*values):
    return np.asarray(values, np.int64)


def _f32(*values):
    return np.asarray(values, np.float32)


# name: (node, per-sample input shape, initializers, opset)
CASES = {
    "hardmax": (N("Hardmax", ["x"], ["y"], axis=1), (5, 7), {}, 13),
    "hardmax_last": (N("Hardmax", ["x"], ["y"]), (3, 6), {}, 13),
    "reduce_prod": (N("ReduceProd", ["x", "a"], ["y"], keepdims=0), (3, 5, 2), {"a": _i64(2)}, 18),
    "reduce_prod_keep": (N("ReduceProd", ["x", "a"], ["y"]), (4, 3), {"a": _i64(1, 2)}, 18),
    "l1_normalization": (N("LpNormalization", ["x"], ["y"], axis=1, p=1), (4, 3), {}, 22),
    "l2_normalization": (N("LpNormalization", ["x"], ["y"]), (3, 5), {}, 22),
    "lp_pool_2d": (N("LpPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], p=2), (2, 6, 6), {}, 18),
    "lp_pool_1d": (N("LpPool", ["x"], ["y"], kernel_shape=[3], strides=[2], p=3), (2, 9), {}, 18),
    "lp_pool_3d": (N("LpPool", ["x"], ["y"], kernel_shape=[2, 2, 2], p=2), (2, 3, 4, 4), {}, 18),
    "max_pool_3d": (N("MaxPool", ["x"], ["y"], kernel_shape=[2, 3, 2], strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1]),
                    (2, 4, 5, 5), {}, 18),
    "avg_pool_3d": (N("AveragePool", ["x"], ["y"], kernel_shape=[3, 2, 2], pads=[1, 1, 0, 1, 0, 1], ceil_mode=1,
                      strides=[2, 2, 2]), (2, 5, 5, 5), {}, 19),
    "avg_pool_3d_count_pad": (N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2], pads=[1, 1, 1, 0, 0, 0],
                                count_include_pad=1), (2, 3, 4, 4), {}, 19),
    "cum_prod": (N("CumProd", ["x", "a"], ["y"]), (3, 5), {"a": _i64(2)}, 26),
    "cum_prod_reverse_exclusive": (N("CumProd", ["x", "a"], ["y"], reverse=1, exclusive=1), (6, 2), {"a": _i64(1)},
                                   26),
    "resize_cubic": (N("Resize", ["x", "", "s"], ["y"], mode="cubic"), (2, 4, 5), {"s": _f32(1, 1, 2, 1.5)}, 18),
    "resize_crop": (N("Resize", ["x", "roi", "", "z"], ["y"], mode="linear", extrapolation_value=0.5,
                      coordinate_transformation_mode="tf_crop_and_resize"), (2, 6, 6),
                    {"roi": _f32(0, 0, -0.2, 0.1, 1, 1, 0.8, 1.2), "z": _i64(1, 2, 4, 5)}, 18),
    "resize_antialias": (N("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=1), (1, 8, 8),
                         {"s": _f32(1, 1, 0.5, 0.6)}, 18),
    "grid_sample": (N("GridSample", ["x", "g"], ["y"], align_corners=1), (2, 4, 5),
                    {"g": np.random.default_rng(6).uniform(-1.1, 1.1, size=(1, 3, 6, 2)).astype(np.float32)}, 16),
    "col2im": (N("Col2Im", ["x", "i", "b"], ["y"], strides=[2, 1]), (2 * 4, 2 * 3), {"i": _i64(5, 4), "b": _i64(2, 2)},
               18),
    "dft": (N("DFT", ["x"], ["y"], axis=1), (6, 3, 1), {}, 17),
    "dft_onesided": (N("DFT", ["x", "", "a"], ["y"], onesided=1), (3, 8, 2), {"a": np.int64(2)}, 20),
    "stft": (N("STFT", ["x", "s", "w", "n"], ["y"], onesided=1), (40, 1),
             {"s": np.int64(6), "w": np.hanning(10).astype(np.float32), "n": np.int64(10)}, 17),
    "dft_inverse": (N("DFT", ["x", "n"], ["y"], inverse=1, axis=2), (2, 5, 2), {"n": np.int64(4)}, 17),
    "eye_like": (N("EyeLike", ["x"], ["y"], k=1), (5,), {}, 22),
}


def _sample(name, shape, n, seed):
    rng = np.random.default_rng(seed)
    if name.startswith(("reduce_prod", "cum_prod")):  # products of factors near 1 stay in range
        return (rng.uniform(0.5, 1.5, size=(n, *shape)) * rng.choice([-1, 1], size=(n, *shape))).astype(np.float32)
    if name.startswith("hardmax"):  # whole numbers: the input's 8 bits keep them apart (ties stay ties)
        return np.round(rng.normal(scale=4, size=(n, *shape))).astype(np.float32)
    return rng.normal(size=(n, *shape)).astype(np.float32)


def _expected(model, x):
    """onnxruntime's output, or the reference evaluator's where onnxruntime does not run the opset, sample by
    sample."""
    import onnxruntime as ort
    try:
        run = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run
    except Exception:  # noqa: BLE001 - an opset onnxruntime does not implement yet
        run = ReferenceEvaluator(model).run
    return np.concatenate([run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])  # a grid is one sample's


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_import_matches_onnx(name):
    node, shape, inits, opset = CASES[name]
    model = _model(node, shape, inits, opset)
    x = _sample(name, shape, 3, 0)
    got = run_float(import_onnx(model), {"x": x})["y"]
    np.testing.assert_allclose(got, _expected(model, x), rtol=1e-4, atol=1e-5)


def _cosine(a, b):
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_converted_close_to_float(name):
    node, shape, inits, opset = CASES[name]
    model = _model(node, shape, inits, opset)
    m = convert(model, _sample(name, shape, 64, 1), progress=False)
    x = _sample(name, shape, 8, 2)
    got = m.dequantize_output(m.run(m.quantize_input(x), backend="reference"), m.graph.outputs[0])
    want = _expected(model, x)
    assert got.shape == want.shape
    assert _cosine(got, want) > 0.99, name


@pytest.mark.parametrize("node, shape, inits, opset, message", [
    (N("LpNormalization", ["x"], ["y"], p=3), (4,), {}, 22, "p=3"),
])
def test_refusals(node, shape, inits, opset, message):
    with pytest.raises(UnsupportedOp, match=message):
        import_onnx(_model(node, shape, inits, opset))


def test_channel_resize_is_refused():
    """(A computed GridSample grid imports: tests/mrt/test_grid_sample.py.)"""
    channels = N("Resize", ["x", "", "s"], ["y"], mode="cubic")
    with pytest.raises(UnsupportedOp, match="resizes axis 1"):
        import_onnx(_model(channels, (2, 4, 4), {"s": _f32(1, 2, 2, 2)}))


def _einsum_model(equation, shapes, consts=None):
    node = N("Einsum", [*shapes, *(consts or {})], ["y"], equation=equation)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *s]) for n, s in shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in (consts or {}).items()])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 18)])


W = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32)
EINSUM = {  # equation: (per-sample activation shapes, constants); the batch label b first
    "bij,bjk->bik": ({"a": (2, 3), "c": (3, 4)}, None),
    "bhij,bhkj->bhik": ({"a": (2, 3, 4), "c": (2, 5, 4)}, None),
    "bij->bji": ({"a": (2, 3)}, None),
    "bij->bi": ({"a": (2, 3)}, None),
    "b...ii->b...i": ({"a": (2, 4, 4)}, None),
    "bij,jk->bki": ({"a": (2, 3)}, {"w": W}),
    "bi,bj->bij": ({"a": (3,), "c": (4,)}, None),
    "bij,bj->bi": ({"a": (3, 4), "c": (4,)}, None),
    "bij,bij->b": ({"a": (3, 4), "c": (3, 4)}, None),
}


@pytest.mark.parametrize("equation", sorted(EINSUM))
def test_einsum(equation):
    shapes, consts = EINSUM[equation]
    model = _einsum_model(equation, shapes, consts)
    rng = np.random.default_rng(3)
    feeds = {n: rng.normal(size=(4, *s)).astype(np.float32) for n, s in shapes.items()}
    import onnxruntime as ort
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = run_float(import_onnx(model), feeds)["y"]  # "->b" gives each sample's ONNX (1,): a batch of (1,)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    calib = {n: rng.normal(size=(64, *s)).astype(np.float32) for n, s in shapes.items()}
    m = convert(model, calib, progress=False)
    got = m.run({m.graph.inputs[k].name: m.quantize_input(feeds[n], m.graph.inputs[k].name)
                 for k, n in enumerate(shapes)}, backend="reference")
    got = m.dequantize_output(got if not isinstance(got, dict) else got[m.graph.outputs[0]], m.graph.outputs[0])
    assert _cosine(got, want) > 0.99


def test_einsum_refuses_a_constant_batched_alike():
    with pytest.raises(UnsupportedOp, match="constant operand shares"):
        import_onnx(_einsum_model("bij,bj->bi", {"a": (2, 3)}, {"w": np.ones((1, 3), np.float32)}))


@pytest.mark.parametrize("equation, shapes, axis", [("...ii ->...i", {"a": (3, 5, 5)}, None),
                                                    ("ij,jk", {"a": (2, 3), "c": (3, 4)}, None),
                                                    (None, {"x": (2, 3)}, 1)])
def test_whole_form_translations(monkeypatch, equation, shapes, axis):
    """Einsum and CumProd on inputs whose ONNX axis 0 is not 1 (imported whole, ops_tail.WHOLE_FORMS)."""
    from mrt.onnx_import import ops_tail, whole_form
    for op, translate in ops_tail.WHOLE_FORMS.items():
        monkeypatch.setitem(whole_form.WHOLE_FORMS, op, translate)
    if equation is None:
        node, inits = N("CumProd", ["x", "a"], ["y"], exclusive=1), [numpy_helper.from_array(np.int64(axis), "a")]
    else:
        node, inits = N("Einsum", list(shapes), ["y"], equation=equation), []
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                            for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 26)])
    feeds = {n: np.random.default_rng(4).normal(size=s).astype(np.float32) for n, s in shapes.items()}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_float(import_onnx(model), {n: v[None] for n, v in feeds.items()})["y"][0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


TRIG_DOMAINS = {"Acos": (-0.95, 0.95), "Asin": (-0.95, 0.95), "Atanh": (-0.9, 0.9), "Acosh": (1.2, 6.0),
                "Asinh": (-4, 4), "Atan": (-4, 4), "Tan": (-1.2, 1.2), "Cosh": (-3, 3), "Sinh": (-3, 3)}


@pytest.mark.parametrize("op", sorted(TRIG_DOMAINS))
def test_trigonometric_tables(op):
    """Inverse and hyperbolic trigonometric functions and Tan: one lookup table each (mrt.quantize.rules_tail)."""
    model = _model(N(op, ["x"], ["y"]), (4, 6), opset=22)
    lo, hi = TRIG_DOMAINS[op]
    rng = np.random.default_rng(0)
    x = rng.uniform(lo, hi, size=(8, 4, 6)).astype(np.float32)
    want = _expected(model, x)
    np.testing.assert_allclose(run_float(import_onnx(model), {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    m = convert(model, rng.uniform(lo, hi, size=(64, 4, 6)).astype(np.float32), progress=False)
    got = m.dequantize_output(m.run(m.quantize_input(x), backend="reference"), m.graph.outputs[0])
    assert _cosine(got, want) > 0.999, op


def _pow_model(y_type=TensorProto.FLOAT, y_const=None):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])]
    if y_const is None:
        inputs.append(helper.make_tensor_value_info("y", y_type, ["N", 3, 4]))
    graph = helper.make_graph([N("Pow", ["x", "y"], ["z"])], "g", inputs,
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              [] if y_const is None else [numpy_helper.from_array(y_const, "y")])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("form", ["exp_log", "exp_log_negative", "integer_exponent", "constant_exponents"])
def test_pow_of_two_tensors(form):
    """Pow of two tensors (mrt.quantize.rules_pow): exp(y log|x|) with x's sign for odd y, or one table per value
    of an integer exponent (an int64 input, or a constant's values)."""
    rng = np.random.default_rng(7)

    def feeds(n):
        x = rng.uniform(0.2, 3, size=(n, 3, 4)) if form == "exp_log" else rng.uniform(-2, 2, size=(n, 3, 4))
        y = rng.uniform(-1.5, 2, size=(n, 3, 4)) if form == "exp_log" else rng.integers(0, 4, size=(n, 3, 4))
        out = {"x": x.astype(np.float32)}
        if form != "constant_exponents":
            out["y"] = y.astype(np.int64 if form == "integer_exponent" else np.float32)
        return out
    y_const = np.asarray([[1, 2, 3, 0.5]], np.float32) if form == "constant_exponents" else None
    if form == "constant_exponents":
        rng = np.random.default_rng(8)
        feeds = (lambda f: lambda n: {"x": np.abs(f(n)["x"])})(feeds)
    model = _pow_model(TensorProto.INT64 if form == "integer_exponent" else TensorProto.FLOAT, y_const)
    import onnxruntime as ort
    test = feeds(8)
    want = ort.InferenceSession(model.SerializeToString()).run(None, test)[0]
    m = convert(model, feeds(64), progress=False)
    q = {s.name: m.quantize_input(test[s.name], s.name) for s in m.graph.inputs}
    got = m.dequantize_output(m.run(q, backend="reference"), m.graph.outputs[0])
    assert _cosine(got, want) > 0.995, form


def test_pow_of_integers_is_exact():
    graph = helper.make_graph([N("Pow", ["x", "y"], ["z"])], "g",
                              [helper.make_tensor_value_info(n, TensorProto.INT64, ["N", 5]) for n in "xy"],
                              [helper.make_tensor_value_info("z", TensorProto.INT64, None)])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 15)])
    rng = np.random.default_rng(9)
    feeds = {"x": rng.integers(-4, 5, size=(32, 5)), "y": rng.integers(0, 6, size=(32, 5))}
    m = convert(model, feeds, progress=False)
    q = {s.name: m.quantize_input(feeds[s.name], s.name) for s in m.graph.inputs}
    got = m.dequantize_output(m.run(q, backend="reference"), m.graph.outputs[0])
    np.testing.assert_array_equal(got, feeds["x"] ** feeds["y"])


@pytest.mark.parametrize("a, b", [((3, 4), (4,)), ((4,), (2, 4, 5)), ((4,), (4,))])
def test_matmul_of_a_vector_on_whole_tensors(a, b):
    """MatMul with a vector activation on inputs imported whole (whole_form._matmul: an Einsum over the batch)."""
    graph = helper.make_graph([N("MatMul", ["a", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, a),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, b)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    rng = np.random.default_rng(2)
    feeds = {"a": rng.normal(size=a).astype(np.float32), "b": rng.normal(size=b).astype(np.float32)}
    want = np.matmul(feeds["a"], feeds["b"])
    got = run_float(import_onnx(model), {n: v[None] for n, v in feeds.items()})["y"][0]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)


def _whole_model(node, inputs, inits=None, opset=24):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", opset)])


F, I64 = TensorProto.FLOAT, TensorProto.INT64
SEQUENCE_CASES = {  # name: (node, {input: (type, shape)}, feeds, constants)
    "reverse_time": (N("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0), {"x": (F, (5, 3))},
                     {}, {"l": _i64(5, 1, 3)}),
    "reverse_batch": (N("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1),
                      {"x": (F, (3, 6)), "l": (I64, (3,))}, {"l": _i64(2, 6, 4)}, {}),
    "scatter_linear": (N("TensorScatter", ["c", "u", "w"], ["y"]), {"c": (F, (2, 3, 6, 4)), "u": (F, (2, 3, 2, 4))},
                       {}, {"w": _i64(1, 4)}),
    "scatter_circular": (N("TensorScatter", ["c", "u", "w"], ["y"], mode="circular", axis=1),
                         {"c": (F, (2, 5, 3)), "u": (F, (2, 3, 3)), "w": (I64, (2,))}, {"w": _i64(3, 0)}, {}),
}


@pytest.mark.parametrize("name", sorted(SEQUENCE_CASES))
def test_sequence_selections(name):
    """ReverseSequence and TensorScatter by constant or computed lengths and positions (mrt.onnx_import
    .ops_sequences), on whole tensors: float import and conversion against onnx's reference evaluator."""
    node, inputs, given, consts = SEQUENCE_CASES[name]
    model = _whole_model(node, inputs, consts, opset=24 if node.op_type == "TensorScatter" else 10)
    rng = np.random.default_rng(1)
    feeds = {n: given.get(n, rng.normal(size=s).astype(np.float32)) for n, (_, s) in inputs.items()}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_float(import_onnx(model), {n: v[None] for n, v in feeds.items()})["y"][0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    m = convert(model, {n: v[None] for n, v in feeds.items()}, progress=False)
    q = {s.name: m.quantize_input(feeds[s.name][None], s.name) for s in m.graph.inputs}
    got = m.dequantize_output(m.run(q, backend="reference"), m.graph.outputs[0])[0]
    assert _cosine(got, want) > 0.999, name
