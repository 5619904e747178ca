"""convert(onnx, calibration data, target) -> cvm.Model: the named list of stages, in order.

    import -> rewrite passes -> (drop the final softmax) -> calibrate -> quantize (+ MAC splits) -> verify
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from eth_hash.auto import keccak

import cvm
from mrt.calibrate import calibrate, data_hash
from mrt.errors import BadInput
from mrt.onnx_import import import_onnx
from mrt.quantize import config_for, quantize

STAGES = ("import", "passes", "output_transform", "calibrate", "quantize")


def load_data(data, graph) -> dict[str, np.ndarray]:
    """Calibration data as {input name: float32 array}: an array, a dict, or an .npz path
    (holding `x`, or arrays named after the graph inputs)."""
    if isinstance(data, (str, os.PathLike)):
        with np.load(data, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    if isinstance(data, np.ndarray):
        data = {graph.inputs[0].name: data}
    names = [s.name for s in graph.inputs]
    if all(n in data for n in names):
        arrays = {n: data[n] for n in names}
    elif len(names) == 1 and "x" in data:
        arrays = {names[0]: data["x"]}
    else:
        raise BadInput(f"calibration data must hold 'x' or arrays named {names}; it has {sorted(data)}")
    return {n: _calibration_array(n, a) for n, a in arrays.items()}


def _calibration_array(name: str, a) -> np.ndarray:
    """Calibration sets the ranges every scale comes from: NaN or infinity would make them NaN, and
    one sample repeated (e.g. all zeros) gives ranges that fit no real input."""
    try:
        a = np.asarray(a)
    except ValueError as e:
        raise BadInput(f"calibration data {name!r} is not a rectangular array ({e})") from None
    if a.dtype.kind not in "iuf" or a.ndim == 0 or len(a) == 0:
        raise BadInput(f"calibration data {name!r} must be a non-empty numeric array with a batch axis, "
                       f"got dtype {a.dtype} shape {a.shape}")
    a = a.astype(np.float32, copy=False)
    bad = int(np.count_nonzero(~np.isfinite(a)))
    if bad:
        raise BadInput(f"calibration data {name!r} holds {bad} NaN or infinite values")
    if not a.any():
        raise BadInput(f"calibration data {name!r} is all zeros: calibration needs real samples")
    if len(a) > 1 and (a == a[:1]).all():
        raise BadInput(f"calibration data {name!r} is {len(a)} copies of one sample: calibration needs real samples")
    return a


OUTPUT_TRANSFORMS = ("softmax", "sigmoid")


def strip_output_softmax(graph):
    """Drop a softmax or sigmoid that produces a graph output: both are monotone, so the top-1
    class is unchanged, and the client applies them to the dequantized logits if it wants them."""
    from mrt.graph import Graph
    outputs, dropped = list(graph.outputs), []
    nodes = list(graph.nodes)
    for node in list(nodes):
        if node.op in OUTPUT_TRANSFORMS and node.outputs[0] in outputs and len(graph.consumers(node.outputs[0])) == 0:
            outputs[outputs.index(node.outputs[0])] = node.inputs[0]
            nodes.remove(node)
            dropped.append(node.op)
    if not dropped:
        return graph, []
    return Graph(graph.inputs, outputs, graph.initializers, nodes, graph.name), dropped


def convert(model, calibration, *, target: str = "cvm", bits: int | None = None,
            calibration_method: str = "absmax", softmax: str = "client", batch_size: int = 64,
            progress: bool = True, per_feature_inputs: bool = True, **overrides) -> cvm.Model:
    """Convert an ONNX model (path, bytes or onnx.ModelProto) into a verified integer cvm.Model."""
    from mrt.passes import DEFAULT_PIPELINE, run_pipeline

    source = model
    if isinstance(model, (str, os.PathLike)):
        model_bytes = Path(model).read_bytes()
    elif isinstance(model, bytes):
        model_bytes = model
    else:
        model_bytes = model.SerializeToString()
    graph = import_onnx(model if not isinstance(model, bytes) else _onnx_from_bytes(model))
    graph = run_pipeline(graph, DEFAULT_PIPELINE)
    dropped = []
    if softmax == "client":
        graph, dropped = strip_output_softmax(graph)
    data = load_data(calibration, graph)
    thresholds = calibrate(graph, data, method=calibration_method, batch_size=batch_size, progress=progress)
    config = config_for(target, bits=bits, softmax=softmax, **overrides)
    meta = {
        "calibration_hash": data_hash(data),
        "calibration": {"method": calibration_method, "samples": int(len(next(iter(data.values()))))},
        "provenance": {"tool": "mrt", "source": str(source) if isinstance(source, (str, os.PathLike)) else "<onnx>",
                       "onnx_keccak256": "0x" + keccak(model_bytes).hex(), "target": target},
    }
    if dropped:
        meta["output_transform"] = dropped[0] if len(set(dropped)) == 1 else dropped
    features = {s.name: np.abs(data[s.name]).max(axis=0) for s in graph.inputs
                if len(s.shape) == 1 and per_feature_inputs}
    return quantize(graph, thresholds, config, meta, feature_thresholds=features)


def _onnx_from_bytes(data: bytes):
    import onnx
    return onnx.load_from_string(data)
