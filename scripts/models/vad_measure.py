"""silero-vad (pretrained, from the silero-vad 6.2.3 wheel) converted by MRT at 16 kHz, streamed chunk by chunk
beside onnxruntime's float model and its int8 model (dynamic quantization), on SYNTHETIC speech-like and non-speech
audio (scripts/models/vad_data.py: no real recording is available offline; labels are what was synthesized).

    .venv/bin/python scripts/models/vad_fetch.py
    .venv/bin/python scripts/models/vad_measure.py [--streams 16 --seconds 10 --repeat 200]

Each model carries its own LSTM state from chunk to chunk, as silero-vad's OnnxWrapper does; the integer model's
state output is dequantized and quantized back as the next chunk's state input (the client's work). Calibration:
8 other streams' chunks with the float model's states. Prints fidelity against the float model (mean and max
|probability difference|, decisions at 0.5 that agree), agreement with the synthesized labels, gas, nodes, size
and batch-1 latency per chunk (median of `repeat`, onnxruntime on one thread, numba after a warm-up).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vad_data as V  # noqa: E402
import vad_fetch  # noqa: E402
from cvm.tools.bench import time_calls  # noqa: E402
from mrt.onnx_import.bind import bind_inputs  # noqa: E402
from mrt.pipeline import convert, finish, prepare  # noqa: E402

SR = np.array(16000, np.int64)
CALIB_SEED, TEST_SEED = 0, 1


def session(path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so)


def feeds(sess, x, state):
    """The session's inputs: `sr` too where it is still an input (the original model, not the bound one)."""
    named = {"input": x, "state": state, "sr": SR}
    return {i.name: named[i.name] for i in sess.get_inputs()}


def ort_stream(sess, x):
    """Probabilities [streams, chunks] and the state fed to each chunk [chunks, streams, 2, 128]."""
    state = np.zeros((2, x.shape[0], 128), np.float32)
    probs, states = [], []
    for k in range(x.shape[1]):
        states.append(state.transpose(1, 0, 2))
        out, state = sess.run(None, feeds(sess, x[:, k], state))
        probs.append(out[:, 0])
    return np.stack(probs, 1), np.stack(states)


def output(m, out, onnx_name):
    """The float value of the model output MRT built for ONNX output `onnx_name` (CVM names it onnx_name.out)."""
    name = next(s.name for s in m.outputs if s.name.split(".")[0] == onnx_name)
    return m.dequantize_output(out[name], name)


def mrt_stream(m, x, backend="numba"):
    state = np.zeros((x.shape[0], 2, 128), np.float32)
    probs = []
    for k in range(x.shape[1]):
        out = m.run({"input": m.quantize_input(x[:, k], "input"), "state": m.quantize_input(state, "state")},
                    backend=backend)
        state = output(m, out, "stateN").astype(np.float32)
        probs.append(output(m, out, "output")[:, 0])
    return np.stack(probs, 1)


def calibration(float_sess, streams=8, seconds=10.0):
    x, _ = V.streams(streams, seconds, CALIB_SEED)
    _, states = ort_stream(float_sess, x)
    return {"input": x.transpose(1, 0, 2).reshape(-1, x.shape[2]), "state": states.reshape(-1, 2, 128)}


def convert_vad(path, float_sess, wide=False, **options):
    """One scale for the waveform (per_feature_inputs=False: a per-sample-position scale means nothing for audio).
    wide: every activation at QuantConfig.wide_bits (12) instead of 8."""
    model = bind_inputs(onnx.load(str(path)), {"sr": 16000})
    data = calibration(float_sess)
    if not wide:
        return convert(model, data, progress=False, per_feature_inputs=False, **options)
    c = prepare(model, data, progress=False, per_feature_inputs=False, **options)
    return finish(c, wide_tensors=tuple(n.outputs[0] for n in c.graph.nodes) + tuple(s.name for s in c.graph.inputs))


def _median_ms(fn, repeat):
    return statistics.median(time_calls(fn, 0.0, repeat, repeat)) * 1e3


def fidelity(p, want, labels):
    d = np.abs(p - want)
    return {"mean_abs": float(d.mean()), "max_abs": float(d.max()),
            "agree": float(((p > 0.5) == (want > 0.5)).mean()), "label_acc": float(((p > 0.5) == labels).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    path = vad_fetch.fetch()
    float_s = session(path)
    t = time.perf_counter()
    m = convert_vad(path, float_s)
    convert_s = time.perf_counter() - t
    wide = convert_vad(path, float_s, wide=True)
    narrow = convert_vad(path, float_s, recurrent=False)  # the LSTM cell at 8 bits (the STFT front end stays wide)
    x, labels = V.streams(args.streams, args.seconds, TEST_SEED)
    want, _ = ort_stream(float_s, x)
    ours, ours_wide, ours_narrow = mrt_stream(m, x), mrt_stream(wide, x), mrt_stream(narrow, x)
    first = {"input": m.quantize_input(x[:, 0], "input"), "state": m.quantize_input(np.zeros((len(x), 2, 128)), "state")}
    same = all(np.array_equal(a, b) for a, b in zip(m.run(first, backend="numba").values(),
                                                    m.run(first, backend="reference").values()))
    with tempfile.TemporaryDirectory() as tmp:
        int8 = Path(tmp) / "int8.onnx"
        inlined = Path(tmp) / "bound.onnx"  # onnxruntime's quantizer leaves the If branches alone: inline first
        onnx.save(bind_inputs(onnx.load(str(path)), {"sr": 16000}), str(inlined))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # folds sr == 16000 and its If
        so.optimized_model_filepath = str(inlined)
        ort.InferenceSession(str(inlined), so)
        quantize_dynamic(str(inlined), str(int8), weight_type=QuantType.QInt8)
        int8_s = session(int8)
        got8, _ = ort_stream(int8_s, x)
        one = feeds(float_s, x[:1, 0], np.zeros((2, 1, 128), np.float32))
        one8 = feeds(int8_s, x[:1, 0], np.zeros((2, 1, 128), np.float32))
        q1 = {"input": m.quantize_input(x[:1, 0], "input"), "state": m.quantize_input(np.zeros((1, 2, 128)), "state")}
        q1w, q1n = ({"input": mm.quantize_input(x[:1, 0], "input"), "state": mm.quantize_input(np.zeros((1, 2, 128)), "state")}
                    for mm in (wide, narrow))
        lat = {name: _median_ms(fn, args.repeat) for name, fn in (
            ("numba", lambda: m.run(q1, backend="numba")), ("numba_wide", lambda: wide.run(q1w, backend="numba")),
            ("numba_narrow", lambda: narrow.run(q1n, backend="numba")),
            ("ort_float", lambda: float_s.run(None, one)), ("ort_int8", lambda: int8_s.run(None, one8)))}
    rows = {"float": fidelity(want, want, labels), "MRT --narrow-recurrent (LSTM cell 8-bit)": fidelity(ours_narrow, want, labels),
            "MRT default (STFT front end and LSTM cell 12-bit)": fidelity(ours, want, labels),
            "MRT 12-bit activations": fidelity(ours_wide, want, labels), "ort int8": fidelity(got8, want, labels)}
    print(f"silero-vad 16 kHz: {args.streams} synthetic streams x {x.shape[1]} chunks of 512 samples; "
          f"numba == reference on the first chunk: {same}")
    for label, mm in (("--narrow-recurrent", narrow), ("default", m), ("12-bit", wide)):
        print(f"MRT {label}: opset {mm.graph.opset}, {len(mm.graph.nodes)} nodes, gas {mm.gas} per chunk, "
              f"{len(mm.to_bytes())} bytes")
    print(f"convert (default) {convert_s:.1f} s")
    print("| model | mean abs(p - float) | max abs(p - float) | decisions = float's | = synthesized label | ms/chunk b1 |")
    print("|---|---:|---:|---:|---:|---:|")
    for (name, r), ms in zip(rows.items(), (lat["ort_float"], lat["numba_narrow"], lat["numba"], lat["numba_wide"],
                                            lat["ort_int8"])):
        print(f"| {name} | {r['mean_abs']:.4f} | {r['max_abs']:.4f} | {100 * r['agree']:.2f}% | "
              f"{100 * r['label_acc']:.2f}% | {ms:.3f} |")


if __name__ == "__main__":
    main()
