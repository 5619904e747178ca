"""Fold an elementwise affine map with constants (add/sub/mul/div by a per-feature vector or a
scalar) into the dense layer that consumes it: dense(x*s + c) = dense'(x) with W' = W*s and
b' = b + W @ c. Tabular preprocessing (a StandardScaler) becomes part of the first layer, so the
quantizer sees raw features with per-feature input scales instead of a tensor whose features
span several orders of magnitude."""
from __future__ import annotations

import dataclasses

import numpy as np


def _feature_vector(value: np.ndarray, k: int) -> np.ndarray | None:
    """The constant as a length-k vector along the last axis, or None if it varies elsewhere."""
    if value.size == 1:
        return np.full(k, float(value.reshape(())), np.float64)
    if value.shape[-1] == k and value.size == k:
        return value.reshape(k).astype(np.float64)
    return None


def _fold_once(graph):
    for node in graph.nodes:
        if node.op != "dense" or graph.is_constant(node.inputs[0]):
            continue
        prod = graph.producer(node.inputs[0])
        if prod is None or prod.op not in ("add", "sub", "mul", "div") or len(graph.consumers(node.inputs[0])) != 1:
            continue
        a, c = prod.inputs
        if prod.op in ("add", "mul") and graph.is_constant(a):
            a, c = c, a
        if graph.is_constant(a) or not graph.is_constant(c) or node.inputs[0] in graph.outputs:
            continue
        w = graph.initializers[node.inputs[1]].astype(np.float64)
        b = (graph.initializers[node.inputs[2]].astype(np.float64) if len(node.inputs) > 2
             else np.zeros(w.shape[0]))
        vec = _feature_vector(graph.initializers[c], w.shape[1])
        if vec is None or (prod.op == "div" and np.any(vec == 0)):
            continue
        if prod.op == "add":
            b = b + w @ vec
        elif prod.op == "sub":
            b = b - w @ vec
        elif prod.op == "mul":
            w = w * vec[None, :]
        else:
            w = w / vec[None, :]
        inits = dict(graph.initializers)
        wn, bn = graph.fresh_name(node.inputs[1] + ".folded"), graph.fresh_name(f"{node.outputs[0]}.bias.folded")
        inits[wn], inits[bn] = w.astype(np.float32), b.astype(np.float32)
        new = dataclasses.replace(node, inputs=(a, wn, bn))
        nodes = [new if n is node else n for n in graph.nodes if n is not prod]
        used = {i for n in nodes for i in n.inputs}
        return graph.replace(nodes=nodes, initializers={k: v for k, v in inits.items() if k in used})
    return None


def fold_input_affine(graph):
    while (folded := _fold_once(graph)) is not None:
        graph = folded
    return graph
