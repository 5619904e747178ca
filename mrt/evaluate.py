"""Accuracy of a converted model against its float original, per layer and end to end, and the
same figures for onnxruntime's own static int8 quantization on the same data."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import cvm
from mrt.float_exec import run_float
from mrt.layer_report import LayerError, layer_errors
from mrt.onnx_import import import_onnx

LAYER_SAMPLES = 256  # samples the per-layer comparison runs (the reference interpreter keeps every tensor)


@dataclass
class EvalResult:
    n: int
    float_accuracy: float | None
    int_accuracy: float | None
    agreement: float  # top-1 agreement with float
    cosine: float  # mean cosine similarity of the outputs to float's
    layer_errors: list[LayerError]  # every mapped tensor, in graph order (mrt.layer_report)


def client_transform(meta: dict, y: np.ndarray) -> np.ndarray:
    """What a client does with the dequantized outputs when the converter left it the final
    softmax or sigmoid (meta.output_transform): so they compare with the float model's outputs."""
    op = meta.get("output_transform")
    if op == "softmax":
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if op == "sigmoid":
        return 1.0 / (1.0 + np.exp(-y))
    return y


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over samples of the cosine similarity of the flattened outputs."""
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)
    return float(((a * b).sum(axis=1) / norms).mean())


def _top1(y: np.ndarray) -> np.ndarray:
    return y.reshape(len(y), -1).argmax(axis=1)


def evaluate(onnx_model, model: cvm.Model, x: np.ndarray, y: np.ndarray | None = None,
             layers: bool = True, backend: str = "numba") -> EvalResult:
    graph = import_onnx(onnx_model, {"x": x.shape[1:]})
    name = graph.inputs[0].name
    float_out = run_float(graph, {name: x})[graph.outputs[0]]
    xq = model.quantize_input(x)
    yq = model.run(xq, backend=backend)
    yq = yq if not isinstance(yq, dict) else next(iter(yq.values()))
    int_out = client_transform(model.meta, model.dequantize_output(yq))
    errors = []
    if layers and "tensor_map" in model.meta:
        from mrt.passes import DEFAULT_PIPELINE, run_pipeline
        errors = layer_errors(model, x[:LAYER_SAMPLES], run_pipeline(graph, DEFAULT_PIPELINE))
    f1, i1 = _top1(float_out), _top1(int_out)
    acc = (lambda p: float((p == y).mean())) if y is not None else (lambda p: None)
    return EvalResult(len(x), acc(f1), acc(i1), float((f1 == i1).mean()), cosine(int_out, float_out), errors)


def ort_int8_accuracy(onnx_path: str, calib: np.ndarray, x: np.ndarray, y: np.ndarray | None) -> dict:
    """onnxruntime quantize_static (QDQ, per channel, u8 activations / s8 weights) on the same data
    (the same quantization `cvm bench` measures)."""
    import onnxruntime as ort

    from cvm.bench import quantize_ort_int8

    ort.set_default_logger_severity(3)  # its quantizer warns about every unused initializer
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
            "agreement": float((f1 == q1).mean()), "cosine": cosine(qy, fy)}
