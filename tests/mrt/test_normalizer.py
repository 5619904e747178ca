"""ai.onnx.ml Normalizer (scikit-learn's Normalizer, L1 / L2 / MAX) quantized by mrt.quantize.rules_ml: the
integer rows against onnxruntime on the same quantized inputs (so the input's own rounding and calibration
clipping are not counted: what is left is the rule's), and Normalizer pipelines deciding as float."""
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Normalizer, StandardScaler  # noqa: E402

from mrt.pipeline import convert  # noqa: E402
from mrt.trees.agreement import compare  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

# |integer - float| on rows of the quantized input: L1 and MAX are the rounded exact ratio plus the 16-bit
# output step; L2 adds z's rounding and isqrt's floor (2^-11 of the norm)
TOL = {"l1": 4e-4, "l2": 8e-4, "max": 4e-4}


def _onnx(steps, xtr, ytr=None):
    m = make_pipeline(*steps).fit(xtr, ytr)
    options = {LogisticRegression: {"zipmap": False}} if ytr is not None else None
    return m, skl2onnx.to_onnx(m, xtr[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("data,scaled", [("wine", False), ("cancer", True), ("digits", False), ("iris", True)])
def test_rows_match_onnxruntime(norm, data, scaled):
    if norm == "max" and scaled:
        pytest.skip("MAX of signed rows: x / max is unbounded below, so its calibrated range clips (report)")
    xtr, xte, _, _ = split(data)
    _, onx = _onnx([StandardScaler()] * scaled + [Normalizer(norm=norm)], xtr)
    model = convert(onx, xtr, progress=False)
    assert model.graph.opset == (2 if norm == "l2" else 1)   # L2: isqrt
    q = model.quantize_input(xte)
    y = model.run(q, backend="reference")
    assert np.array_equal(y, model.run(q, backend="numba"))
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    xq = (q * np.asarray(model.inputs[0].scale)).astype(np.float32)
    ref = sess.run(None, {sess.get_inputs()[0].name: xq})[0]
    assert np.abs(model.dequantize_output(y).reshape(ref.shape) - ref).max() < TOL[norm]


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("data", ["wine", "cancer", "digits"])
def test_pipeline_decides_as_float(norm, data):
    xtr, xte, ytr, _ = split(data)
    m, onx = _onnx([StandardScaler(), Normalizer(norm=norm), LogisticRegression(max_iter=2000)], xtr, ytr)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    _, probs = sess.run(None, {sess.get_inputs()[0].name: xte})
    model = convert(onx, xtr, progress=False)
    got = model.dequantize_output(model.run(model.quantize_input(xte))).reshape(probs.shape)
    # a near-tie: the two best float probabilities within 1% (the 8-bit dense layer after the normalizer)
    stats = compare(probs, got, tol=0.01)
    assert stats["disagree"] == 0, stats
