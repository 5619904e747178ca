"""Measure the recurrent fixtures: fidelity of the float model, MRT's integer model (default: the cells wide,
mrt.recurrent_precision; and with the cells at 8 bits too) and onnxruntime's int8 model
(dynamic quantization, the path onnxruntime offers for LSTM/GRU), gas, node counts, file size and latency.

    .venv/bin/python scripts/models/rnn_measure.py [--repeat 50]

Prints one markdown table row per fixture. Latency is the median of `repeat` runs, one thread for onnxruntime;
numba is measured after a warm-up run (compilation excluded). The unrolled graph's per-step cost is given too:
what a loop op's body would cost (the same gas per step, nodes / steps).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

from cvm.tools.bench import time_calls
from mrt.pipeline import convert

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = {  # name: (metric, steps)
    "rnn_sunspots_lstm": ("mae", 24),
    "rnn_digits_gru": ("accuracy", 8),
}


def _session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so)


def _median_ms(fn, repeat):
    return statistics.median(time_calls(fn, 0.0, repeat, repeat)) * 1e3


def _rel_l2(out, want):
    """Relative L2 distance of a model's outputs to the float model's (and, for a classifier, top-1 disagreements)."""
    out = out.reshape(want.shape)
    rel = f"{np.linalg.norm(out - want) / np.linalg.norm(want):.4f}"
    return rel if want.shape[-1] == 1 else f"{rel}, {int((out.argmax(-1) != want.argmax(-1)).sum())} differ"


def _metric(kind, y, out):
    if kind == "mae":
        return float(np.abs(out.reshape(y.shape) - y).mean() * 100)  # sunspot numbers (the model's unit is /100)
    return float((out.argmax(1) == y).mean() * 100)


def measure(name, repeat):
    kind, steps = FIXTURES[name]
    src = ROOT / "fixtures/models" / f"{name}.onnx"
    calib = np.load(ROOT / "fixtures/data" / f"{name}_calib.npz")["x"]
    test = np.load(ROOT / "fixtures/data" / f"{name}_test.npz")
    x, y = test["x"], test["y"]
    with tempfile.TemporaryDirectory() as tmp:
        int8 = Path(tmp) / "int8.onnx"
        quantize_dynamic(str(src), str(int8), weight_type=QuantType.QInt8)
        float_s, int8_s = _session(src), _session(int8)
        t = time.perf_counter()
        m = convert(src, calib, progress=False)
        convert_s = time.perf_counter() - t
        narrow = convert(src, calib, progress=False, recurrent=False)  # the cells at 8 bits too
        xq = m.quantize_input(x)
        out = m.run(xq, backend="numba")
        assert np.array_equal(out, m.run(xq, backend="reference")), "numba != reference"
        want, got8 = float_s.run(None, {"x": x})[0], int8_s.run(None, {"x": x})[0]
        ours, ours8 = m.dequantize_output(out), narrow.dequantize_output(narrow.run(narrow.quantize_input(x)))
        row = {
            "name": name, "metric": kind,
            "float": _metric(kind, y, want), "ours": _metric(kind, y, ours), "ours_narrow": _metric(kind, y, ours8),
            "ort_int8": _metric(kind, y, got8),
            "rel": {k: _rel_l2(v, want) for k, v in (("ours", ours), ("ours_narrow", ours8), ("ort_int8", got8))},
            "gas": m.gas, "nodes": len(m.graph.nodes), "steps": steps, "convert_s": convert_s,
            "cvm_bytes": len(m.to_bytes()), "onnx_bytes": src.stat().st_size,
        }
        for batch in (1, 64):
            xb = np.ascontiguousarray(np.resize(x, (batch, *x.shape[1:])))
            qb = m.quantize_input(xb)
            row[f"numba_ms_b{batch}"] = _median_ms(lambda qb=qb: m.run(qb, backend="numba"), repeat)
            nb = narrow.quantize_input(xb)
            row[f"narrow_ms_b{batch}"] = _median_ms(lambda nb=nb: narrow.run(nb, backend="numba"), repeat)
            row[f"ort_ms_b{batch}"] = _median_ms(lambda xb=xb: float_s.run(None, {"x": xb}), repeat)
            row[f"ort_int8_ms_b{batch}"] = _median_ms(lambda xb=xb: int8_s.run(None, {"x": xb}), repeat)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    print("| fixture | metric | float | MRT (cells wide) | MRT 8-bit cells | ort int8 | rel L2 to float: MRT / 8-bit / ort |"
          " gas | nodes (per step) | .cvm bytes | convert s | numba ms b1 / b64 (8-bit cells) | ort float ms b1 / b64 |"
          " ort int8 ms b1 / b64 |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in FIXTURES:
        r = measure(name, args.repeat)
        print(f"| {r['name']} | {r['metric']} | {r['float']:.2f} | {r['ours']:.2f} | {r['ours_narrow']:.2f} | "
              f"{r['ort_int8']:.2f} | {' / '.join(r['rel'].values())} | {r['gas']} | "
              f"{r['nodes']} ({r['nodes'] / r['steps']:.0f}) | {r['cvm_bytes']} | {r['convert_s']:.1f} | "
              f"{r['numba_ms_b1']:.3f} / {r['numba_ms_b64']:.3f} ({r['narrow_ms_b1']:.3f} / {r['narrow_ms_b64']:.3f}) | {r['ort_ms_b1']:.3f} / {r['ort_ms_b64']:.3f} | "
              f"{r['ort_int8_ms_b1']:.3f} / {r['ort_int8_ms_b64']:.3f} |")


if __name__ == "__main__":
    main()
