"""Accuracy of a converted model against its float original, per layer and end to end, and the
same figures for onnxruntime's own static int8 quantization on the same data."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from dataclasses import dataclass

import numpy as np

import cvm
from cvm.interp import reference
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx


@dataclass
class EvalResult:
    n: int
    float_accuracy: float | None
    int_accuracy: float | None
    agreement: float
    layer_errors: list[tuple[str, float]]  # (float tensor, relative L2 error), worst first


def _top1(y: np.ndarray) -> np.ndarray:
    return y.reshape(len(y), -1).argmax(axis=1)


def evaluate(onnx_model, model: cvm.Model, x: np.ndarray, y: np.ndarray | None = None,
             layers: bool = True, backend: str = "numba") -> EvalResult:
    graph = import_onnx(onnx_model)
    name = graph.inputs[0].name
    float_out = run_float(graph, {name: x})[graph.outputs[0]]
    xq = model.quantize_input(x)
    yq = model.run(xq, backend=backend)
    yq = yq if not isinstance(yq, dict) else next(iter(yq.values()))
    int_out = model.dequantize_output(yq)
    errors = []
    if layers and "tensor_map" in model.meta:
        errors = layer_errors(model, x[:256])
    f1, i1 = _top1(float_out), _top1(int_out)
    acc = (lambda p: float((p == y).mean())) if y is not None else (lambda p: None)
    return EvalResult(len(x), acc(f1), acc(i1), float((f1 == i1).mean()), errors)


def layer_errors(model: cvm.Model, x: np.ndarray, graph=None) -> list[tuple[str, float]]:
    """Relative L2 error of every mapped tensor: dequantized integer vs float."""
    from mrt.passes import DEFAULT_PIPELINE, run_pipeline
    tmap = model.meta["tensor_map"]
    src = model.meta.get("provenance", {}).get("source")
    if graph is None:
        if not src or not os.path.exists(src):
            return []
        graph = run_pipeline(import_onnx(src), DEFAULT_PIPELINE)
    _, fvals = run_float(graph, {graph.inputs[0].name: x}, capture=True)
    ivals = reference.run(model.graph, model.analysis, {model.inputs[0].name: model.quantize_input(x)}, keep_all=True)
    out = []
    for fname, (iname, scale, axis) in tmap.items():
        if fname not in fvals or iname not in ivals:
            continue
        q = ivals[iname].astype(np.float64)
        s = np.asarray(scale, np.float64)
        if s.size > 1:
            shape = [1] * q.ndim
            shape[axis + 1] = -1
            s = s.reshape(shape)
        f = fvals[fname].astype(np.float64)
        if f.shape != q.shape:
            continue
        out.append((fname, float(np.linalg.norm(q * s - f) / max(np.linalg.norm(f), 1e-12))))
    return sorted(out, key=lambda e: -e[1])


def ort_int8_accuracy(onnx_path: str, calib: np.ndarray, x: np.ndarray, y: np.ndarray | None) -> dict:
    """onnxruntime quantize_static (QDQ, per channel, u8 activations / s8 weights) on the same data
    (the same quantization `cvm bench` measures)."""
    import onnxruntime as ort

    from cvm.bench import quantize_ort_int8

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    in_name = sess.get_inputs()[0].name
    # the scores: the first float output (an sklearn classifier's first output is its int64 label)
    out_name = next(o.name for o in sess.get_outputs() if o.type == "tensor(float)")
    with tempfile.TemporaryDirectory() as d:
        out = quantize_ort_int8(Path(onnx_path), calib, Path(d), input_name=in_name)
        qsess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        fy = sess.run([out_name], {in_name: x})[0]
        qy = qsess.run([out_name], {in_name: x})[0]
    f1, q1 = _top1(fy), _top1(qy)
    return {"float_accuracy": None if y is None else float((f1 == y).mean()),
            "int_accuracy": None if y is None else float((q1 == y).mean()),
            "agreement": float((f1 == q1).mean())}
