"""Bias correction chosen by measurement: quantize with and without it and keep the integer model
whose outputs are closer to the float model's on calibration samples.

Why measured rather than always on: correcting the mean shift that rounded weights add removes the
systematic part of the error that dominates deep ReLU networks (VGG-16 with random weights: 70% of
the logit error is a per-class offset shared by every image, from the rounded weights; onnxruntime
int8 has the same offset), but on a network whose activations are clipped by mse calibration the
correction can interact with the clipping error and make the output worse (the resnet_cifar
fixture: cosine 0.99981 -> 0.99912, on calibration data as on test data). The pipeline runs this for
the cvm target unless the caller set `bias_correction` (docs/fidelity.md has the measurements)."""
from __future__ import annotations

import gc

import numpy as np

import cvm
from cvm import limits
from mrt.float_exec import run_float

OUTPUT_VALUES = 16384  # output values the two integer models are compared on (numba backend): 17 samples of
# a 1000-class classifier, every calibration sample of a one-value forecaster (16 of the sunspots LSTM's chose wrong)
MIN_SAMPLES = 16
CHUNK = 4  # samples per float and integer run: the comparison's memory stays that of a few samples (ResNet-50
# at 17 samples at once: peak RSS 1.2 -> 2.0 GB)


def output_error(model: cvm.Model, data: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """||dequantized integer outputs - float outputs|| / ||float outputs||, over every graph output."""
    ints = {spec.name: model.quantize_input(data[f], spec.name) for f, spec in zip(data, model.inputs)}
    n = len(next(iter(ints.values())))
    step = max(1, min(CHUNK, limits.of(model.graph.opset).run_bytes // max(model.analysis.activation_bytes, 1)))
    parts = []
    for i in range(0, n, step):
        chunk = {k: v[i:i + step] for k, v in ints.items()}
        y = model.run(chunk if len(chunk) > 1 else next(iter(chunk.values())), backend="numba")
        parts.append(y if isinstance(y, dict) else {model.outputs[0].name: y})
    got = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    num = den = 0.0
    for spec, f in zip(model.outputs, want.values()):
        y = model.dequantize_output(got[spec.name], spec.name).reshape(f.shape)
        num += float(np.sum((y - f) ** 2))
        den += float(np.sum(f.astype(np.float64) ** 2))
    return float(np.sqrt(num / max(den, 1e-30)))


def reference(graph, data: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The first calibration samples (OUTPUT_VALUES outputs, at least MIN_SAMPLES) and the float model's
    outputs on them: what candidate integer models are compared against (here and in mrt.width_choice)."""
    per_sample = sum(int(np.prod(graph.shapes[o])) for o in graph.outputs) or 1
    head = {k: v[:max(MIN_SAMPLES, -(-OUTPUT_VALUES // per_sample))] for k, v in data.items()}
    n = len(next(iter(head.values())))
    runs = [run_float(graph, {k: v[i:i + CHUNK] for k, v in head.items()}) for i in range(0, n, CHUNK)]
    return head, {k: np.concatenate([r[k] for r in runs]) for k in runs[0]}


def choose(graph, data: dict[str, np.ndarray], emit_with, ref: tuple[dict, dict] | None = None
           ) -> tuple[bool, tuple, dict[bool, float]]:
    """emit_with(bias_correction) -> (integer graph, metadata). Returns the choice, its emitted graph
    and the output error of both candidates on the first calibration samples (`ref`: reference()'s)."""
    head, want = ref or reference(graph, data)
    errors = {True: output_error(cvm.Model(*emit_with(True)), head, want)}  # one integer graph held at a time
    gc.collect()  # (VGG-16: 138M weights, ~1.1 GB each as emitted; a model's runner is freed by the collector)
    plain = emit_with(False)
    errors[False] = output_error(cvm.Model(*plain), head, want)
    best = errors[True] < errors[False]
    if best:
        plain = None
        gc.collect()
        return best, emit_with(True), errors
    return best, plain, errors
