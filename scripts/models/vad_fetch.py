"""Fetch silero-vad's ONNX model (the silero-vad 6.2.3 wheel, MIT licence) into .cache/models/vad/ with pip (PyPI
only, no dependencies installed). Nothing is committed; tests/mrt/test_rnn_vad.py skips without it.

    .venv/bin/python scripts/models/vad_fetch.py

silero_vad.onnx is the model silero-vad's own OnnxWrapper loads: an STFT written as a Conv1d with constant Fourier
kernels, four Conv1d+ReLU encoder blocks, an LSTM cell (128) and a sigmoid head, for 8 and 16 kHz in two branches of
an `If` on its int64 input `sr` (converted with `sr` bound to 16000: mrt.onnx_import.bind.bind_inputs).
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "silero-vad==6.2.3"
MEMBER = "silero_vad/data/silero_vad.onnx"
SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
PATH = ROOT / ".cache" / "models" / "vad" / "silero_vad.onnx"


def fetch() -> Path:
    if not PATH.exists():
        wheels = ROOT / ".cache" / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WHEEL,
                        "-d", str(wheels)], check=True)
        wheel = next(wheels.glob("silero_vad-6.2.3-*.whl"))
        PATH.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            PATH.write_bytes(z.read(MEMBER))
    digest = hashlib.sha256(PATH.read_bytes()).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{PATH}: sha256 {digest}, expected {SHA256}")
    print(f"{PATH}: sha256 {digest}")
    return PATH


if __name__ == "__main__":
    fetch()
