"""fold_constants: evaluate what does not depend on the input, and merge per-channel constant
scaling and shifting into the conv/dense before it.

1. A node whose inputs are all constants is evaluated (with the float op table) into a constant.
2. mul/div by a constant after conv/dense, the constant scalar or per output channel:
   w' = w * c, b' = b * c (div: c -> 1/c).
3. add/sub of such a constant after conv/dense: b' = b + c (sub: b - c).
(2) and (3) apply only when the conv/dense output is read by that one node alone; they repeat
until nothing changes, so conv -> mul -> add chains fold completely.
"""
import numpy as np

from mrt.float_ops import OPS
from mrt.graph import Node
from mrt.passes.rewrite import Constants, channel_axis, channel_vector, rebuild, sole_consumer


def _evaluate_one(graph):
    for node in graph.nodes:
        if all(graph.is_constant(i) for i in node.inputs) and node.outputs[0] not in graph.outputs:
            consts = Constants(graph)
            value = OPS[node.op].run(*(graph.initializers[i] for i in node.inputs), **node.attrs)
            consts.values[node.outputs[0]] = np.asarray(value)
            return rebuild(graph, [n for n in graph.nodes if n is not node], consts.values)
    return None


def _affine_of(graph, node):
    """(producer, per-channel vector, kind) if `node` is a foldable mul/div/add/sub after a
    conv/dense, else None."""
    if node.op not in ("mul", "div", "add", "sub"):
        return None
    for pos, (x, c) in enumerate((node.inputs, node.inputs[::-1])):
        if pos == 1 and node.op in ("div", "sub"):
            break  # c / x and c - x are not affine in the conv/dense weights
        p = graph.producer(x)
        if p is None or p.op not in ("conv", "dense") or not graph.is_constant(c) or \
                sole_consumer(graph, x) is not node:
            continue
        v = channel_vector(graph.initializers[c], graph.full_shape(x), channel_axis(graph, p))
        if v is None or (node.op == "div" and not v.all()):
            continue
        return p, v
    return None


def _merge_one(graph):
    for node in graph.nodes:
        found = _affine_of(graph, node)
        if found is None:
            continue
        p, v = found
        consts = Constants(graph)
        w = graph.initializers[p.inputs[1]].astype(np.float64)
        b = graph.initializers[p.inputs[2]].astype(np.float64) if len(p.inputs) > 2 else \
            np.zeros(w.shape[0])
        per_row = (-1,) + (1,) * (w.ndim - 1)
        if node.op in ("mul", "div"):
            scale = v if node.op == "mul" else 1 / v
            w, b = w * scale.reshape(per_row), b * scale
        else:
            b = b + v if node.op == "add" else b - v
        inputs = (p.inputs[0], consts.add(f"{p.inputs[1]}/{node.op}", w),
                  consts.add(f"{p.name or p.outputs[0]}/bias_{node.op}", b))
        merged = Node(p.op, inputs, node.outputs, p.attrs, p.name)
        nodes = [merged if n is p else n for n in graph.nodes if n is not node]
        return rebuild(graph, nodes, consts.values)
    return None


def fold_constants(graph):
    while True:
        changed = _evaluate_one(graph) or _merge_one(graph)
        if changed is None:
            return graph
        graph = changed
