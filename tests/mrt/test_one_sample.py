"""An ONNX graph imports as what it computes for one sample (mrt.onnx_import.one_sample): every ONNX axis, axis 0
included, is an axis ops work on, and a CVM batch is a stack of samples. Each model here ran onnxruntime on one
sample and MRT's float graph on a batch of such samples; they must agree sample by sample.

Most of these graphs were refused before, when ONNX axis 0 was taken to be the batch."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.onnx_import.one_sample import as_batch, as_sample
from tests.mrt.conftest import IR_VERSION, ort_run

N = helper.make_node


def _model(nodes, inputs, outputs, inits=None, opset=17):
    """inputs: {name: ONNX dims (ints or symbols)}."""
    graph = helper.make_graph(
        nodes, "one_sample",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n, dims in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", opset)])


def _samples(shape, n=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)


def assert_per_sample(model, sample_shapes, input_shapes=None, n=3, atol=1e-5):
    """MRT on a batch of n samples equals onnxruntime on each sample alone; returns the graph."""
    graph = import_onnx(model, input_shapes)
    samples = {k: _samples(s, n, seed) for seed, (k, s) in enumerate(sample_shapes.items())}
    batch = {k: np.concatenate([as_batch(v[i], graph.unit_axis(k)) for i in range(n)]) for k, v in samples.items()}
    got = run_float(graph, batch)
    for i in range(n):
        want = ort_run(model, {k: v[i] for k, v in samples.items()})
        for name in graph.outputs:
            np.testing.assert_allclose(as_sample(got[name][i], graph.unit_axis(name)), want[name], rtol=1e-5,
                                       atol=atol, err_msg=f"{name}, sample {i}")
    return graph


def i64(a):
    return np.asarray(a, np.int64)


# -- what was refused as "works along the batch axis" ---------------------------------------------------------

CASES = {
    "reshape_merging_axis_0": ([N("Reshape", ["x", "t"], ["y"])], {"t": i64([-1])}),
    "flatten_axis_2": ([N("Flatten", ["x"], ["y"], axis=2)], {}),
    "softmax_axis_0": ([N("Softmax", ["x"], ["y"], axis=0)], {}),
    "transpose_axis_0_away": ([N("Transpose", ["x"], ["t"], perm=[1, 0, 2]), N("Flatten", ["t"], ["y"])], {}),
    "pad_axis_0": ([N("Pad", ["x", "p"], ["y"])], {"p": i64([1, 0, 0, 0, 0, 0])}),
    "const_broadcast_on_axis_0": ([N("Add", ["x", "c"], ["y"])], {"c": np.ones((3, 2, 3), np.float32)}),
    "reduce_every_axis": ([N("ReduceMean", ["x"], ["y"], keepdims=1)], {}),
    "gather_axis_0": ([N("Gather", ["x", "i"], ["y"], axis=0)], {"i": i64([0, 0])}),
    "concat_axis_0": ([N("Concat", ["x", "x"], ["y"], axis=0)], {}),
    "tile_axis_0": ([N("Tile", ["x", "r"], ["y"])], {"r": i64([2, 1, 1])}),
    "shape_arithmetic": ([N("Shape", ["x"], ["s"]), N("ReduceProd", ["s"], ["e"], keepdims=1),
                          N("Reshape", ["x", "e"], ["y"])], {}),
    "range_from_shape": ([N("Shape", ["x"], ["s"]), N("Gather", ["s", "two"], ["n"], axis=0),
                          N("Range", ["zero", "n", "one"], ["r"]), N("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
                          N("Add", ["x", "rf"], ["y"])],
                         {"two": i64(2), "zero": i64(0), "one": i64(1)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ops_on_onnx_axis_0_compute_one_samples_result(case):
    nodes, inits = CASES[case]
    assert_per_sample(_model(nodes, {"x": ["N", 2, 3]}, ["y"], inits), {"x": (1, 2, 3)})


def test_a_reshape_that_is_not_one_samples_is_refused_by_name():
    model = _model([N("Reshape", ["x", "t"], ["y"], name="r")], {"x": ["N", 2, 3]}, ["y"], {"t": i64([4, 6])})
    with pytest.raises(UnsupportedOp, match="Reshape node 'r': cannot reshape"):
        import_onnx(model)


# -- inputs without a batch axis --------------------------------------------------------------------------------

def test_an_input_whose_axis_0_is_fixed_above_1_is_one_whole_sample():
    """A graph whose first dim is a fixed 100 (a window of 100 readings) is stored whole: per-sample (100, 4)."""
    model = _model([N("ReduceMax", ["x"], ["m"], axes=[0], keepdims=1), N("Sub", ["x", "m"], ["y"])],
                   {"x": [100, 4]}, ["y"])
    graph = assert_per_sample(model, {"x": (100, 4)})
    assert graph.inputs[0].shape == (100, 4) and graph.unit_axis("x") is None


def test_a_batch_of_one_export_is_the_same_model_as_a_symbolic_batch():
    nodes = [N("Reshape", ["x", "t"], ["y"])]
    symbolic = import_onnx(_model(nodes, {"x": ["N", 2, 3]}, ["y"], {"t": i64([1, 6])}))
    fixed = import_onnx(_model(nodes, {"x": [1, 2, 3]}, ["y"], {"t": i64([1, 6])}))
    assert symbolic.nodes == fixed.nodes and symbolic.shapes == fixed.shapes == {"x": (2, 3), "y": (6,)}


# -- per-image ops on a sample holding several images ------------------------------------------------------------

def test_conv_on_a_sample_of_two_images_runs_per_image():
    w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = _model([N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
                   {"x": [2, 3, 6, 6]}, ["y"], {"w": w})
    graph = assert_per_sample(model, {"x": (2, 3, 6, 6)}, atol=1e-4)
    assert sum(n.op == "conv" for n in graph.nodes) == 2


def test_too_many_items_are_refused_by_name():
    w = np.ones((1, 1, 1, 1), np.float32)
    model = _model([N("Conv", ["x", "w"], ["y"], name="c")], {"x": [65, 1, 2, 2]}, ["y"], {"w": w})
    with pytest.raises(UnsupportedOp, match="Conv node 'c': one sample holds 65 items"):
        import_onnx(model)


# -- attention with the batch merged into the heads (torch's MultiheadAttention) -------------------------------

def test_heads_merged_with_axis_0_compute_one_samples_attention():
    """[L, 1, E] -> [L, heads, d] -> [heads, L, d]: batched matmuls over the heads, then back to [L, 1, E]."""
    L, E, H = 5, 8, 2
    rng = np.random.default_rng(4)
    inits = {"w": rng.standard_normal((E, E)).astype(np.float32) * 0.3, "split": i64([L, H, E // H]),
             "back": i64([L, 1, E])}
    nodes = [N("Transpose", ["x"], ["t"], perm=[1, 0, 2]), N("MatMul", ["t", "w"], ["q"]),
             N("Reshape", ["q", "split"], ["h"]), N("Transpose", ["h"], ["hq"], perm=[1, 0, 2]),
             N("Transpose", ["h"], ["hk"], perm=[1, 2, 0]), N("MatMul", ["hq", "hk"], ["s"]),
             N("Softmax", ["s"], ["p"], axis=-1), N("MatMul", ["p", "hq"], ["o"]),
             N("Transpose", ["o"], ["ot"], perm=[1, 0, 2]), N("Reshape", ["ot", "back"], ["b"]),
             N("Transpose", ["b"], ["y"], perm=[1, 0, 2])]
    graph = assert_per_sample(_model(nodes, {"x": ["N", L, E]}, ["y"], inits), {"x": (1, L, E)}, atol=1e-4)
    assert graph.shapes["y"] == (L, E)


# -- recurrent layers whose one sample holds several sequences -----------------------------------------------------

def test_an_lstm_over_three_sequences_of_one_sample_runs_per_sequence():
    T, B, I, H = 4, 3, 2, 3
    rng = np.random.default_rng(5)
    inits = {"W": rng.standard_normal((1, 4 * H, I)).astype(np.float32) * 0.5,
             "R": rng.standard_normal((1, 4 * H, H)).astype(np.float32) * 0.5}
    model = _model([N("LSTM", ["x", "W", "R"], ["y"], hidden_size=H)], {"x": [T, B, I]}, ["y"], inits)
    assert_per_sample(model, {"x": (T, B, I)}, atol=1e-5)


# -- integer tensors through forms -------------------------------------------------------------------------------

def test_position_ids_from_a_mask_stay_integers():
    """RoBERTa's position ids: CumSum of the mask (whole form) cast to int64 and read as a unit-axis alias is still
    an integer tensor, so the Cast is the identity, not a truncation table."""
    graph = helper.make_graph(
        [N("CumSum", ["mask", "axis"], ["c"]), N("Cast", ["c"], ["ci"], to=TensorProto.INT64),
         N("Mul", ["ci", "mask"], ["y"])], "positions",
        [helper.make_tensor_value_info("mask", TensorProto.INT64, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        [numpy_helper.from_array(i64(1), "axis")])
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(model)
    assert "trunc" not in {n.op for n in g.nodes} and "y" in g.integer_outputs
    mask = np.array([[1, 1, 1, 0, 1, 1, 0, 0]], np.int64)
    np.testing.assert_array_equal(run_float(g, {"mask": mask})["y"], ort_run(model, {"mask": mask})["y"])


def test_gather_elements_of_a_constant_table_by_computed_indices():
    table = np.arange(10, 30, dtype=np.float32).reshape(1, 20)
    graph = helper.make_graph(
        [N("GatherElements", ["t", "ids"], ["y"], axis=1)], "lookup",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(table, "t")])
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])
    ids = np.array([[0, 5, 19, 3, 3, 7]], np.int64)
    g = import_onnx(model)
    np.testing.assert_array_equal(run_float(g, {"ids": ids})["y"], ort_run(model, {"ids": ids})["y"])


def test_gather_nd_by_computed_indices_selects_rows():
    """CLIP's pooling: the row at the argmax of a per-token score, picked by 0/1 flags."""
    graph = helper.make_graph(
        [N("ArgMax", ["s"], ["k"], axis=1, keepdims=0), N("Unsqueeze", ["k", "one"], ["k1"]),
         N("Concat", ["zero", "k1"], ["idx"], axis=1), N("GatherND", ["x", "idx"], ["y"])], "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(i64([1]), "one"), numpy_helper.from_array(i64([[0]]), "zero")])
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])
    assert_per_sample(model, {"x": (1, 5, 3), "s": (1, 5)})


def test_a_waveform_input_gets_one_scale_and_tabular_features_one_each():
    """A 1-D input reshaped into a signal (a raw waveform before a conv) shares one scale; a 1-D input read by a
    dense layer keeps one scale per feature (mrt.pipeline._tabular)."""
    from mrt.pipeline import convert
    rng = np.random.default_rng(7)
    w = rng.standard_normal((2, 1, 3)).astype(np.float32)
    signal = _model([N("Reshape", ["x", "s"], ["r"]), N("Conv", ["r", "w"], ["y"])], {"x": ["N", 32]}, ["y"],
                    {"s": i64([1, 1, 32]), "w": w})
    tabular = _model([N("MatMul", ["x", "m"], ["y"])], {"x": ["N", 32]}, ["y"],
                     {"m": rng.standard_normal((32, 4)).astype(np.float32)})
    x = (rng.standard_normal((16, 32)) * np.linspace(0.1, 3, 32)).astype(np.float32)
    scales = {name: np.size(convert(m, x, progress=False).meta["input_scales"]["x"])
              for name, m in (("signal", signal), ("tabular", tabular))}
    assert scales == {"signal": 1, "tabular": 32}
