"""Why the PP-OCR angle classifier's width is chosen for the whole model (docs/fidelity.md): the output
error on its calibration lines (relative L2 to float) when only some activations are 12-bit, each
widened tensor calibrated at 12 bits (pipeline.wide_thresholds): the worst k by injected error
(mrt.mixed's ranking), the tensors that are no MAC's input, the inputs of depthwise / other convs,
and all of them.

    .venv/bin/python scripts/models/ocr_fetch.py && .venv/bin/python scripts/models/ocr_data.py
    .venv/bin/python scripts/fidelity/width_subsets.py
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mrt import mixed, pipeline  # noqa: E402
from mrt.layer_report import layer_errors  # noqa: E402


def _consumer_kinds(graph, tensor: str) -> set[str]:
    kinds = set()
    for node in graph.consumers(tensor):
        if node.op == "conv" and node.inputs[0] == tensor:
            kinds.add("depthwise" if node.attrs.get("groups", 1) > 1 else "conv")
        elif node.op == "dense" and node.inputs[0] == tensor:
            kinds.add("dense")
        else:
            kinds.add("other")
    return kinds


def main() -> None:
    onnx_path = ROOT / ".cache" / "models" / "ppocr" / "cls.onnx"
    calib = np.load(ROOT / ".cache" / "models" / "ocr" / "cls_calib.npz")["x"]
    c = pipeline.prepare(str(onnx_path), calib, progress=False, bits=8)
    start = pipeline.finish(c)
    ranked = [n for n, _ in mixed.injected_error(layer_errors(start, calib, c.graph), c.graph)]
    acts = [i.name for i in c.graph.inputs] + [n.outputs[0] for n in c.graph.nodes if n.outputs[0] in c.thresholds]
    kinds = {t: _consumer_kinds(c.graph, t) for t in acts}
    subsets = {f"worst {k} by injected error": ranked[:k] for k in (0, 8, 16, 32, 64)}
    subsets.update({
        "no MAC's input": [t for t in acts if kinds[t] <= {"other"}],
        "depthwise conv inputs": [t for t in acts if "depthwise" in kinds[t]],
        "other conv inputs": [t for t in acts if "conv" in kinds[t]],
        "all but conv inputs": [t for t in acts if "conv" not in kinds[t]],
        "all": acts,
    })
    wide_thr = pipeline.wide_thresholds(c, acts)
    for name, tensors in subsets.items():
        thr = {**c.thresholds, **{t: wide_thr[t] for t in tensors if t in wide_thr}}
        model = pipeline.finish(replace(c, thresholds=thr), wide_tensors=tuple(tensors))
        error = layer_errors(model, calib, c.graph)[-1].rel_l2
        print(f"{name:28s} {len(tensors):4d} tensors at 12 bits: output relative L2 {error:.4f}", flush=True)


if __name__ == "__main__":
    main()
