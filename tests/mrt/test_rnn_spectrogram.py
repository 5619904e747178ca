"""A spectrogram front end written as two constant-kernel Conv1d (windowed cos/sin: the STFT's real and imaginary
parts), Pow 2, Add, Sqrt and optionally Log (scripts/models/audio_frontend.py): the float import equals numpy's
rfft and scipy's stft, fuse_magnitude turns the written-out magnitude into exact integer squares and isqrt, and
the integer spectrogram stays close to numpy's. Figures measured with the same data (seeded)."""
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import scipy.signal as ss

from mrt.float_exec import run_float
from mrt.onnx_import.importer import import_onnx
from mrt.passes import run_pipeline
from mrt.pipeline import finish, prepare

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "models"))
import audio_frontend as A  # noqa: E402
import vad_data as V  # noqa: E402


@pytest.fixture(scope="module")
def audio():
    """64 calibration rows (synthetic speech-like and non-speech, plus 16 full-scale sines so the calibrated range
    covers a full-scale input) and 64 test rows, 4096 samples at 16 kHz."""
    rng = np.random.default_rng(0)
    x = np.stack([V.speech_like(4096, rng) if i % 2 else V.non_speech(4096, rng) for i in range(128)])
    t = np.arange(4096) / V.RATE
    full = np.stack([np.sin(2 * np.pi * f * t) for f in np.linspace(100, 7900, 16)])
    return np.concatenate([x[:64], full]).astype(np.float32), x[64:].astype(np.float32)


@pytest.mark.parametrize("log", [False, True])
def test_float_graph_is_the_stft(audio, log):
    _, x = audio
    want = A.reference(x, log=log)
    model = A.spectrogram_model(log=log)
    g = run_pipeline(import_onnx(model, input_shapes={"x": (4096,)}))
    assert sum(n.op == "magnitude" for n in g.nodes) == 1 and not any(n.op in ("pow", "sqrt") for n in g.nodes)
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0], want,
                               rtol=1e-4, atol=1e-3)
    if not log:  # scipy's stft divides by the window's sum
        _, _, z = ss.stft(x[0].astype(np.float64), window="hann", nperseg=256, noverlap=128, boundary=None,
                          padded=False, detrend=False)
        np.testing.assert_allclose(np.abs(z) * ss.get_window("hann", 256).sum(), want[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("log, wide, bound", [
    (False, False, 0.09),  # measured rel L2 0.0715
    (False, True, 0.015),  # 0.0088
    (True, True, 0.35),  # 0.28: the log of quiet bins (down to eps = 1e-3) is where 12 bits of magnitude run out
])
def test_integer_spectrogram(audio, log, wide, bound):
    cal, x = audio
    c = prepare(A.spectrogram_model(log=log), cal, progress=False, per_feature_inputs=False)
    m = finish(c, wide_tensors=tuple(n.outputs[0] for n in c.graph.nodes) + ("x",) if wide else ())
    assert m.graph.opset == 2 and sum(n.op == "isqrt" for n in m.graph.nodes) == 1
    q = m.quantize_input(x)
    out = m.run(q, backend="numba")
    np.testing.assert_array_equal(out, m.run(q, backend="reference"))
    want = A.reference(x, log=log)
    got = m.dequantize_output(out)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < bound
    if log:
        assert np.median(np.abs(got - want)) < 0.15  # nats; measured 0.11


def test_the_front_end_is_wide_by_default(audio):
    """mrt.spectral_precision: the waveform, the Fourier coefficients and the magnitude at 12 bits on the cvm target
    without being asked, so the default conversion is as close as the all-wide one above."""
    from mrt.pipeline import convert
    from mrt.spectral_precision import wide_tensors
    cal, x = audio
    m = convert(A.spectrogram_model(log=False), cal, progress=False, per_feature_inputs=False)
    g = run_pipeline(import_onnx(A.spectrogram_model(log=False), input_shapes={"x": (4096,)}))
    wide = set(m.meta["quantization"]["wide_tensors"])
    assert wide == set(wide_tensors(g)) and "x" in wide
    assert next(n.outputs[0] for n in g.nodes if n.op == "magnitude") in wide
    got, want = m.dequantize_output(m.run(m.quantize_input(x))), A.reference(x, log=False)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.015
