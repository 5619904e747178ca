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
from mrt.progress import bar, ticker

LAYER_SAMPLES = 256  # samples the per-layer comparison runs (the reference interpreter keeps every tensor)
LAYER_BYTES = 1 << 30  # ... and at most this many bytes of integer activations (MiniLM: 28 sentences)


@dataclass
class EvalResult:
    n: int
    float_accuracy: float | None
    int_accuracy: float | None
    agreement: float  # top-1 agreement with float
    cosine: float  # mean cosine similarity of the outputs to float's
    layer_errors: list[LayerError]  # every mapped tensor, in graph order (mrt.layer_report)
    rel_l2: float = 0.0  # ||int - float|| / ||float|| over all outputs
    float_mae: float | None = None  # a regression's (one value per sample) mean |output - label|
    int_mae: float | None = None

    @property
    def regression(self) -> bool:
        return self.int_mae is not None


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


def numeric_labels(y) -> np.ndarray | None:
    """Labels that top-1 accuracy can use (class numbers, or a regression's values); None for none or for
    strings (the PP-OCR recogniser's texts: comparing them needs the model's own decoder, see mrt eval)."""
    if y is None:
        return None
    y = np.asarray(y)
    return y if y.dtype.kind in "biuf" else None


def rel_l2(out: np.ndarray, want: np.ndarray) -> float:
    want = want.astype(np.float64)
    return float(np.linalg.norm(out.reshape(want.shape) - want) / max(np.linalg.norm(want), 1e-300))


def mae(out: np.ndarray, y: np.ndarray | None) -> float | None:
    """Mean |output - label| of a regression (one output value per sample, numeric labels); None otherwise: top-1
    agreement means nothing for a forecast, its error against the labels does."""
    if y is None or out.reshape(len(out), -1).shape[1] != 1 or not np.issubdtype(np.asarray(y).dtype, np.floating):
        return None
    return float(np.abs(out.reshape(len(out)) - np.asarray(y, np.float64).reshape(len(out))).mean())


def evaluate(onnx_model, model: cvm.Model, x: np.ndarray | dict, y: np.ndarray | None = None,
             layers: bool = True, backend: str = "numba", progress: bool = True) -> EvalResult:
    """x: one array (a one-input model) or {input name: array} (several; integer arrays such as token
    ids are passed to the float model as they are). Labels that are not numbers give no accuracy
    (numeric_labels). progress: each step's bar or ticker on the terminal (mrt.progress)."""
    xs = x if isinstance(x, dict) else None
    graph = import_onnx(onnx_model, {k: v.shape[1:] for k, v in xs.items()} if xs else {"x": x.shape[1:]})
    xs = xs or {graph.inputs[0].name: x}
    float_out = _float_outputs(graph, xs, progress)
    xq = {spec.name: model.quantize_input(xs[f.name], spec.name) for f, spec in zip(graph.inputs, model.inputs)}
    int_out = client_transform(model.meta, model.dequantize_output(run_in_chunks(model, xq, backend, progress)))
    errors = []
    if layers and "tensor_map" in model.meta:
        from mrt.passes import DEFAULT_PIPELINE, run_pipeline
        n = max(1, min(LAYER_SAMPLES, LAYER_BYTES // max(1, model.analysis.activation_bytes)))
        with ticker(f"eval: per-layer comparison on {n} samples (reference interpreter)", progress):
            errors = layer_errors(model, {k: v[:n] for k, v in xs.items()}, run_pipeline(graph, DEFAULT_PIPELINE))
    f1, i1 = _top1(float_out), _top1(int_out)
    y = numeric_labels(y)
    acc = (lambda p: float((p == y).mean())) if y is not None else (lambda p: None)
    return EvalResult(len(float_out), acc(f1), acc(i1), float((f1 == i1).mean()), cosine(int_out, float_out), errors,
                      rel_l2(int_out, float_out), mae(float_out, y), mae(int_out, y))


def _float_outputs(graph, xs: dict, progress: bool) -> np.ndarray:
    """The float model's first output over all of xs, its nodes counted on the terminal as they run."""
    with bar(total=len(graph.inputs) + len(graph.nodes), desc="eval: float model", unit="node", enabled=progress) as b:
        return run_float(graph, xs, observe=lambda name, v: b.update(1))[graph.outputs[0]]


def run_in_chunks(model: cvm.Model, xq: dict, backend: str, progress: bool = False) -> np.ndarray:
    """The first output of model.run over the whole batch, in runs the format's run_bytes limit admits."""
    from cvm import limits
    per_run = max(1, limits.of(model.graph.opset).run_bytes // max(1, model.analysis.activation_bytes))
    total = len(next(iter(xq.values())))
    parts = []
    with ticker(f"eval: integer model ({backend})", progress), \
            bar(total=total, desc="samples", unit="sample", enabled=progress) as b:
        for i in range(0, total, per_run):
            y = model.run({k: v[i:i + per_run] for k, v in xq.items()}, backend=backend)
            parts.append(y if not isinstance(y, dict) else next(iter(y.values())))
            b.update(len(parts[-1]))
    return np.concatenate(parts)


def ort_int8_accuracy(onnx_path: str, calib: np.ndarray | dict, x: np.ndarray | dict, y: np.ndarray | None) -> dict:
    """onnxruntime quantize_static (QDQ, per channel, u8 activations / s8 weights) on the same data
    (the same quantization `cvm bench` measures). calib and x: one array or {input name: array}."""
    import onnxruntime as ort

    from cvm.tools.bench import quantize_ort_int8

    ort.set_default_logger_severity(3)  # its quantizer warns about every unused initializer
    y = numeric_labels(y)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    feeds = _ort_feeds(sess, x)
    # the scores: the first float output (an sklearn classifier's first output is its int64 label)
    out_name = next(o.name for o in sess.get_outputs() if o.type == "tensor(float)")
    with tempfile.TemporaryDirectory() as d:
        out = quantize_ort_int8(Path(onnx_path), _ort_feeds(sess, calib), Path(d))
        qsess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        fy = sess.run([out_name], feeds)[0]
        qy = qsess.run([out_name], feeds)[0]
    f1, q1 = _top1(fy), _top1(qy)
    return {"float_accuracy": None if y is None else float((f1 == y).mean()),
            "int_accuracy": None if y is None else float((q1 == y).mean()),
            "agreement": float((f1 == q1).mean()), "cosine": cosine(qy, fy), "rel_l2": rel_l2(qy, fy),
            "mae": mae(qy, y)}


def _ort_feeds(sess, x: np.ndarray | dict) -> dict:
    """{input name: array in the dtype the ONNX input declares} (token ids and masks are int64)."""
    named = x if isinstance(x, dict) else {sess.get_inputs()[0].name: x}
    dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    return {i.name: np.asarray(named[i.name], dtypes.get(i.type, np.float32)) for i in sess.get_inputs()}
