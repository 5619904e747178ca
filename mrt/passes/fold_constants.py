"""fold_constants: evaluate what does not depend on the input, and merge per-channel constant
scaling and shifting into the conv/dense before it.

1. A node whose inputs are all constants is evaluated (with the float op table) into a constant.
2. mul/div by a constant after conv/dense, the constant scalar or per output channel:
   w' = w * c, b' = b * c (div: c -> 1/c).
3. add/sub of such a constant after conv/dense: b' = b + c (sub: b - c).
(2) and (3) apply only when the conv/dense output is read by that one node alone; they repeat
until nothing changes, so conv -> mul -> add chains fold completely.
"""
from collections import Counter

import numpy as np

from mrt.float_ops import OPS
from mrt.graph import Node
from mrt.passes.rewrite import Constants, channel_axis, channel_vector, rebuild, sole_consumer


def _affine_of(graph, node, values, producer):
    """(producer, per-channel vector) if `node` is a foldable mul/div/add/sub after a conv/dense, else
    None. `values`: the constants so far; `producer`: the node that now writes a tensor (folds move
    outputs), None for an input or a constant."""
    if node.op not in ("mul", "div", "add", "sub"):
        return None
    for pos, (x, c) in enumerate((node.inputs, node.inputs[::-1])):
        if pos == 1 and node.op in ("div", "sub"):
            break  # c / x and c - x are not affine in the conv/dense weights
        p = producer(x)
        if p is None or p.op not in ("conv", "dense") or c not in values or sole_consumer(graph, x) is not node:
            continue
        v = channel_vector(values[c], graph.full_shape(x), channel_axis(graph, p))
        if v is None or (node.op == "div" and not v.all()):
            continue
        return p, v
    return None


def _merged(graph, p, node, v, consts):
    """The conv/dense `p` with `node` (mul/div/add/sub by the per-channel vector `v`) folded into its
    weight and bias, writing node's output."""
    w = consts.values[p.inputs[1]].astype(np.float64)
    b = consts.values[p.inputs[2]].astype(np.float64) if len(p.inputs) > 2 else np.zeros(w.shape[0])
    per_row = (-1,) + (1,) * (w.ndim - 1)
    if node.op in ("mul", "div"):
        scale = v if node.op == "mul" else 1 / v
        w, b = w * scale.reshape(per_row), b * scale
    else:
        b = b + v if node.op == "add" else b - v
    inputs = (p.inputs[0], consts.add(f"{p.inputs[1]}/{node.op}", w),
              consts.add(f"{p.name or p.outputs[0]}/bias_{node.op}", b))
    return Node(p.op, inputs, node.outputs, p.attrs, p.name)


def fold_constants(graph):
    """One walk in graph order: each node folds into what the walk has made of the nodes before it,
    so a conv -> mul -> add chain folds completely and a node of constants reads constants folded
    earlier. (Re-building the graph after each fold, as this did, made the pass cubic in the nodes.)
    A name the folds leave unread is free again at once, as it was when each fold rebuilt the graph,
    so the fresh names (and the model's hash) are the ones the rebuilding pass gave."""
    consts = Constants(graph)
    reads = Counter(i for n in graph.nodes for i in n.inputs)
    kept, index = [], {}  # the nodes so far, and the position of each output's producer among them

    def unread(names):
        for name in names:
            reads[name] -= 1
            if reads[name] == 0:
                consts.release(name)

    for node in graph.nodes:
        if all(i in consts.values for i in node.inputs) and node.outputs[0] not in graph.outputs:
            value = OPS[node.op].run(*(consts.values[i] for i in node.inputs), **node.attrs)
            consts.values[node.outputs[0]] = np.asarray(value)
            unread(node.inputs)
            continue
        found = _affine_of(graph, node, consts.values, lambda x: kept[index[x]] if x in index else None)
        if found is None:
            index[node.outputs[0]] = len(kept)
            kept.append(node)
            continue
        p, v = found
        at = index.pop(p.outputs[0])
        kept[at] = _merged(graph, p, node, v, consts)
        index[node.outputs[0]] = at
        reads.update(kept[at].inputs[1:])
        unread((*node.inputs, *p.inputs[1:]))  # x (p's output, now unwritten too) and c, p's weight and bias
    if len(kept) == len(graph.nodes):
        return graph
    return rebuild(graph, kept, consts.values)
