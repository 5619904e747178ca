"""Measures the three PP-OCR models of rapidocr-onnxruntime 1.4.4 on rendered text
(scripts/models/ocr_data.py) and writes .cache/models/ocr_table.md, which
scripts/models/models_md.py puts into docs/models.md.

For each model: conversion (mse calibration on the calibration set; wall time, opset, nodes, gas per
sample), then on the test set the float model (onnxruntime), the CVM integer model (numba) and
onnxruntime int8 (quantize_static QDQ per-channel u8s8 on the same calibration data), compared with
what the model is for:
  cls: top-1 accuracy on the rendered labels, agreement with float, cosine of the probabilities;
  det: cosine of the probability maps, and agreement of the text mask (map > 0.3, RapidOCR's
       threshold) with float's;
  rec: CTC-decoded strings equal to float's, and to the rendered text.
A model that does not convert gets its one-line error in the table.

    .venv/bin/python scripts/models/ocr_fetch.py && .venv/bin/python scripts/models/ocr_data.py
    .venv/bin/python scripts/models/ocr_table.py [cls det rec]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

import ocr_data  # noqa: E402
import ocr_fetch  # noqa: E402
from sidebyside import latency_ms, run_cvm, run_ort, session, measure_table  # noqa: E402

DATA = ROOT / ".cache" / "models" / "ocr"
OUT = ROOT / ".cache" / "models" / "ocr_table.md"


def _cls_metrics(outs: dict, y) -> dict[str, str]:
    from mrt.evaluate import cosine
    f = outs["float"].argmax(1)
    return {k: f"acc {100 * (o.argmax(1) == y).mean():.1f}%, agree {100 * (o.argmax(1) == f).mean():.1f}%, "
               f"cos {cosine(o, outs['float']):.4f}" for k, o in outs.items()}


def _det_metrics(outs: dict, _y) -> dict[str, str]:
    from mrt.evaluate import cosine
    mask = outs["float"] > ocr_data.DET_THRESH
    return {k: f"cos {cosine(o, outs['float']):.4f}, mask agree {100 * ((o > ocr_data.DET_THRESH) == mask).mean():.2f}%"
            for k, o in outs.items()}


def _rec_metrics(outs: dict, texts, characters) -> dict[str, str]:
    decoded = {k: ocr_data.ctc_decode(o, characters) for k, o in outs.items()}
    same = lambda a, b: 100 * np.mean([p == q for p, q in zip(a, b)])  # noqa: E731
    return {k: f"= float {same(d, decoded['float']):.1f}%, = text {same(d, texts):.1f}%" for k, d in decoded.items()}


def measure(kind: str) -> str:
    import onnx

    import mrt
    onnx_path = ocr_fetch.path(kind)
    calib, test = np.load(DATA / f"{kind}_calib.npz"), np.load(DATA / f"{kind}_test.npz")
    x, y = test["x"], (test["y"] if "y" in test.files else None)
    start = time.perf_counter()
    try:
        model = mrt.convert(str(onnx_path), calib["x"], progress=False)
    except Exception as e:  # noqa: BLE001 - the table records why a model does not convert
        return f"| {kind} | {onnx_path.name} | not converted: {str(e).splitlines()[0]} | | | |"
    seconds = time.perf_counter() - start
    from cvm.tools.bench import quantize_ort_int8
    with tempfile.TemporaryDirectory() as d:
        float_sess = session(onnx_path)
        int8_sess = session(quantize_ort_int8(onnx_path, calib["x"], Path(d), float_sess.get_inputs()[0].name))
        outs = {"float": run_ort(float_sess, x), "cvm": run_cvm(model, x), "ort int8": run_ort(int8_sess, x)}
        ms = latency_ms(model, float_sess, int8_sess, x[:1])
    if kind == "cls":
        metrics = _cls_metrics(outs, y)
    elif kind == "det":
        metrics = _det_metrics(outs, y)
    else:
        meta = {p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}
        metrics = _rec_metrics(outs, list(y), meta["character"].splitlines())
    gas = model.cost(1)
    return (f"| {kind} | {tuple(x.shape[1:])}, {len(x)} test / {len(calib['x'])} calibration | "
            f"{seconds:.0f} s, opset {model.graph.opset}, {len(model.graph.nodes)} nodes, gas {gas:.3g} | "
            f"{metrics['float']} | {metrics['cvm']} | {metrics['ort int8']} | "
            f"{ms['numba']:.1f} / {ms['ort float']:.1f} / {ms['ort int8']:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kinds", nargs="*", default=["cls", "det", "rec"])
    kinds = p.parse_args().kinds
    head = [f"Rendered text, measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores "
            f"(conversion time includes calibration).", "",
            "| model | input, samples | conversion | float | CVM integer | onnxruntime int8 | "
            "batch-1 ms, one thread: CVM numba / ort float / ort int8 |", "|---|---|---|---|---|---|---|"]
    measure_table(OUT, head, kinds, measure)


if __name__ == "__main__":
    main()
