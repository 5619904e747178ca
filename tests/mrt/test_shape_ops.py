"""Selection, copying and reduction imports (Slice, Split, Gather, Squeeze, Unsqueeze, Expand, Tile, the
Reduce family, GlobalMaxPool, reflect/edge Pad) against onnxruntime, and converted end to end."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.pipeline import convert

N = helper.make_node


def _i64(name, values):
    values = np.asarray(values, np.int64)
    return helper.make_tensor(name, TensorProto.INT64, values.shape, values.reshape(-1))


def _model(nodes, inits=(), shape=(4, 6, 6), outputs=("y",), opset=18):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(inits))
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])


CASES = {
    "slice": ([N("Slice", ["x", "s", "e", "a", "k"], ["y"])],
              [_i64("s", [1, -1]), _i64("e", [4, -100]), _i64("a", [1, 3]), _i64("k", [2, -2])]),
    "slice_to_end": ([N("Slice", ["x", "s", "e", "a"], ["y"])],
                     [_i64("s", [0, 2]), _i64("e", [2**62, 2**62]), _i64("a", [0, 2])]),
    "split": ([N("Split", ["x", "sp"], ["y", "z"], axis=2)], [_i64("sp", [2, 4])]),
    "split_equal": ([N("Split", ["x"], ["y", "z", "w"], axis=-1, num_outputs=3)], []),
    "gather_scalar": ([N("Gather", ["x", "i"], ["y"], axis=1)], [_i64("i", 2)]),
    "gather_list": ([N("Gather", ["x", "i"], ["y"], axis=3)], [_i64("i", [[5, 0], [1, 1]])]),
    "squeeze_unsqueeze": ([N("Unsqueeze", ["x", "a"], ["u"]), N("Squeeze", ["u", "a"], ["y"])], [_i64("a", [2])]),
    "expand": ([N("ReduceMean", ["x", "a"], ["m"]), N("Expand", ["m", "s"], ["y"])],
               [_i64("a", [2]), _i64("s", [1, 1, 6, 1])]),
    "tile": ([N("Tile", ["x", "r"], ["y"])], [_i64("r", [1, 1, 2, 3])]),
    "reduce_mean": ([N("ReduceMean", ["x", "a"], ["y"], keepdims=0)], [_i64("a", [2, 3])]),
    "reduce_sum": ([N("ReduceSum", ["x", "a"], ["y"])], [_i64("a", [1])]),
    "reduce_max": ([N("ReduceMax", ["x", "a"], ["y"])], [_i64("a", [-1])]),
    "reduce_min": ([N("ReduceMin", ["x", "a"], ["y"], keepdims=0)], [_i64("a", [1, 3])]),
    "reduce_l2": ([N("ReduceL2", ["x", "a"], ["y"])], [_i64("a", [3])]),
    "reduce_sum_square": ([N("ReduceSumSquare", ["x", "a"], ["y"])], [_i64("a", [2])]),
    "global_max_pool": ([N("GlobalMaxPool", ["x"], ["y"])], []),
    "argmax": ([N("ArgMax", ["x"], ["i"], axis=1), N("Cast", ["i"], ["y"], to=TensorProto.FLOAT)], []),
    "argmax_last": ([N("ArgMax", ["x"], ["i"], axis=-1, keepdims=0, select_last_index=1),
                     N("Cast", ["i"], ["y"], to=TensorProto.FLOAT)], []),
    "pad_reflect": ([N("Pad", ["x", "p"], ["y"], mode="reflect")], [_i64("p", [0, 0, 2, 1, 0, 0, 1, 3])]),
    "pad_edge": ([N("Pad", ["x", "p"], ["y"], mode="edge")], [_i64("p", [0, 1, 0, 2, 0, 0, 3, 1])]),
}


def _outputs(nodes):
    return tuple(nodes[-1].output)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_import_matches_onnxruntime(name):
    nodes, inits = CASES[name]
    model = _model(nodes, inits, outputs=_outputs(nodes))
    x = np.random.default_rng(0).normal(size=(3, 4, 6, 6)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    got = run_float(import_onnx(model), {"x": x})
    for o, w in zip(_outputs(nodes), want):
        np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["argmax", "argmax_last", "slice", "gather_list", "expand", "tile", "reduce_mean", "reduce_min",
                                  "global_max_pool", "pad_reflect", "pad_edge", "split"])
def test_converted_between_convs(name):
    """conv -> op -> conv: numba == reference, close to float."""
    nodes, inits = CASES[name]
    rng = np.random.default_rng(1)
    w = rng.normal(scale=0.3, size=(4, 4, 3, 3)).astype(np.float32)
    conv = N("Conv", ["x0", "w"], ["x"], pads=[1, 1, 1, 1])
    outs = _outputs(nodes)
    graph = helper.make_graph([conv, *nodes], "g",
                              [helper.make_tensor_value_info("x0", TensorProto.FLOAT, ["N", 4, 6, 6])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                              [*inits, helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1))])
    model = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 18)])
    calib, x = rng.normal(size=(64, 4, 6, 6)).astype(np.float32), rng.normal(size=(16, 4, 6, 6)).astype(np.float32)
    m = convert(model, calib, progress=False)
    xq = m.quantize_input(x)
    fast, ref = m.run(xq, backend="numba"), m.run(xq, backend="reference")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x0": x})
    fast = fast if isinstance(fast, dict) else {m.graph.outputs[0]: fast}
    ref = ref if isinstance(ref, dict) else {m.graph.outputs[0]: ref}
    for o, w_ in zip(m.graph.outputs, want):
        np.testing.assert_array_equal(fast[o], ref[o])
        got = m.dequantize_output(fast[o], o)
        cos = (got * w_).sum() / np.linalg.norm(got) / np.linalg.norm(w_)
        assert cos > 0.99, (name, o, cos)


@pytest.mark.parametrize("nodes, inits, message", [
    ([N("Gather", ["x", "i"], ["y"], axis=1)], [_i64("i", [4])], "out of range"),
    ([N("Pad", ["x", "p"], ["y"], mode="reflect")], [_i64("p", [0, 0, 6, 0, 0, 0, 0, 0])], "needs more than"),
])
def test_refusals(nodes, inits, message):
    with pytest.raises(UnsupportedOp, match=message):
        import_onnx(_model(nodes, inits))
