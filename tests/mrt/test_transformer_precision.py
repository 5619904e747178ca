"""Mixed precision of transformer encoders: mrt.text_precision picks the tensors to widen, and calibration
gives each wide tensor the threshold of its own bits (mse at 8 bits clips what 12 bits keep)."""
from __future__ import annotations

import numpy as np
import pytest

from mrt.calibrate import calibrate
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.text_precision import PARTS, encoder_wide_tensors
from tests.mrt.test_transformer import _encoder, _text


@pytest.fixture(scope="module")
def graph():
    return run_pipeline(import_onnx(_encoder().SerializeToString()), DEFAULT_PIPELINE)


def test_wide_tensors_of_an_encoder(graph):
    ops = {n.outputs[0]: n.op for n in graph.nodes}
    wide = set(encoder_wide_tensors(graph))
    assert {n.outputs[0] for n in graph.nodes if n.op == "layer_norm"} <= wide
    assert {n.outputs[0] for n in graph.nodes if n.op == "univariate"} <= wide
    assert not wide & set(graph.outputs)
    assert not wide & set(graph.initializers)
    assert {ops.get(t) for t in wide} <= {"layer_norm", "univariate", "add", "dense", "embed", "sum", "div_tensor", None}
    assert set(encoder_wide_tensors(graph, ("layer_norm",))) == {t for t, op in ops.items() if op == "layer_norm"}
    with pytest.raises(ValueError, match="unknown wide-tensor parts"):
        encoder_wide_tensors(graph, ("gelu",))
    assert set(PARTS) == {"activations", "layer_norm", "residual", "dense"}


def test_wide_tensors_are_calibrated_at_their_bits(graph):
    data = _text(128, 1)
    wide = encoder_wide_tensors(graph)
    base = calibrate(graph, data, method="mse", progress=False)
    at12 = calibrate(graph, data, method="mse", bits=12, progress=False)
    mixed = calibrate(graph, data, method="mse", progress=False, wide=wide, wide_bits=12)
    for name in base:
        assert mixed[name] == (at12[name] if name in wide else base[name]), name
    assert any(at12[t] > base[t] for t in wide)  # 12 bits clip less
    assert np.isfinite(list(mixed.values())).all()
