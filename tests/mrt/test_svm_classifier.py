"""SVMClassifier (linear kernel) as skl2onnx writes scikit-learn's SVC(kernel='linear') behind a
StandardScaler: binary (one pairwise score; the import's columns are [s, -s], in label order) and multiclass
(one-vs-one scores read by skl2onnx's ovr subgraph: ArrayFeatureExtractor, Less, Neg, Sum, Abs, Div).

The float graph's argmax is onnxruntime's label (binary; the multiclass ovr output except on vote ties,
where scikit-learn's ovr decision breaks ties by confidence and the label by class order); the integer
model's argmax is the float graph's on every sample whose pairwise scores are all clear of 0 (a vote that
flips on a score within the 8-bit weights' error of 0 (CLEAR) is the SVM's near-tie, counted, not hidden)."""
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")

from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from mrt.errors import UnsupportedOp  # noqa: E402
from mrt.float_exec import run_float  # noqa: E402
from mrt.onnx_import import import_onnx  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

BITS = 16      # activations: the pairwise scores' sign is read from a 16-bit value, not an 8-bit one
CLEAR = 0.1    # |pairwise score| below this (decision units: support vectors sit at 1) is a near-tie: the
#               8-bit per-channel weights move a pairwise score by up to ~0.06 (measured on wine)


def _fit(data, **svc):
    xtr, xte, ytr, _ = split(data)
    m = make_pipeline(StandardScaler(), SVC(kernel="linear", **svc)).fit(xtr, ytr)
    onx = skl2onnx.to_onnx(m, xtr[:1], options={SVC: {"zipmap": False}},
                           target_opset={"": 17, "ai.onnx.ml": 3})
    return m, onx, xtr, xte


@pytest.mark.parametrize("data", ["cancer", "wine", "iris", "digits"])
def test_linear_svc_decides_as_float(data):
    m, onx, xtr, xte = _fit(data)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, scores = sess.run(None, {sess.get_inputs()[0].name: xte})
    g = import_onnx(onx)
    f = run_float(g, xte)
    f = (f[g.outputs[0]] if isinstance(f, dict) else f).reshape(len(xte), -1)
    classes = np.asarray(m.classes_)
    if len(classes) == 2:
        np.testing.assert_allclose(f, scores[:, ::-1], rtol=1e-5, atol=1e-4)   # onnxruntime's reversed columns
        assert (classes[f.argmax(1)] == label).all()
    else:
        np.testing.assert_allclose(f, scores, rtol=1e-5, atol=1e-4)
        assert (classes[f.argmax(1)] == label).mean() >= 0.99
    model = convert(onx, xtr, bits=BITS, progress=False)
    assert model.graph.opset == 1
    q = model.quantize_input(xte)
    y = model.run(q, backend="reference")
    assert np.array_equal(y, model.run(q, backend="numba"))
    got = model.dequantize_output(y).reshape(f.shape)
    pair = m[-1].decision_function(m[0].transform(xte)) if len(classes) == 2 else \
        _ovo(m, xte)
    near = np.abs(pair.reshape(len(xte), -1)).min(axis=1) < CLEAR
    differ = got.argmax(1) != f.argmax(1)
    assert not (differ & ~near).any(), (np.flatnonzero(differ), np.abs(pair.reshape(len(xte), -1)).min(axis=1)[differ])


def _ovo(m, x):
    svc = m[-1]
    shape = svc.decision_function_shape
    svc.decision_function_shape = "ovo"
    try:
        return svc.decision_function(m[0].transform(x))
    finally:
        svc.decision_function_shape = shape


def test_refusals():
    _, onx, _, _ = _fit("iris", probability=True, random_state=0)
    with pytest.raises(UnsupportedOp, match="prob_a"):
        import_onnx(onx)
    xtr, _, ytr, _ = split("iris")
    m = SVC(kernel="rbf").fit(xtr, ytr)
    onx = skl2onnx.to_onnx(m, xtr[:1], options={SVC: {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    with pytest.raises(UnsupportedOp, match="kernel_type RBF"):
        import_onnx(onx)
