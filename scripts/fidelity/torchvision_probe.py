"""Where a torchvision model's integer logits differ from float, beside onnxruntime int8's: the
error split into a per-class offset shared by every image (what bias correction removes), a
per-image offset (harmless to argmax) and the rest, plus top-1 agreement, cosine and the cosine of
the logits centred on their mean over the images (cosine alone is dominated by the logit vector
every random-weight image shares). The front stages run once; each `--set` variant re-quantizes.

    .venv/bin/python scripts/fidelity/torchvision_probe.py vgg16 [--method mse] [--samples 256] [--seed 7] \\
        [--variant '{"bias_correction": false}' ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "models"))

from sidebyside import run_cvm, run_ort, session  # noqa: E402

MODELS = ROOT / ".cache" / "models"


def split(y: np.ndarray, fy: np.ndarray) -> dict[str, float]:
    """Agreement, cosine, centred cosine, and the logit error's parts (standard deviations)."""
    from mrt.evaluate import cosine
    e = y - fy
    rest = e - e.mean(0) - e.mean(1, keepdims=True) + e.mean()
    centre = fy.mean(0)
    return {"agreement": 100 * float((y.argmax(1) == fy.argmax(1)).mean()), "cosine": cosine(y, fy),
            "centred cosine": cosine(y - centre, fy - centre), "error": float(e.std()),
            "per-class offset": float(e.mean(0).std()), "per-image offset": float(e.mean(1).std()),
            "rest": float(rest.std())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("name")
    p.add_argument("--method", default="mse")
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--seed", type=int, default=7)  # torchvision_eval.py's test images
    p.add_argument("--variant", action="append", default=[], help="quantization overrides as JSON")
    a = p.parse_args()
    from cvm.tools.bench import quantize_ort_int8
    from mrt import pipeline
    onnx_path = MODELS / f"{a.name}_224.onnx"
    calib = np.load(MODELS / "calib_224_64.npz")["x"]
    x = np.random.default_rng(a.seed).standard_normal((a.samples, *calib.shape[1:]), np.float32)
    with tempfile.TemporaryDirectory() as d:
        fy = run_ort(session(onnx_path), x)
        rows = {"onnxruntime int8": split(run_ort(session(quantize_ort_int8(onnx_path, calib, Path(d))), x), fy)}
    c = pipeline.prepare(str(onnx_path), calib, progress=False, calibration_method=a.method)
    for v in a.variant or ["{}"]:
        model = pipeline.finish(c, **json.loads(v))
        rows[f"cvm {a.method} {v} (bias correction {model.meta['quantization']['bias_correction']})"] = split(run_cvm(model, x), fy)
    from cvm.report import table
    keys = list(next(iter(rows.values())))
    print(table(["quantization"] + keys, [[k] + [f"{r[q]:.4g}" for q in keys] for k, r in rows.items()], "l" + "r" * len(keys)))


if __name__ == "__main__":
    main()
