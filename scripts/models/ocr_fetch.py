"""Fetch the PP-OCR models of the rapidocr-onnxruntime 1.4.4 wheel (Apache-2.0) into .cache/models/ppocr/
with pip (PyPI only, no dependencies installed). Only the classifier is committed
(fixtures/models/ppocr_cls.onnx); tests that need the detector or the recogniser skip without them.

    .venv/bin/python scripts/models/ocr_fetch.py
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "rapidocr-onnxruntime==1.4.4"
DIR = ROOT / ".cache" / "models" / "ppocr"
MODELS = {  # file in DIR -> path inside the wheel
    "cls.onnx": "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "det.onnx": "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    "rec.onnx": "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
}
FIXTURE = ROOT / "fixtures" / "models" / "ppocr_cls.onnx"


def path(kind: str) -> Path:
    """Where the model of this kind ('cls', 'det', 'rec') is; the classifier is the committed fixture."""
    return FIXTURE if kind == "cls" else DIR / f"{kind}.onnx"


def fetch() -> dict[str, Path]:
    wheels = ROOT / ".cache" / "wheels"
    if not all((DIR / name).exists() for name in MODELS):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        WHEEL, "-d", str(wheels)], check=True)
        wheel = next(wheels.glob("rapidocr_onnxruntime-1.4.4-*.whl"))
        DIR.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for name, member in MODELS.items():
                (DIR / name).write_bytes(z.read(member))
    for name in MODELS:
        print(f"{DIR / name}: sha256 {hashlib.sha256((DIR / name).read_bytes()).hexdigest()}")
    if FIXTURE.exists() and FIXTURE.read_bytes() != (DIR / "cls.onnx").read_bytes():
        print(f"warning: {FIXTURE} differs from the wheel's classifier", file=sys.stderr)
    return {name.split(".")[0]: DIR / name for name in MODELS}


if __name__ == "__main__":
    fetch()
