"""The PP-OCR angle classifier at the measured activation width (mrt/width_choice.py) and at 8 bits:
top-1 accuracy and agreement with float on the 256 test lines of ocr_table.py and on 1,024 other
rendered lines (seed 3), and batch-1 latency of both beside onnxruntime int8, one thread, interleaved.

    .venv/bin/python scripts/models/ocr_fetch.py && .venv/bin/python scripts/models/ocr_data.py
    .venv/bin/python scripts/models/cls_width.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

import ocr_data  # noqa: E402
import ocr_fetch  # noqa: E402
from sidebyside import run_cvm, run_ort, session  # noqa: E402

EXTRA_LINES, EXTRA_SEED = 1024, 3


def main() -> None:
    import mrt
    from cvm.tools.bench import interleaved, quantize_ort_int8
    from cvm.interp import numba as nb
    onnx_path = ocr_fetch.path("cls")
    calib = np.load(ROOT / ".cache" / "models" / "ocr" / "cls_calib.npz")["x"]
    test = np.load(ROOT / ".cache" / "models" / "ocr" / "cls_test.npz")
    sets = {"256 test lines": (test["x"], test["y"]),
            f"{EXTRA_LINES} lines, seed {EXTRA_SEED}": ocr_data.cls_set(EXTRA_LINES, EXTRA_SEED)}
    float_sess = session(onnx_path)
    models = {"measured width (default)": mrt.convert(str(onnx_path), calib, progress=False),
              "--bits 8": mrt.convert(str(onnx_path), calib, progress=False, bits=8)}
    for name, (x, y) in sets.items():
        f = run_ort(float_sess, x).argmax(1)
        print(f"{name}: float accuracy {100 * (f == y).mean():.2f}%")
        for label, m in models.items():
            o = run_cvm(m, x).argmax(1)
            q = m.meta["quantization"]
            print(f"  {label:26s} {q['bits']}/{q['weight_bits']} bits: accuracy {100 * (o == y).mean():.2f}%, "
                  f"agreement {100 * (o == f).mean():.2f}%")
    with tempfile.TemporaryDirectory() as d:
        int8 = session(quantize_ort_int8(onnx_path, calib, Path(d), float_sess.get_inputs()[0].name))
        x1 = calib[:1]
        fns = {"ort int8": lambda: int8.run(None, {"x": x1})}
        for label, m in models.items():
            runner, xq = nb.prepare(m.graph, m.analysis, threads=1), {m.inputs[0].name: m.quantize_input(x1)}
            runner(xq)
            fns[label] = lambda runner=runner, xq=xq: runner(xq)
        times = interleaved(fns, 3.0)
    print("batch 1, one thread, median ms: " + ", ".join(f"{k} {1e3 * float(np.median(times[k][0])):.3f}" for k in fns))


if __name__ == "__main__":
    main()
