"""Fidelity and latency of the torchvision models converted by measure_convert.py (.cache/models/
NAME_224.onnx and NAME_224.cvm; a model without its .cvm is converted here first, and one that does
not convert gets its one-line error), written to .cache/models/torchvision_fidelity.md for
docs/models.md.

Fidelity: on TEST_SAMPLES fresh standard-normal images (random weights make accuracy meaningless, so the
figures are top-1 agreement and cosine of the logits against float), CVM integer (numba) beside
onnxruntime int8 (quantize_static QDQ per-channel u8s8, calibrated on the same 64 images as MRT).
Latency: batch 1, one thread each (sidebyside.latency_ms): CVM numba, onnxruntime
float and onnxruntime int8, in the same process.

    .venv/bin/python scripts/models/torchvision_eval.py [NAME ...]
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

from sidebyside import TORCHVISION, latency_ms, run_cvm, run_ort, session, measure_table  # noqa: E402

MODELS = ROOT / ".cache" / "models"
OUT = MODELS / "torchvision_fidelity.md"
TEST_SEED = 7
ORT_CALIB = {"vit_b_16": 16}  # onnxruntime's int8 calibration keeps every tensor: ViT-B on 64 images needs ~21 GB
TEST_SAMPLES = 256  # fresh images; with random weights the logits are close, so fewer leave agreement noisy


def _model(name: str, onnx_path: Path, calib: np.ndarray):
    import cvm
    import mrt
    path = MODELS / f"{name}_224.cvm"
    if path.exists():
        return cvm.load(path)
    model = mrt.convert(str(onnx_path), calib, progress=False)
    model.save(path)
    return model


def row_label(name: str, samples: int) -> str:
    return name if samples == TEST_SAMPLES else f"{name}, {samples:,} images (the first {TEST_SAMPLES} are its row's)"


def evaluate(name: str, samples: int = TEST_SAMPLES) -> str:
    from cvm.tools.bench import quantize_ort_int8
    from mrt.evaluate import cosine
    onnx_path = MODELS / f"{name}_224.onnx"
    if not onnx_path.exists():
        return f"| {row_label(name, samples)} | not exported (scripts/models/export_torchvision.py) | | | | | |"
    calib = np.load(MODELS / "calib_224_64.npz")["x"]
    # the same generator and seed for any count: the first TEST_SAMPLES images are always the table's
    x = np.random.default_rng(TEST_SEED).standard_normal((samples, *calib.shape[1:]), np.float32)
    try:
        model = _model(name, onnx_path, calib)
    except Exception as e:  # noqa: BLE001 - the table records why a model does not convert
        return f"| {row_label(name, samples)} | not converted: {str(e).splitlines()[0]} | | | | | |"
    with tempfile.TemporaryDirectory() as d:
        ort_calib = calib[:ORT_CALIB.get(name, len(calib))]
        fsess, qsess = session(onnx_path), session(quantize_ort_int8(onnx_path, ort_calib, Path(d)))
        fy, qy, ours = run_ort(fsess, x), run_ort(qsess, x), run_cvm(model, x)
        lat = list(latency_ms(model, fsess, qsess, x[:1]).values())
    note = f" (onnxruntime calibrated on {len(ort_calib)} of them)" if len(ort_calib) < len(calib) else ""
    agree = lambda y: 100 * float((y.argmax(1) == fy.argmax(1)).mean())  # noqa: E731
    return (f"| {row_label(name, samples)} | {agree(ours):.1f}% / {cosine(ours, fy):.4f} | {agree(qy):.1f}% / {cosine(qy, fy):.4f}{note} | "
            f"{lat[0]:.1f} | {lat[1]:.1f} | {lat[2]:.1f} | {lat[0] / lat[2]:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", default=TORCHVISION)
    p.add_argument("--samples", type=int, default=TEST_SAMPLES,
                   help=f"images per model (default {TEST_SAMPLES}); another count adds its own row, whose first "
                        f"{TEST_SAMPLES} images are the default row's: where 256 images cannot separate near-tied "
                        "logits, more of the same draw can")
    a = p.parse_args()
    names, samples = a.names, a.samples
    head = [f"{TEST_SAMPLES} random 224x224 images (calibration: 64 others), measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, "
            "latency at batch 1 on one thread (median ms).", "",
            "| model | CVM integer: agreement / cosine | onnxruntime int8 | CVM numba ms | ort float ms | "
            "ort int8 ms | CVM / ort int8 |", "|---|---|---|---|---|---|---|"]
    measure_table(OUT, head, [row_label(n, samples) for n in names], lambda label: evaluate(label.split(",")[0], samples))


if __name__ == "__main__":
    main()
