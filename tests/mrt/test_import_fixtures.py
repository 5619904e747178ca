"""The trained fixture models: import + DEFAULT_PIPELINE + run_float matches onnxruntime on
their test inputs, to 1e-4 of each output's range."""
import json
from pathlib import Path

import numpy as np
import pytest

from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes import run_pipeline

MODELS = Path(__file__).parents[2] / "fixtures" / "models"
EXPECTED = ["mnist_cnn", "digits_mlp", "cancer_linear", "cancer_linear_gemm", "resnet_cifar"]
MAX_SAMPLES = 128  # enough to cover the data, small enough to keep the resnet quick


def _names():
    found = sorted(p.stem for p in MODELS.glob("*.onnx")) if MODELS.is_dir() else []
    return sorted(set(EXPECTED) | set(found))


# fixtures whose inputs are not one float array in fixtures/data: where their float import is checked
ELSEWHERE = {
    "ppocr_cls": "its inputs are text lines rendered at test time: tests/mrt/test_ppocr_cls.py",
    "text_encoder": "two integer inputs (ids, mask): tests/mrt/test_transformer_fixture.py",
    "text_embedder": "text_encoder cut at its sentence vector: tests/chain/test_similarity_example.py",
}
DATA = {"credit_xgb": MODELS / "credit_german.npz"}  # features as the credit example's borrowers send them


def _test_data(name):
    if name in ELSEWHERE:
        pytest.skip(ELSEWHERE[name])
    manifest = MODELS / "manifest.json"
    entry = json.loads(manifest.read_text())["models"].get(name, {}) if manifest.exists() else {}
    data = MODELS.parent / "data"
    candidates = [MODELS / entry["test"]] if "test" in entry else \
        [DATA.get(name), data / f"{name}_test.npz", data / f"{name}_calib.npz"]
    path = next((p for p in candidates if p is not None and p.exists()), None)
    if path is None:
        pytest.fail(f"fixture {name} has no data: add fixtures/data/{name}_test.npz or an entry here")
    with np.load(path) as data:
        return np.asarray(data["x"][:MAX_SAMPLES], dtype=np.float32)


@pytest.mark.parametrize("name", _names())
def test_fixture_matches_onnxruntime(name, ort):
    import onnx

    path = MODELS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"fixture model {path} does not exist yet")
    x = _test_data(name)
    graph = run_pipeline(import_onnx(path))
    model = onnx.load(path)
    want = ort(model, {graph.inputs[0].name: x})
    got = run_float(graph, x)
    assert got, "the graph has no outputs"
    for out, value in got.items():
        ref = want[out]
        span = float(ref.max() - ref.min()) or 1.0
        np.testing.assert_allclose(value, ref, rtol=0, atol=1e-4 * span, err_msg=out)
