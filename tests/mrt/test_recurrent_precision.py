"""Recurrent cells are quantized wide by default on the cvm target (mrt.recurrent_precision): their states at
QuantConfig.wide_bits, the dense layers reading them at 10-bit weights, the layers around them unchanged."""
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mrt import recurrent_precision
from mrt.pipeline import convert, prepare
from mrt.quantize import config_for

ROOT = Path(__file__).resolve().parents[2]


def _data(name, test=True):
    return (ROOT / "fixtures/models" / f"{name}.onnx", np.load(ROOT / "fixtures/data" / f"{name}_calib.npz")["x"],
            np.load(ROOT / "fixtures/data" / f"{name}_test.npz") if test else None)


def _weight_dtypes(m, op):
    return {str(m.graph.constants[n.inputs[1]].dtype) for n in m.graph.nodes if n.op == op}


@pytest.fixture(scope="module")
def gru():
    src, calib, test = _data("rnn_digits_gru")
    want = ort.InferenceSession(str(src)).run(None, {"x": test["x"]})[0]
    models = {r: convert(src, calib, progress=False, recurrent=r) for r in (True, False)}
    outs = {r: m.dequantize_output(m.run(m.quantize_input(test["x"]), backend="numba")) for r, m in models.items()}
    return models, outs, want


def test_the_wide_set_grows_through_layout_ops_to_the_graph_input_and_the_head():
    src, calib, _ = _data("rnn_digits_gru")
    g = prepare(src, calib, progress=False).graph
    wide = set(recurrent_precision.wide_tensors(g))
    assert g.recurrent and "x" not in g.recurrent  # the importer records the cell's own tensors
    assert "x" in wide  # a transpose hands the input sequence to the cell
    head = next(n for n in g.nodes if n.op == "dense" and n.outputs[0] in g.outputs)
    assert head.inputs[0] in wide  # a slice hands the last hidden state to the classifier


def test_default_records_the_wide_cell_and_narrow_keeps_the_earlier_metadata(gru):
    models, _, _ = gru
    wide_q, narrow_q = models[True].meta["quantization"], models[False].meta["quantization"]
    assert wide_q["wide_weight_bits"] == recurrent_precision.WEIGHT_BITS and "x" in wide_q["wide_tensors"]
    assert "wide_weight_bits" not in narrow_q and narrow_q["wide_tensors"] == []
    assert _weight_dtypes(models[True], "dense") == {"int16"} and _weight_dtypes(models[False], "dense") == {"int8"}


def test_wide_cells_quarter_the_error_and_agree_with_float_as_onnxruntime_int8_does(gru):
    """Measured: output relative L2 0.0161 (narrow) -> 0.0017 (default); onnxruntime's dynamic int8 0.0036 and
    its top-1 disagreements with float 1 of 360, the default's 1 (narrow: 4)."""
    _, outs, want = gru
    rel = {r: np.linalg.norm(o - want) / np.linalg.norm(want) for r, o in outs.items()}
    assert rel[True] < 0.25 * rel[False], rel
    assert (outs[True].argmax(1) != want.argmax(1)).sum() <= 1


def test_sunspots_lstm_forecasts_as_float_does():
    """Measured MAE: float 13.96, default 13.98, narrow 14.21, onnxruntime dynamic int8 14.09 sunspots."""
    src, calib, test = _data("rnn_sunspots_lstm")
    m = convert(src, calib, progress=False)
    xq = m.quantize_input(test["x"])
    out = m.run(xq, backend="numba")
    np.testing.assert_array_equal(out, m.run(xq, backend="reference"))
    ours = m.dequantize_output(out).reshape(test["y"].shape)
    want = ort.InferenceSession(str(src)).run(None, {"x": test["x"]})[0].reshape(test["y"].shape)
    assert np.abs(ours - test["y"]).mean() <= np.abs(want - test["y"]).mean() + 0.0005  # 0.05 sunspots
    assert np.abs(ours - want).mean() <= 0.002  # 0.2 sunspots (measured 0.09; onnxruntime int8 0.58)


def test_a_cnn_front_end_keeps_int8_convs():
    src, calib, _ = _data("rnn_ocr_bilstm", test=False)
    m = convert(src, calib, progress=False)
    assert _weight_dtypes(m, "conv2d") == {"int8"}
    assert "int16" in _weight_dtypes(m, "dense")


def test_models_without_a_recurrence_are_unchanged():
    src, calib, _ = _data("digits_mlp")
    q = convert(src, calib, progress=False).meta["quantization"]
    assert q["wide_tensors"] == [] and "wide_weight_bits" not in q and "lookup_range" not in q


def test_cli_lookup_range_reaches_an_fhe_models_metadata(tmp_path):
    from mrt.cli import main as mrt_main
    import cvm
    out = tmp_path / "digits_fhe.cvm"
    assert mrt_main(["convert", str(ROOT / "fixtures/models/digits_mlp.onnx"), "--calib",
                     str(ROOT / "fixtures/data/digits_mlp_calib.npz"), "-o", str(out), "--target", "fhe",
                     "--lookup-range", "calibrated"]) == 0
    assert cvm.load(out).meta["quantization"]["lookup_range"] == "calibrated"


def test_wide_weight_bits_is_checked():
    with pytest.raises(ValueError, match="wide_weight_bits must be in 2..16"):
        config_for("cvm", wide_weight_bits=17)


def test_eval_reports_a_forecasts_error_against_the_labels(tmp_path, capsys):
    """A one-value output is a regression: `mrt eval` gives the mean absolute error to the labels and the
    distance to float (top-1 agreement would read 100% for any forecast)."""
    from mrt.cli import main as mrt_main
    src, calib_npz = ROOT / "fixtures/models/rnn_sunspots_lstm.onnx", ROOT / "fixtures/data/rnn_sunspots_lstm_calib.npz"
    out = tmp_path / "sunspots.cvm"
    assert mrt_main(["convert", str(src), "--calib", str(calib_npz), "-o", str(out)]) == 0
    capsys.readouterr()
    assert mrt_main(["eval", str(src), str(out), "--data", str(ROOT / "fixtures/data/rnn_sunspots_lstm_test.npz"),
                     "--compare-ort", "--calib", str(calib_npz)]) == 0
    text = capsys.readouterr().out
    assert "mean abs error to labels" in text and "onnxruntime int8" in text and "top-1" not in text
