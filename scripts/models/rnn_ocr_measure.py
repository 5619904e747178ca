"""Measure the `rnn_ocr_bilstm` fixture (small CNN + bidirectional LSTM + CTC head, fixtures/train/rnn_ocr_bilstm.py)
on freshly rendered lines (scripts/models/rnn_ocr_data.py, TEST_SEED): character error rate and exact-line match of
the float model, MRT's integer model and onnxruntime's int8 model (dynamic quantization, its path for LSTM), how
often each model's decoded string equals the float model's, gas, nodes, size, conversion time and batch-1 latency.

    .venv/bin/python scripts/models/rnn_ocr_measure.py [--lines 256 --repeat 30]

Latency: median of `repeat` runs, onnxruntime on one thread, numba after a warm-up run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rnn_ocr_data as D  # noqa: E402
from cvm.tools.bench import time_calls  # noqa: E402
from mrt.pipeline import convert  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NAME = "rnn_ocr_bilstm"
SRC = ROOT / "fixtures" / "models" / f"{NAME}.onnx"
CALIB = ROOT / "fixtures" / "data" / f"{NAME}_calib.npz"


def session(path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so)


def convert_ocr(recurrent=True):
    return convert(SRC, np.load(CALIB)["x"], progress=False, recurrent=recurrent)


def scores(pred, truth, want):
    return {"cer": D.cer(pred, truth), "exact": D.exact(pred, truth), "same": D.exact(pred, want)}


def _median_ms(fn, repeat):
    return statistics.median(time_calls(fn, 0.0, repeat, repeat)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--narrow-recurrent", action="store_true", help="the BiLSTM at 8 bits too (mrt.recurrent_precision)")
    args = ap.parse_args()
    float_s = session(SRC)
    t = time.perf_counter()
    m = convert_ocr(recurrent=not args.narrow_recurrent)
    convert_s = time.perf_counter() - t
    for label, (x, truth) in (("docstring text (the training vocabulary, new renderings)",
                               D.dataset(args.lines, D.TEST_SEED)),
                              ("random text (never trained on)", D.random_dataset(args.lines, D.TEST_SEED))):
        print(f"\n{label}")
        report(m, float_s, x, truth, convert_s, args.repeat)


def report(m, float_s, x, truth, convert_s, repeat):
    want = D.decode(float_s.run(None, {"x": x})[0])
    q = m.quantize_input(x)
    out = m.run(q, backend="numba")
    same = np.array_equal(out, m.run(q, backend="reference"))
    ours = D.decode(m.dequantize_output(out))
    with tempfile.TemporaryDirectory() as tmp:
        int8 = Path(tmp) / "int8.onnx"
        quantize_dynamic(str(SRC), str(int8), weight_type=QuantType.QInt8)
        int8_s = session(int8)
        got8 = D.decode(int8_s.run(None, {"x": x})[0])
        x1, q1 = x[:1], q[:1]
        lat = {"numba": _median_ms(lambda: m.run(q1, backend="numba"), repeat),
               "float": _median_ms(lambda: float_s.run(None, {"x": x1}), repeat),
               "int8": _median_ms(lambda: int8_s.run(None, {"x": x1}), repeat)}
    rows = {"float": (scores(want, truth, want), lat["float"]), "MRT": (scores(ours, truth, want), lat["numba"]),
            "ort int8": (scores(got8, truth, want), lat["int8"])}
    print(f"{NAME}: {len(x)} rendered lines (seed {D.TEST_SEED}); numba == reference: {same}")
    print(f"MRT: opset {m.graph.opset}, {len(m.graph.nodes)} nodes, gas {m.gas} per line, {len(m.to_bytes())} bytes "
          f"(.onnx {SRC.stat().st_size}), convert {convert_s:.1f} s")
    print("| model | CER | exact lines | strings = float's | ms/line b1 |")
    print("|---|---:|---:|---:|---:|")
    for name, (r, ms) in rows.items():
        print(f"| {name} | {100 * r['cer']:.2f}% | {100 * r['exact']:.2f}% | {100 * r['same']:.2f}% | {ms:.3f} |")
    for p, t_, o in list(zip(want, truth, ours))[:4]:
        print(f"  truth {t_!r:18} float {p!r:18} MRT {o!r}")


if __name__ == "__main__":
    main()
