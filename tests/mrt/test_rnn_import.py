"""ONNX LSTM, GRU and RNN imported as unrolled IR (mrt.onnx_import.ops_rnn), the batch-first storage of tensors
whose ONNX batch axis is not 0 (mrt.onnx_import.batch_major) and If on a constant condition
(mrt.onnx_import.control): float results against onnxruntime (or onnx's reference evaluator for layout=1)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from tests.mrt.rnn_cases import cell_model, feeds_for, reference, torch_like

# ONNX batch axis of each output in layout 0 (Y [T, D, N, H], Y_h/Y_c [D, N, H]); MRT stores them batch-first
OUT_AXES = {"Y": 2, "Yh": 1, "Yc": 1}


def _compare(model, layout, atol=2e-5):
    feeds = feeds_for(model)
    want = reference(model, feeds)
    ours = {k: np.moveaxis(v, 1, 0) if layout == 0 else v for k, v in feeds.items()}
    got = run_float(import_onnx(model, {"x": (5, 3)}), ours)
    for o, w in zip([o.name for o in model.graph.output], want):
        g = np.moveaxis(got[o], 0, OUT_AXES[o]) if layout == 0 else got[o]
        np.testing.assert_allclose(g, w, atol=atol, rtol=1e-4, err_msg=o)


@pytest.mark.parametrize("op, lbr", [("LSTM", None), ("GRU", 0), ("GRU", 1), ("RNN", None)])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("states", [False, True])
def test_cell_matches_reference(op, lbr, direction, layout, states):
    attrs = {} if lbr is None else {"linear_before_reset": lbr}
    _compare(cell_model(op, direction, layout, states, **attrs), layout)


@pytest.mark.parametrize("op, attrs", [
    ("LSTM", {"clip": 0.7}), ("GRU", {"clip": 0.5, "linear_before_reset": 1}), ("RNN", {"clip": 0.4}),
    ("LSTM", {"input_forget": 1}),
    ("LSTM", {"activations": ["HardSigmoid", "Relu", "Softsign"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("GRU", {"activations": ["Sigmoid", "LeakyRelu"], "activation_alpha": [0.2]}),
    ("RNN", {"activations": ["Relu", "Tanh"], "direction": "bidirectional"}),
])
def test_attributes_match_onnxruntime(op, attrs):
    _compare(cell_model(op, attrs.pop("direction", "forward"), 0, True, **attrs), 0)


def test_lstm_peepholes_match_onnxruntime():
    model = cell_model("LSTM", "bidirectional", 0, True)
    model.graph.initializer.append(numpy_helper.from_array(
        np.random.default_rng(2).normal(size=(2, 12)).astype(np.float32), "P"))
    model.graph.node[0].input.append("P")
    _compare(model, 0)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_torch_export_pattern(op, direction):
    """Transposes in and out of the sequence-first layout and a Shape-built Reshape leave no transpose behind."""
    model = torch_like(op, direction)
    x = np.random.default_rng(3).normal(size=(4, 12, 3)).astype(np.float32)
    graph = import_onnx(model)
    assert not any(n.op == "transpose" for n in graph.nodes)
    np.testing.assert_allclose(run_float(graph, {"x": x})["y"], reference(model, {"x": x})[0], atol=2e-5, rtol=1e-4)


def state_model(hidden=4):
    """A streaming LSTM whose state is one graph input and output, [2, N, H] (h and c stacked, batch second), as
    in voice-activity detectors: Gather/Unsqueeze into the cell, Concat of Y_h and Y_c out of it."""
    rng = np.random.default_rng(4)
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             n("Gather", ["state", "zero"], ["h"], axis=0), n("Gather", ["state", "one"], ["c"], axis=0),
             n("Unsqueeze", ["h", "axis0"], ["h0"]), n("Unsqueeze", ["c", "axis0"], ["c0"]),
             n("LSTM", ["xt", "W", "R", "B", "", "h0", "c0"], ["", "Yh", "Yc"], hidden_size=hidden),
             n("Concat", ["Yh", "Yc"], ["state_out"], axis=0),
             n("Squeeze", ["Yh", "axis0"], ["last"]), n("MatMul", ["last", "Wo"], ["y"])]
    inits = [numpy_helper.from_array(rng.normal(scale=0.5, size=s).astype(np.float32), k)
             for k, s in (("W", (1, 4 * hidden, 3)), ("R", (1, 4 * hidden, hidden)), ("B", (1, 8 * hidden)),
                          ("Wo", (hidden, 1)))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("zero", 0), ("one", 1), ("axis0", [0]))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 3]),
                                           helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "N", hidden])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "state_out")], inits)
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 14)])


def test_state_input_and_output_are_batch_first():
    model = state_model()
    graph = import_onnx(model)
    assert {s.name: s.shape for s in graph.inputs} == {"x": (6, 3), "state": (2, 4)}
    rng = np.random.default_rng(5)
    x, state = rng.normal(size=(3, 6, 3)).astype(np.float32), rng.normal(size=(2, 3, 4)).astype(np.float32)
    y, state_out = reference(model, {"x": x, "state": state})
    got = run_float(graph, {"x": x, "state": np.moveaxis(state, 1, 0)})
    np.testing.assert_allclose(got["y"], y, atol=2e-5)
    np.testing.assert_allclose(np.moveaxis(got["state_out"], 0, 1), state_out, atol=2e-5)


def _if_model(cond_value):
    n = helper.make_node
    then = helper.make_graph([n("Relu", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([n("Mul", ["x", "two"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    nodes = [n("Equal", ["rate", "sixteen"], ["cond"]), n("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("rate", cond_value), ("sixteen", 16000))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("rate", [16000, 8000])
def test_if_on_a_constant_condition_is_its_branch(rate):
    model = _if_model(rate)
    x = np.random.default_rng(6).normal(size=(4, 3)).astype(np.float32)
    graph = import_onnx(model)
    assert [n.op for n in graph.nodes if n.op != "identity"] == (["relu"] if rate == 16000 else ["mul"])
    np.testing.assert_allclose(run_float(graph, {"x": x})["y"], reference(model, {"x": x})[0], atol=1e-6)


def test_if_on_a_computed_condition_is_refused():
    model = _if_model(16000)
    model.graph.node[0].input[0] = "x"
    with pytest.raises(UnsupportedOp, match="If condition .* must be a constant"):
        import_onnx(model)


def _refused(model, message):
    with pytest.raises(UnsupportedOp, match=message):
        import_onnx(model, {"x": (5, 3)})


def test_refusals():
    model = cell_model("LSTM")
    model.graph.initializer.append(numpy_helper.from_array(np.array([3, 5], np.int32), "lens"))
    model.graph.node[0].input[4] = "lens"
    _refused(model, r"sequence_lens \[3, 5\] differ")
    model = cell_model("RNN")
    model.graph.initializer.append(numpy_helper.from_array(np.ones((1, 1, 4), np.float32), "h0"))
    model.graph.node[0].input.append("h0")
    _refused(model, "non-zero constant initial_h")
    model = cell_model("LSTM", activations=["Sigmoid", "Gelu", "Tanh"])
    _refused(model, "activation 'Gelu' is not supported")
