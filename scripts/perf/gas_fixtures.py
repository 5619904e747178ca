"""Convert the committed ONNX fixtures that have no committed .cvm (fixtures/models/*.onnx) with their
calibration data, so that scripts/perf/gas_report.py can price them under schedules v1 and v2.

    python scripts/perf/gas_fixtures.py OUT_DIR        # writes OUT_DIR/NAME.cvm, prints what it skipped

A fixture whose inputs are made at test time (ppocr_cls: rendered text lines) is skipped with where
it is converted.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODELS, DATA = ROOT / "fixtures" / "models", ROOT / "fixtures" / "data"
SKIP = {"ppocr_cls": "inputs are text lines rendered at test time (tests/mrt/test_ppocr_cls.py)"}


def _text(_name):
    with np.load(DATA / "text_encoder.npz") as d:
        return {k: d[f"calib_{k}"].astype(np.int64) for k in ("input_ids", "attention_mask")}


def _x(path):
    def load(_name):
        with np.load(path) as d:
            return d["x"].astype(np.float32)
    return load


CALIB = {"credit_xgb": _x(MODELS / "credit_german.npz"), "cancer_linear_gemm": _x(DATA / "cancer_linear_calib.npz"),
         "text_encoder": _text, "text_embedder": _text}
OPTIONS = {"text_encoder": "wide", "text_embedder": "wide"}  # as their tests and examples convert them


def main(argv=None) -> int:
    from mrt.pipeline import convert
    out = Path((argv or sys.argv[1:])[0])
    out.mkdir(parents=True, exist_ok=True)
    have = {p.stem for p in MODELS.glob("*.cvm")}
    for onnx in sorted(MODELS.glob("*.onnx")):
        name = onnx.stem
        if name in have:
            continue
        if name in SKIP:
            print(f"skip {name}: {SKIP[name]}")
            continue
        calib = CALIB.get(name, _x(DATA / f"{name}_calib.npz"))(name)
        options = {}
        if OPTIONS.get(name) == "wide":
            from mrt.onnx_import import import_onnx
            from mrt.passes import DEFAULT_PIPELINE, run_pipeline
            from mrt.text_precision import encoder_wide_tensors
            options["wide_tensors"] = encoder_wide_tensors(run_pipeline(import_onnx(str(onnx)), DEFAULT_PIPELINE))
        model = convert(str(onnx), calib, progress=False, **options)
        model.save(out / f"{name}.cvm")
        print(f"{name}: opset {model.graph.opset}, {len(model.graph.nodes)} nodes, gas {model.gas}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
