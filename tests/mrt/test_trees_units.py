"""Threshold codes (cvm.threshold_codes) and the tree pieces around them: every split of the float model is
the same integer comparison; metadata is checked; what cannot be one comparison is refused by name."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import cvm
from cvm.errors import FormatError, InputError
from cvm.threshold_codes import bits_for, check, encode
from mrt.errors import UnsupportedOp
from mrt.onnx_import import import_onnx
from mrt.pipeline import convert


def test_codes_decide_every_split_like_float32():
    rng = np.random.default_rng(0)
    t = np.unique(rng.normal(size=40).astype(np.float32)).astype(np.float64)
    x = np.concatenate([rng.normal(size=2000), t, np.nextafter(t, np.inf), np.nextafter(t.astype(np.float32), -np.inf)])
    codes = encode(x[:, None], [t.tolist()], np.int64, "x")[:, 0]
    x32 = x.astype(np.float32)
    for i, thr in enumerate(t.astype(np.float32)):
        assert np.array_equal(codes <= 2 * i + 1, x32 <= thr)   # BRANCH_LEQ
        assert np.array_equal(codes <= 2 * i, x32 < thr)        # BRANCH_LT


def test_code_bits_and_metadata_checks():
    assert bits_for([[0.5] * 3, []]) == 4          # codes 0..6 need bits_max >= 6
    assert bits_for([[]]) == 2
    check([[0.5, 1.0], []], "meta.input_thresholds.x")
    for bad, what in (([[1.0, 0.5]], "strictly increasing"), ([[float("nan")]], "finite float32"),
                      ([[0.1]], "finite float32"), ([], "non-empty")):
        with pytest.raises(FormatError, match=what):
            check(bad, "meta.input_thresholds.x")
    with pytest.raises(InputError, match="3 features"):
        encode(np.zeros((2, 2)), [[], [], []], np.int8, "x")
    with pytest.raises(InputError, match="NaN"):
        encode(np.array([[np.nan]]), [[0.5]], np.int8, "x")


def _stump(mode=b"BRANCH_LEQ", feed_relu=False):
    """A one-split regressor: x[0] <= 0.5 -> 1.0 else 2.0 (optionally reading relu(x))."""
    tree = helper.make_node(
        "TreeEnsembleRegressor", ["r" if feed_relu else "x"], ["y"], domain="ai.onnx.ml", n_targets=1,
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0], nodes_values=[0.5, 0, 0],
        nodes_modes=[mode, b"LEAF", b"LEAF"], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0])
    nodes = ([helper.make_node("Relu", ["x"], ["r"])] if feed_relu else []) + [tree]
    g = helper.make_graph(nodes, "stump", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def test_stump_converts_and_round_trips_its_codes(tmp_path):
    x = np.array([[0.5, 0], [0.50001, 1], [-3, 2], [7, 3]], np.float32)
    model = convert(_stump(), x, progress=False)
    assert model.meta["input_thresholds"] == {"x": [[0.5], []]}
    assert model.quantize_input(x)[:, 0].tolist() == [1, 2, 0, 2]
    path = tmp_path / "stump.cvm"
    model.save(path)
    again = cvm.load(path)
    y = again.dequantize_output(again.run(again.quantize_input(x)))
    np.testing.assert_allclose(y[:, 0], [1, 2, 1, 2], atol=1e-3)


@pytest.mark.parametrize("mode, refused", [(b"BRANCH_EQ", "BRANCH_EQ"), (b"BRANCH_NEQ", "BRANCH_NEQ")])
def test_equality_splits_are_refused(mode, refused):
    with pytest.raises(UnsupportedOp, match=refused):
        import_onnx(_stump(mode))


def test_tree_must_read_a_graph_input():
    x = np.array([[0.5, 0], [1, 1], [-3, 2]], np.float32)
    with pytest.raises(Exception, match="must read a graph input"):
        convert(_stump(feed_relu=True), x, progress=False)


def test_metadata_names_real_inputs():
    model = convert(_stump(), np.array([[0.5, 0], [1, 1]], np.float32), progress=False)
    meta = dict(model.meta, input_thresholds={"nope": [[0.5], []]})
    with pytest.raises(FormatError, match="names no input"):
        cvm.Model(model.graph, meta)
    with pytest.raises(FormatError, match="expected one per feature"):
        cvm.Model(model.graph, dict(model.meta, input_thresholds={"x": [[0.5]]}))
