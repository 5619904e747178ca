"""Inputsets for FHE compilation: calibration samples plus worst-case vectors from the proof.

concrete measures the range of every traced value on the inputset. The lowering pins each value to
its proven interval anyway (fhe_lower.PinBounds), so the inputset does not have to reach those
intervals for the circuit to be correct; it is built to reach them where that is cheap to do
exactly, and `coverage` reports how much of each proven interval it actually reached.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import InputError
from ..ir import Graph
from ..arith import bits_max
from ..verify import Analysis
from . import reference

MAX_ROWS = 128  # worst-case vectors per linear node that reads an input directly (each sign: 2x this)


def calibration_samples(graph: Graph, data, limit: int) -> list[dict[str, np.ndarray]]:
    """Integer calibration data (an array for a one-input model, or a dict) -> per-sample dicts."""
    if data is None:
        return []
    if not isinstance(data, Mapping):
        if len(graph.inputs) != 1:
            raise InputError(f"the model has {len(graph.inputs)} inputs: pass the inputset as a dict")
        data = {graph.inputs[0].name: data}
    arrays = {}
    for spec in graph.inputs:
        if spec.name not in data:
            raise InputError(f"inputset lacks input {spec.name!r}")
        a = np.asarray(data[spec.name])
        if a.dtype.kind not in "iu":
            raise InputError(f"inputset for {spec.name!r} must hold integers (quantize it with Model.quantize_input)")
        if a.shape[1:] != tuple(spec.shape):
            raise InputError(f"inputset for {spec.name!r} must have shape (n, {', '.join(map(str, spec.shape))}), "
                             f"got {a.shape}")
        m = bits_max(spec.bits)
        if a.size and (a.min() < -m or a.max() > m):
            raise InputError(f"inputset for {spec.name!r} leaves the {spec.bits}-bit range [{-m}, {m}]")
        arrays[spec.name] = a.astype(np.int64)
    n = min(len(a) for a in arrays.values())
    step = max(1, -(-n // limit))  # an even spread over the data when it has more than `limit` samples
    return [{k: a[i] for k, a in arrays.items()} for i in range(0, n, step)]


def _extreme_patterns(node, graph: Graph, shape: tuple, m: int) -> list[np.ndarray]:
    """Inputs x = sign(w_row) * m (and its negation) that drive a linear output to its bound."""
    w = graph.constants[node.inputs[1]].astype(np.int64)
    out = []
    if node.op == "dense":
        rows = w[np.argsort(-np.abs(w).sum(axis=1), kind="stable")[:MAX_ROWS]]
        for row in rows:
            x = np.broadcast_to(np.sign(row) * m, shape)
            out += [x, -x]
    elif node.op == "conv2d" and w.shape[1] == shape[0]:  # groups == 1: one window at the centre
        _, _, kh, kw = w.shape
        c, h, wd = shape
        i0, j0 = max(0, (h - kh) // 2), max(0, (wd - kw) // 2)
        for o in range(min(len(w), MAX_ROWS)):
            x = np.zeros(shape, np.int64)
            patch = np.sign(w[o])[:, : h - i0, : wd - j0] * m
            x[:, i0:i0 + patch.shape[1], j0:j0 + patch.shape[2]] = patch
            out += [x, -x]
    return out


def worst_case_samples(graph: Graph) -> list[dict[str, np.ndarray]]:
    """Every input at +max, -max and 0, and per linear node reading an input, per output row,
    the input that drives that row to the top and to the bottom of its proven interval."""
    full = {i.name: (tuple(i.shape), bits_max(i.bits)) for i in graph.inputs}
    samples = [{k: np.full(s, v * m, np.int64) for k, (s, m) in full.items()} for v in (1, -1, 0)]
    for node in graph.nodes:
        if node.op in ("dense", "conv2d") and node.inputs[0] in full:
            shape, m = full[node.inputs[0]]
            for x in _extreme_patterns(node, graph, shape, m):
                sample = {k: np.zeros(s, np.int64) for k, (s, _) in full.items()}
                sample[node.inputs[0]] = np.ascontiguousarray(x, np.int64)
                samples.append(sample)
    return samples


def value_ranges(graph: Graph, analysis: Analysis, samples: list[dict]) -> dict[str, tuple[int, int]]:
    """[min, max] every input and node output reaches on the samples (the reference interpreter,
    every value kept)."""
    inputs = {i.name: np.stack([s[i.name] for s in samples]).astype(np.int64) for i in graph.inputs}
    values = reference.run(graph, analysis, inputs, keep_all=True)
    return {k: (int(v.min()), int(v.max())) for k, v in values.items()}


def coverage(graph: Graph, analysis: Analysis, samples: list[dict]) -> dict[str, dict]:
    """Per tensor: the proven interval, the range the samples reached, and the reached share."""
    report = {}
    for name, (lo, hi) in value_ranges(graph, analysis, samples).items():
        t = analysis.tensors[name]
        share = (hi - lo) / (t.hi - t.lo) if t.hi > t.lo else 1.0
        report[name] = {"proven": (t.lo, t.hi), "reached": (lo, hi), "share": round(share, 4)}
    return report
