"""The committed real transformer: fixtures/models/text_encoder.onnx, a two-layer BERT-style encoder trained
by fixtures/train/text_encoder.py to tell stdlib docstring sentences from their words shuffled, exported by
torch 2.13 as BertModel is (int64 ids and mask, Gather embeddings, LayerNormalization, masked softmax,
erf GELU, mean pooling). Converted by MRT to opset 2 and run on the 512 held-out examples: numba ==
reference bit for bit, the decisions and logits of float (onnxruntime) kept."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.pipeline import convert
from mrt.text_precision import encoder_wide_tensors

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MODEL, DATA = FIXTURES / "models" / "text_encoder.onnx", FIXTURES / "data" / "text_encoder.npz"


def _inputs(data, part: str) -> dict[str, np.ndarray]:
    return {k: data[f"{part}_{k}"].astype(np.int64) for k in ("input_ids", "attention_mask")}


@pytest.fixture(scope="module")
def converted():
    data = np.load(DATA)
    graph = run_pipeline(import_onnx(str(MODEL)), DEFAULT_PIPELINE)
    plain = convert(str(MODEL), _inputs(data, "calib"), progress=False)
    wide = convert(str(MODEL), _inputs(data, "calib"), progress=False, wide_tensors=encoder_wide_tensors(graph))
    test = _inputs(data, "test")
    want = ort.InferenceSession(str(MODEL)).run(None, test)[0]
    return data, test, want, {"8-bit": plain, "encoder 12-bit": wide}


def _run(model, x, backend):
    ints = {s.name: model.quantize_input(x[s.name], s.name) for s in model.inputs}
    return model.run(ints, backend=backend)


def test_fixture_is_small_and_float_learned_the_task():
    data = np.load(DATA)
    assert MODEL.stat().st_size < 600_000
    logits = ort.InferenceSession(str(MODEL)).run(None, _inputs(data, "test"))[0]
    assert (logits.argmax(1) == data["test_labels"]).mean() > 0.8


def test_converts_to_opset_2_and_numba_equals_reference(converted):
    _, test, _, models = converted
    for model in models.values():
        assert model.graph.opset == 2
        assert {"gather", "isqrt", "matmul", "div"} <= {n.op for n in model.graph.nodes}
        assert np.array_equal(_run(model, test, "reference"), _run(model, test, "numba"))


@pytest.mark.parametrize("name,agree,cos", [("8-bit", 0.99, 0.999), ("encoder 12-bit", 0.99, 0.9995)])
def test_integer_model_keeps_the_float_decisions(converted, name, agree, cos):
    _, test, want, models = converted
    model = models[name]
    got = _run(model, test, "numba").astype(np.float64) * float(next(iter(model.meta["output_scales"].values())))
    assert (got.argmax(1) == want.argmax(1)).mean() >= agree
    c = (got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want)
    assert c > cos, c
