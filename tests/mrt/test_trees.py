"""Tree ensembles end to end on the committed fixtures (fixtures/trees, trained by fixtures/train/trees.py):
the imported float graph computes onnxruntime's scores; the integer model (opset-1 ops, threshold-coded
inputs) makes the float model's decision on every test sample that is not a near-tie, and the reference and
numba backends agree bit for bit; regressors stay within two output steps of float."""
import json
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")

from mrt.float_exec import run_float  # noqa: E402
from mrt.onnx_import import import_onnx  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.trees.agreement import compare  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trees"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


def _ort(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[-1].reshape(len(x), -1)


@pytest.fixture(scope="module")
def splits():
    return {name: split(name) for name in {m["data"] for m in MANIFEST.values()}}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_fixture_converts_with_float_decisions(name, splits):
    entry = MANIFEST[name]
    path = FIXTURES / entry["file"]
    xtr, xte, _, _ = splits[entry["data"]]
    ref = _ort(path, xte)
    graph = import_onnx(str(path))
    raw = run_float(graph, xte)
    raw = raw[graph.outputs[0]] if isinstance(raw, dict) else raw
    np.testing.assert_allclose(raw.reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)

    model = convert(str(path), xtr, progress=False)
    assert model.graph.opset == 1          # no op beyond opset 1
    q = model.quantize_input(xte)
    y = model.run(q, backend="reference")
    assert np.array_equal(y, model.run(q, backend="numba"))
    got = model.dequantize_output(y).reshape(ref.shape)
    step = float(np.max(model.outputs[0].scale))
    if entry["task"] == "classification":
        # scores before the client's sigmoid / softmax (argmax is unchanged by either)
        stats = compare(_pre_transform(model, ref), got, tol=2 * step)
        assert stats["disagree"] == 0, stats
    else:
        assert np.abs(got - ref).max() <= 2 * step


def _pre_transform(model, probs):
    """The float scores in the integer model's units: undo the client transform the converter stripped."""
    transform = model.meta.get("output_transform")
    if transform == "sigmoid":
        p = np.clip(probs, 1e-12, 1 - 1e-12)
        return np.log(p) - np.log1p(-p)
    if transform == "softmax":
        return np.log(np.clip(probs, 1e-30, None))
    return probs
