"""scikit-learn's class labels, picked from the classes by an argmax (skl2onnx's ArrayFeatureExtractor with
computed indices): the converted model's label output equals the float model's on the test rows."""
import numpy as np
import pytest

skl2onnx = pytest.importorskip("skl2onnx")
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from mrt import pipeline  # noqa: E402


def test_an_mlp_classifiers_label_output_is_its_class():
    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[:110], order[110:]
    est = make_pipeline(StandardScaler(), MLPClassifier((16,), max_iter=2000, random_state=0)).fit(x[train], y[train])
    onx = skl2onnx.to_onnx(est, x[:1], options={id(est.steps[-1][1]): {"zipmap": False}})
    m = pipeline.convert(onx, x[train], progress=False)
    out = m.run(m.quantize_input(x[test], m.inputs[0].name), backend="reference")
    label = m.outputs[0].name
    assert label.startswith("label")
    got = m.dequantize_output(out[label], label).reshape(-1)
    assert np.mean(got == est.predict(x[test])) >= 0.95
