"""Fidelity table: each model converted with each calibration method (and options), its top-1
agreement and cosine to float beside onnxruntime int8's on the same calibration and test data.

    .venv/bin/python scripts/fidelity/compare.py MODEL.onnx CALIB.npz TEST.npz [--methods absmax,mse]
        [--set key=value ...]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from cvm.report import table
from mrt.evaluate import evaluate, ort_int8_accuracy
from mrt.pipeline import convert


def _value(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("calib")
    ap.add_argument("test")
    ap.add_argument("--methods", default="absmax,percentile,mse")
    ap.add_argument("--set", action="append", default=[], help="convert option key=value")
    ap.add_argument("--no-ort", action="store_true")
    a = ap.parse_args()
    opts = {k: _value(v) for k, v in (s.split("=", 1) for s in a.set)}
    with np.load(a.calib) as c, np.load(a.test) as t:
        calib, x, y = c["x"], t["x"].astype(np.float32), (t["y"] if "y" in t.files else None)
    rows, float_acc = [], None
    for method in a.methods.split(","):
        t0 = time.time()
        model = convert(a.model, calib, calibration_method=method, progress=False, **opts)
        r = evaluate(a.model, model, x, y, layers=False)
        worst, float_acc = "", r.float_accuracy
        rows.append([f"mrt {method} {' '.join(a.set)}", f"{100 * r.agreement:.2f}%", f"{r.cosine:.5f}",
                     "-" if r.int_accuracy is None else f"{100 * r.int_accuracy:.2f}%", f"{time.time() - t0:.0f}s{worst}"])
    if not a.no_ort:
        o = ort_int8_accuracy(a.model, calib.astype(np.float32), x, y)
        rows.append(["onnxruntime int8 (QDQ u8s8 per-channel MinMax)", f"{100 * o['agreement']:.2f}%", f"{o['cosine']:.5f}",
                     "-" if o["int_accuracy"] is None else f"{100 * o['int_accuracy']:.2f}%", ""])
    rows.insert(0, ["float (onnx)", "100.00%", "1.00000", "-" if float_acc is None else f"{100 * float_acc:.2f}%", ""])
    print(f"{a.model}: {len(x)} test samples, {len(calib)} calibration samples")
    print(table(["quantization", "top-1 agreement", "cosine to float", "top-1 accuracy", "time"], rows, "lrrrr"))


if __name__ == "__main__":
    main()
