"""fold_batchnorm: merge inference-mode batch_norm into the conv/conv_transpose/dense before it, so the
quantizer sees one multiply-accumulate with adjusted weights instead of two affine maps.

y = (x - mean) / sqrt(var + eps) * scale + bias = x * k + t per channel, with
k = scale / sqrt(var + eps), t = bias - mean * k. After conv/dense (whose output is read only by
the batch_norm): w' = w * k (per output channel), b' = b * k + t. Anywhere else: mul by k, add t
(constants shaped (C, 1, ..., 1) to broadcast along the channel axis 1).
"""
import numpy as np

from mrt.graph import Node
from mrt.passes.rewrite import Constants, channel_axis, rebuild, sole_consumer


def _affine(graph, bn):
    scale, bias, mean, var = (graph.initializers[i].astype(np.float64) for i in bn.inputs[1:])
    k = scale / np.sqrt(var + bn.attrs["eps"])
    return k, bias - mean * k


def _foldable_producer(graph, bn):
    p = graph.producer(bn.inputs[0])
    if p is None or p.op not in ("conv", "conv_transpose", "dense") or sole_consumer(graph, bn.inputs[0]) is not bn:
        return None
    return p if channel_axis(graph, p) == 1 else None  # dense: only when channels are axis 1


def _scale_outputs(node, w, k):
    """The weight with output channel o scaled by k[o]: conv/dense weights have the output channel first;
    a transposed conv's are (C_in, C_out / groups, kh, kw), output channel g * C_out/groups + j."""
    if node.op != "conv_transpose":
        return w * k.reshape(-1, *[1] * (w.ndim - 1))
    g = node.attrs["groups"]
    split = w.reshape(g, w.shape[0] // g, *w.shape[1:])
    return (split * k.reshape(g, 1, w.shape[1], *[1] * (w.ndim - 2))).reshape(w.shape)


def fold_batchnorm(graph):
    """Every batch_norm folded or rewritten in one walk; each replaces its own slot (a list of nodes per
    original node, not list.index/remove on the node list: those compare nodes field by field, a scan
    per batch_norm)."""
    consts = Constants(graph)
    slots = {id(n): [n] for n in graph.nodes}
    for bn in graph.nodes:
        if bn.op != "batch_norm":
            continue
        k, t = _affine(graph, bn)
        p = _foldable_producer(graph, bn)
        if p is not None:
            w = graph.initializers[p.inputs[1]].astype(np.float64)
            b = graph.initializers[p.inputs[2]].astype(np.float64) if len(p.inputs) > 2 else 0.0
            w_name = consts.add(f"{p.inputs[1]}/bn", _scale_outputs(p, w, k))
            b_name = consts.add(f"{p.name or p.outputs[0]}/bias_bn", b * k + t)
            folded = Node(p.op, (p.inputs[0], w_name, b_name), bn.outputs, p.attrs, p.name)
            slots[id(p)], slots[id(bn)] = [folded], []
            continue
        rank = len(graph.full_shape(bn.inputs[0]))
        per_channel = (-1,) + (1,) * (rank - 2)
        scaled = consts.fresh(f"{bn.outputs[0]}/scaled")
        mul = Node("mul", (bn.inputs[0], consts.add(f"{bn.name}/k", k.reshape(per_channel))),
                   (scaled,), {}, f"{bn.name}/mul")
        add = Node("add", (scaled, consts.add(f"{bn.name}/t", t.reshape(per_channel))),
                   bn.outputs, {}, f"{bn.name}/add")
        slots[id(bn)] = [mul, add]
    return rebuild(graph, [m for n in graph.nodes for m in slots[id(n)]], consts.values)
