"""The fhe target's tree lowering (mrt.quantize.rules_trees, `_tree_ensemble_fhe`): one lookup (clip
element) per distinct (feature, code bound) condition and one per real leaf, none for padding; the CVM
target keeps its grouped form. Decisions: the
same integer graph runs on the reference and numba backends bit for bit (the FHE suite checks encrypted ==
plain on it)."""
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from mrt.onnx_import import import_onnx  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trees"


def _counts(path):
    g = import_onnx(str(path))
    node = next(n for n in g.nodes if n.op == "tree_ensemble")
    feature, threshold, strict, left, right, leaves = [g.initializers[i] for i in node.inputs[1:7]]
    live = feature >= 0
    distinct = len({(int(f), float(t), int(s)) for f, t, s in zip(feature[live], threshold[live], strict[live])})
    real_leaves = int(live.sum()) + feature.shape[0]   # a binary tree has one leaf more than splits
    return distinct, real_leaves, feature.size + leaves.shape[0] * leaves.shape[1]   # the CVM form's clips


@pytest.mark.parametrize("name,data", [("xgb_cancer", "cancer"), ("rf_wine", "wine"), ("lgbm_fair", "fair")])
def test_fhe_form_has_one_lookup_per_distinct_condition_and_real_leaf(name, data):
    xtr, xte, _, _ = split(data)
    distinct, real_leaves, padded = _counts(FIXTURES / f"{name}.onnx")
    model = convert(str(FIXTURES / f"{name}.onnx"), xtr, target="fhe", progress=False)
    ops = [n.op for n in model.graph.nodes]
    assert "conv2d" not in ops
    clips = [n for n in model.graph.nodes if n.op == "clip"]
    sizes = [int(np.prod(model.analysis.tensors[n.output].shape)) for n in clips]
    assert sizes == [distinct, real_leaves]
    q = model.quantize_input(xte)
    assert np.array_equal(model.run(q, backend="reference"), model.run(q, backend="numba"))
    cvm_ops = [n.op for n in convert(str(FIXTURES / f"{name}.onnx"), xtr, progress=False).graph.nodes]
    assert "conv2d" in cvm_ops                                     # the CVM form is unchanged
    assert sum(sizes) < padded
