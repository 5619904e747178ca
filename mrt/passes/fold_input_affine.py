"""Fold an elementwise affine map with constants (add/sub/mul/div by a per-feature vector or a
scalar) into the dense layer that consumes it: dense(x*s + c) = dense'(x) with W' = W*s and
b' = b + W @ c. Tabular preprocessing (a StandardScaler) becomes part of the first layer, so the
quantizer sees raw features with per-feature input scales instead of a tensor whose features
span several orders of magnitude."""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from mrt.graph import fresh_name


def _feature_vector(value: np.ndarray, k: int) -> np.ndarray | None:
    """The constant as a length-k vector along the last axis, or None if it varies elsewhere."""
    if value.size == 1:
        return np.full(k, float(value.reshape(())), np.float64)
    if value.shape[-1] == k and value.size == k:
        return value.reshape(k).astype(np.float64)
    return None


def _folded(graph, node, inits, consumers):
    """(the affine producer of `node`'s input, the non-constant operand it read, weight, bias) when `node` is
    a dense that can absorb that producer, else None. `inits`: the constants as folded so far."""
    prod = graph.producer(node.inputs[0])
    if prod is None or prod.op not in ("add", "sub", "mul", "div") or consumers[node.inputs[0]] != 1:
        return None
    a, c = prod.inputs
    if prod.op in ("add", "mul") and a in inits:
        a, c = c, a
    if a in inits or c not in inits or node.inputs[0] in graph.outputs:
        return None
    w = inits[node.inputs[1]].astype(np.float64)
    b = inits[node.inputs[2]].astype(np.float64) if len(node.inputs) > 2 else np.zeros(w.shape[0])
    vec = _feature_vector(inits[c], w.shape[1])
    if vec is None or (prod.op == "div" and np.any(vec == 0)):
        return None
    if prod.op == "add":
        b = b + w @ vec
    elif prod.op == "sub":
        b = b - w @ vec
    elif prod.op == "mul":
        w = w * vec[None, :]
    else:
        w = w / vec[None, :]
    return prod, a, w, b


def fold_input_affine(graph):
    """Each dense absorbs the affine maps before it (a StandardScaler's sub, then div), one walk over the
    nodes: re-building the graph per fold made the pass quadratic in the nodes. The names a fold leaves
    unused are free again at once, as they were when each fold rebuilt the graph."""
    inits, taken = dict(graph.initializers), graph.tensor_names()
    consumers = Counter(i for n in graph.nodes for i in dict.fromkeys(n.inputs))
    replaced, dropped = {}, set()
    for node in graph.nodes:
        if node.op != "dense" or node.inputs[0] in inits:
            continue
        new = node
        while (found := _folded(graph, new, inits, consumers)) is not None:
            prod, a, w, b = found
            wn, bn = fresh_name(new.inputs[1] + ".folded", taken), fresh_name(f"{new.outputs[0]}.bias.folded", taken)
            inits[wn], inits[bn] = w.astype(np.float32), b.astype(np.float32)
            folded = dataclasses.replace(new, inputs=(a, wn, bn))
            consumers.update(set(folded.inputs))
            taken |= {wn, bn}
            taken -= {t for t in (*dict.fromkeys(prod.inputs), *dict.fromkeys(new.inputs)) if _unread(consumers, t)}
            new = folded
            dropped.add(id(prod))
        replaced[id(node)] = new
    if not dropped:
        return graph
    nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in dropped]
    used = {i for n in nodes for i in n.inputs}
    return graph.replace(nodes=nodes, initializers={k: v for k, v in inits.items() if k in used})


def _unread(consumers: Counter, name: str) -> bool:
    """One reader of `name` gone; True when none is left."""
    consumers[name] -= 1
    return consumers[name] == 0
