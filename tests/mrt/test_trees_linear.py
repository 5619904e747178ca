"""The other classic ai.onnx.ml ops skl2onnx writes for scikit-learn: LinearRegressor (LinearRegression,
LinearSVR), SVMRegressor with a linear kernel (SVR) and Binarizer, imported as dense layers / a comparison
and checked against onnxruntime: the float graph, and the integer model for the linear ones (a Binarizer
on a scaled input is a lookup table whose samples within one input step of the threshold may flip, unlike
a tree's threshold-coded comparisons)."""
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")

from sklearn.linear_model import LinearRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Binarizer  # noqa: E402
from sklearn.svm import SVR, LinearSVR  # noqa: E402

from mrt.float_exec import run_float  # noqa: E402
from mrt.onnx_import import import_onnx  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

MODELS = {"linear": LinearRegression, "svr_linear": lambda: SVR(kernel="linear", C=100),
          "linear_svr": lambda: LinearSVR(C=10, max_iter=20000, random_state=0),
          "binarizer_linear": lambda: make_pipeline(Binarizer(threshold=0.0), LinearRegression())}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_regressor_matches_onnxruntime(name):
    xtr, xte, ytr, yte = split("diabetes")
    m = MODELS[name]().fit(xtr, ytr)
    onx = skl2onnx.to_onnx(m, xtr[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: xte})[0].reshape(len(xte), -1)
    g = import_onnx(onx)
    got = run_float(g, xte)
    got = got[g.outputs[0]] if isinstance(got, dict) else got
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-4, atol=1e-3)
    if name.startswith("binarizer"):
        return  # a comparison of a scaled input: samples within a step of the threshold flip (see the report)
    model = convert(onx, xtr, progress=False)
    y = model.dequantize_output(model.run(model.quantize_input(xte))).reshape(ref.shape)
    mae = np.abs(ref[:, 0] - yte).mean()
    assert np.abs(y - ref).max() < 0.02 * mae   # integer error far below the model's own error
