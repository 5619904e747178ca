"""The node-test yardstick (scripts/models/node_tests.py, issue 30 item 4) kept honest in CI:

- a fixed subset of ONNX's backend node tests, classified again, has the statuses and reasons of the committed
  results (scripts/models/results/node_tests.json): a converter change that moves a case fails here until the
  results are measured again (`nice -n 19 .venv/bin/python scripts/models/node_tests.py`, about 25 s today);
- docs/models.md's section is what the committed results render to, so the document cannot drift from them;
- the comparison rule itself, on hand-made outputs.

CVM_NODE_TESTS=all classifies every case instead of the subset.
"""
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "models"))

import node_tests  # noqa: E402
import node_tests_doc  # noqa: E402

SUBSET = (  # small, fast cases: one or two of every status and refusal kind, and common ops of real models
    "test_abs", "test_add", "test_add_bcast", "test_relu", "test_sigmoid", "test_tanh", "test_softmax_axis_1",
    "test_matmul_2d", "test_gemm_default_single_elem_vector_bias", "test_conv_with_strides_padding",
    "test_maxpool_2d_default", "test_averagepool_2d_default", "test_globalaveragepool", "test_batchnorm_example",
    "test_reshape_reduced_dims", "test_transpose_default", "test_concat_2d_axis_1", "test_argmax_keepdims_example",
    "test_equal", "test_where_example", "test_cast_DOUBLE_to_FLOAT", "test_add_int16", "test_gru_defaults",
    "test_bitshift_right_uint8", "test_not_2d", "test_blackmanwindow", "test_attention_3d",
    "test_quantizelinear_int4", "test_dequantizelinear", "test_constantofshape_float_ones", "test_constant",
    "test_bernoulli", "test_training_dropout", "test_adam", "test_identity_sequence",
    "test_strnormalizer_nostopwords_nochangecase",
)


@pytest.fixture(scope="module")
def committed():
    return node_tests_doc.load_results()


def test_subset_cases_exist():
    missing = sorted(set(SUBSET) - set(node_tests.cases()))
    assert not missing, f"onnx no longer has {missing}: choose others"


def test_cases_keep_their_committed_status(committed):
    names = list(node_tests.cases()) if os.environ.get("CVM_NODE_TESTS") == "all" else list(SUBSET)
    now = node_tests.run_all(names, jobs=2, progress=False)
    moved = {n: (committed["cases"].get(n, {}).get("status"), r["status"], r["reason"]) for n, r in now.items()
             if (r["status"], r["reason"]) != (committed["cases"].get(n, {}).get("status"),
                                                committed["cases"].get(n, {}).get("reason"))}
    assert not moved, ("cases whose result changed (committed status, now, reason): measure again with "
                       f"`{node_tests_doc.COMMAND}` and commit the results: {moved}")


def test_docs_section_is_the_committed_results():
    assert node_tests_doc.doc_section() == node_tests_doc.section(node_tests_doc.load_results()), (
        "docs/models.md's node-test section differs from the results: "
        ".venv/bin/python scripts/models/node_tests.py --render")


def _identity(dtype=TensorProto.FLOAT):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", dtype, [4])],
                              [helper.make_tensor_value_info("y", dtype, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_integer_outputs_must_be_exact():
    model, want = _identity(TensorProto.INT64), np.array([1, 2, 3, 4])
    assert node_tests.compare(model, {}, [want.astype(float)], [want])["status"] == "passed"
    bad = node_tests.compare(model, {}, [want + np.array([0, 0, 0, 1.0])], [want])
    assert bad["status"] == "failed" and "1 of 4 integers differ" in bad["reason"]


def test_float_outputs_need_the_cosine_and_a_shape():
    model, want = _identity(), np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    assert node_tests.compare(model, {"x": want}, [want * 1.001], [want])["status"] == "passed"
    assert "cosine" in node_tests.compare(model, {"x": want}, [want[::-1].copy()], [want])["reason"]
    assert "shape" in node_tests.compare(model, {"x": want}, [want[:3]], [want])["reason"]


def test_relative_error_is_held_to_onnxruntime_int8_where_it_quantizes():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((4, 8)).astype(np.float32)
    want = x @ w
    ort = node_tests.ort_int8(model, {"x": x})
    assert ort is not None
    _, ort_rel = node_tests.errors(ort[0], want)
    close = node_tests.compare(model, {"x": x}, [want * (1 + 0.5 * ort_rel)], [want])
    assert close["status"] == "passed" and close["measured"]["output 0"]["ort_int8_rel_l2"] > 0
    bound = max(node_tests.ORT_FACTOR * ort_rel, node_tests.REL_L2_FLOOR)
    noise = rng.standard_normal(want.shape)
    noise *= 1.2 * bound * np.linalg.norm(want) / np.linalg.norm(noise)  # 1.2 x the bound: cosine still >= 0.999
    far = node_tests.compare(model, {"x": x}, [want + noise], [want])
    assert far["status"] == "failed" and "onnxruntime int8" in far["reason"], far


def test_parameters_become_initializers():
    model, feeds, _ = node_tests.prepared(node_tests.cases()["test_conv_with_strides_padding"])
    assert list(feeds) == ["x"]
    assert {i.name for i in model.graph.initializer} == {"W"}
    onnx.checker.check_model(model)


def test_limits_name_what_one_integer_sample_cannot_express():
    empty = {"status": "refused", "reason": "UnsupportedOp: graph input 'x': a dim of size 0 (an empty tensor)"}
    missing = {"status": "refused", "reason": "UnsupportedOp: Foo node 'y': op Foo (opset 21) is not supported"}
    assert node_tests_doc.limit_of(empty).startswith("an empty tensor") and node_tests_doc.limit_of(missing) is None
    results = {"a": empty, "b": missing, "c": {"status": "passed", "reason": ""},
               "d": {"status": "not applicable", "reason": "a string tensor"}}
    assert node_tests_doc.expressible(results) == 2
