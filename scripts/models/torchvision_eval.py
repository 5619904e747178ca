"""Fidelity and latency of the torchvision models converted by measure_convert.py (.cache/models/
NAME_224.onnx and NAME_224.cvm; a model without its .cvm is converted here first, and one that does
not convert gets its one-line error), written to .cache/models/torchvision_fidelity.md for
docs/models.md.

Fidelity: on 64 fresh standard-normal images (random weights make accuracy meaningless, so the
figures are top-1 agreement and cosine of the logits against float), CVM integer (numba) beside
onnxruntime int8 (quantize_static QDQ per-channel u8s8, calibrated on the same 64 images as MRT).
Latency: batch 1, median over at least MIN_SECONDS of interleaved rounds, one thread each: CVM numba, onnxruntime
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

MODELS = ROOT / ".cache" / "models"
OUT = MODELS / "torchvision_fidelity.md"
ALL = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0",
       "squeezenet1_1", "densenet121", "vgg16", "regnet_y_400mf", "convnext_tiny", "vit_b_16")
MIN_SECONDS = 2.0  # of timing per backend
TEST_SEED = 7


def _latency(model, fsess, qsess, x1) -> list[float]:
    """Median ms at batch 1 of CVM numba, ort float, ort int8, timed in interleaved rounds (cvm bench's
    method, so load changes hit all three alike), one thread each."""
    from cvm.bench import interleaved
    from cvm.interp import numba as nb
    runner = nb.prepare(model.graph, model.analysis, threads=1)
    xq = {model.inputs[0].name: model.quantize_input(x1)}
    fns = {"numba": lambda: runner(xq), "float": lambda: fsess.run(None, {"x": x1}),
           "int8": lambda: qsess.run(None, {"x": x1})}
    times = interleaved(fns, MIN_SECONDS)
    return [1e3 * float(np.median(times[k][0])) for k in fns]


def _session(path: Path):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _run(sess, x, batch=8):
    return np.concatenate([sess.run(None, {"x": x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def _model(name: str, onnx_path: Path, calib: np.ndarray):
    import cvm
    import mrt
    path = MODELS / f"{name}_224.cvm"
    if path.exists():
        return cvm.load(path)
    model = mrt.convert(str(onnx_path), calib, progress=False)
    model.save(path)
    return model


def evaluate(name: str) -> str:
    import onnxruntime as ort

    from cvm.bench import quantize_ort_int8
    from mrt.evaluate import cosine
    ort.set_default_logger_severity(3)
    onnx_path = MODELS / f"{name}_224.onnx"
    if not onnx_path.exists():
        return f"| {name} | not exported (scripts/models/export_torchvision.py) | | | | | |"
    calib = np.load(MODELS / "calib_224_64.npz")["x"]
    x = np.random.default_rng(TEST_SEED).standard_normal(calib.shape, np.float32)
    try:
        model = _model(name, onnx_path, calib)
    except Exception as e:  # noqa: BLE001 - the table records why a model does not convert
        return f"| {name} | not converted: {str(e).splitlines()[0]} | | | | | |"
    with tempfile.TemporaryDirectory() as d:
        fsess, qsess = _session(onnx_path), _session(quantize_ort_int8(onnx_path, calib, Path(d)))
        fy, qy = _run(fsess, x), _run(qsess, x)
        ours = np.concatenate([model.dequantize_output(model.run(model.quantize_input(x[i:i + 8])))
                               for i in range(0, len(x), 8)])
        lat = _latency(model, fsess, qsess, x[:1])
    agree = lambda y: 100 * float((y.argmax(1) == fy.argmax(1)).mean())  # noqa: E731
    return (f"| {name} | {agree(ours):.1f}% / {cosine(ours, fy):.4f} | {agree(qy):.1f}% / {cosine(qy, fy):.4f} | "
            f"{lat[0]:.1f} | {lat[1]:.1f} | {lat[2]:.1f} | {lat[0] / lat[2]:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", default=ALL)
    names = p.parse_args().names
    rows = [f"64 random 224x224 images, measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, "
            "latency at batch 1 on one thread (median ms).", "",
            "| model | CVM integer: agreement / cosine | onnxruntime int8 | CVM numba ms | ort float ms | "
            "ort int8 ms | CVM / ort int8 |", "|---|---|---|---|---|---|---|"]
    for name in names:
        rows.append(evaluate(name))
        print(rows[-1], flush=True)
    OUT.write_text("\n".join(rows) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
