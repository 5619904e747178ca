"""equalize: cross-layer equalization (Nagel et al., "Data-Free Quantization Through Weight
Equalization and Bias Correction", ICCV 2019) of conv/dense pairs joined by a ReLU or by nothing.

ReLU is positively homogeneous, relu(x / s) = relu(x) / s for s > 0, so dividing output channel c
of the first layer (weights and bias) by s_c and multiplying input channel c of the second layer's
weights by s_c leaves the float function unchanged. With r1_c the largest |weight| of output
channel c of the first layer and r2_c that of input channel c of the second,
s_c = sqrt(r1_c / r2_c) makes both sqrt(r1_c * r2_c): channels whose activations span orders of
magnitude (depthwise stacks) come to similar ranges, so one per-tensor activation scale and the
second layer's per-output-channel weight scales lose less. Pairs are equalized in graph order,
repeated ROUNDS times so that chains converge.

Opt-in (`convert(equalize=True)`, `mrt convert --equalize`), because MRT's weights are already
quantized per output channel, which removes most of what equalization was made for: measured
(docs/fidelity.md) it lifts a conv pair whose channels span 10^4 from cosine 0.486 to 0.99984 and
mnist_cnn's agreement from 99.70% to 99.90%, but lowers resnet_cifar's cosine (0.99996 -> 0.99979).
"""
import numpy as np

from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild, sole_consumer

ROUNDS = 4
SCALE_LIMIT = 1e4  # s_c is clamped to [1/SCALE_LIMIT, SCALE_LIMIT]: a dead channel keeps a finite scale


def _producer_layer(graph, node):
    """A conv (any groups) or dense whose weight and bias are constants, or None."""
    if node is None or node.op not in ("conv", "dense") or not all(graph.is_constant(i) for i in node.inputs[1:]):
        return None
    return node


def _reads_channels(graph, q, channels):
    """q reads its input's channel c as input channel c of its weight: a conv with groups 1 or
    depthwise (one input channel per group), or a dense over the last axis."""
    if q.op == "conv":
        w = graph.initializers[q.inputs[1]]
        groups = q.attrs.get("groups", 1)
        return w.shape[1] * groups == channels and (groups == 1 or w.shape[1] == 1)
    return q.op == "dense" and graph.initializers[q.inputs[1]].shape[1] == channels


def pairs(graph):
    """(p, relu or None, q) with p's output read only by the ReLU (or by q), whose output only q reads."""
    found = []
    for p in graph.nodes:
        if _producer_layer(graph, p) is None:
            continue
        mid = sole_consumer(graph, p.outputs[0])
        act = mid if mid is not None and mid.op == "relu" else None
        q = sole_consumer(graph, act.outputs[0]) if act is not None else mid
        channels = graph.initializers[p.inputs[1]].shape[0]
        if _producer_layer(graph, q) is None or q.inputs[0] != (act or p).outputs[0]:
            continue
        if (p.op == "dense") != (q.op == "dense") or not _reads_channels(graph, q, channels):
            continue
        found.append((p, act, q))
    return found


def _input_channel_range(graph, q, w2):
    if q.op == "dense":
        return np.abs(w2).max(axis=0)
    if q.attrs.get("groups", 1) > 1:  # depthwise: input channel c is output channel c
        return np.abs(w2).reshape(w2.shape[0], -1).max(axis=1)
    return np.abs(np.moveaxis(w2, 1, 0)).reshape(w2.shape[1], -1).max(axis=1)


def _scale_input_channels(q, w2, s):
    if q.op == "dense":
        return w2 * s[None, :]
    if q.attrs.get("groups", 1) > 1:
        return w2 * s.reshape(-1, *[1] * (w2.ndim - 1))
    return w2 * s.reshape(1, -1, *[1] * (w2.ndim - 2))


def equalize(graph):
    for _ in range(ROUNDS):
        consts = Constants(graph)
        by_output = {n.outputs[0]: n for n in graph.nodes}
        for p, _act, q in pairs(graph):
            p, q = by_output[p.outputs[0]], by_output[q.outputs[0]]  # as already rescaled this round
            by_output[p.outputs[0]], by_output[q.outputs[0]] = _equalize_pair(graph, consts, p, q)
        graph = rebuild(graph, list(by_output.values()), consts.values)
    return graph


def _equalize_pair(graph, consts, p, q):
    w1 = consts.values[p.inputs[1]].astype(np.float64)
    w2 = consts.values[q.inputs[1]].astype(np.float64)
    r1, r2 = np.abs(w1).reshape(w1.shape[0], -1).max(axis=1), _input_channel_range(graph, q, w2)
    ok = (r1 > 0) & (r2 > 0)
    s = np.ones_like(r1)
    s[ok] = np.clip(np.sqrt(r1[ok] / r2[ok]), 1 / SCALE_LIMIT, SCALE_LIMIT)
    bias = consts.values[p.inputs[2]].astype(np.float64) / s if len(p.inputs) > 2 else None
    return (_with_constants(p, consts, w1 / s.reshape(-1, *[1] * (w1.ndim - 1)), bias),
            _with_constants(q, consts, _scale_input_channels(q, w2, s), None))


def _with_constants(node, consts, weight, bias):
    inputs = list(node.inputs)
    inputs[1] = consts.add(f"{node.inputs[1]}/eq", weight)
    if bias is not None:
        inputs[2] = consts.add(f"{node.inputs[2]}/eq", bias)
    return Node(node.op, tuple(inputs), node.outputs, node.attrs, node.name)
