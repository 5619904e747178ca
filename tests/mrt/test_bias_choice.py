"""Bias correction chosen by measurement (mrt.bias_choice): for the cvm target the pipeline quantizes
with and without it and keeps the model closer to float on calibration samples; a caller's explicit
setting is obeyed; the layer reading a graph input is left alone on cvm."""
from pathlib import Path

import numpy as np

from mrt import bias_choice, pipeline
from mrt.quantize import config_for, emit

FIX = Path(__file__).parents[2] / "fixtures"


def _mnist():
    with np.load(FIX / "data" / "mnist_cnn_calib.npz") as d:
        return FIX / "models" / "mnist_cnn.onnx", d["x"][:64]


def test_the_pipeline_keeps_the_candidate_with_the_smaller_output_error():
    path, calib = _mnist()
    c = pipeline.prepare(path, calib, progress=False)
    cfg = config_for("cvm")
    on, emitted, errors = bias_choice.choose(c.graph, c.data, lambda bc: emit(
        c.graph, c.thresholds, cfg.__class__(**{**vars(cfg), "bias_correction": bc}), {}, means=c.means))
    assert set(errors) == {False, True} and errors[on] == min(errors.values())
    assert emitted[1]["quantization"]["bias_correction"] is on
    model = pipeline.finish(c)
    assert model.meta["quantization"]["bias_correction"] is on  # recorded as the bool the metadata schema wants


def test_an_explicit_setting_is_obeyed():
    path, calib = _mnist()
    for bc in (False, True):
        m = pipeline.convert(path, calib, progress=False, bias_correction=bc)
        assert m.meta["quantization"]["bias_correction"] is bc


def test_cvm_leaves_the_layer_reading_a_graph_input_uncorrected():
    path, calib = _mnist()
    c = pipeline.prepare(path, calib, progress=False)
    plain, corrected = (pipeline.finish(c, bias_correction=bc) for bc in (False, True))
    first = [next(n for n in m.graph.nodes if n.op == "conv2d") for m in (plain, corrected)]
    assert np.array_equal(plain.graph.constants[first[0].inputs[2]], corrected.graph.constants[first[1].inputs[2]])
    later = [[n for n in m.graph.nodes if n.op in ("conv2d", "dense")][1:] for m in (plain, corrected)]
    assert any(not np.array_equal(plain.graph.constants[a.inputs[2]], corrected.graph.constants[b.inputs[2]])
               for a, b in zip(*later))


def test_the_comparison_runs_in_batches_within_the_run_memory_cap(monkeypatch):
    """DenseNet-121 at 224x224 needs 176 MB of activations a sample: 16 at once are over the 2 GB cap."""
    from types import SimpleNamespace
    from mrt.float_exec import run_float
    path, calib = _mnist()
    c = pipeline.prepare(path, calib, progress=False)
    model = pipeline.finish(c, bias_correction=False)
    head = {k: v[:10] for k, v in c.data.items()}
    want = run_float(c.graph, head)
    whole = bias_choice.output_error(model, head, want)
    monkeypatch.setattr(bias_choice.limits, "of", lambda opset: SimpleNamespace(run_bytes=3 * model.analysis.activation_bytes))
    assert bias_choice.output_error(model, head, want) == whole
