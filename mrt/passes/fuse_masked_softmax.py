"""fuse_masked_softmax: softmax(x + u) over the last axis, with u computed from one tensor m by element-wise
ops with scalar constants (an additive attention mask such as BERT's (1 - mask) * finfo.min, a univariate
node or left as arithmetic) -> masked_softmax(x, m) with that computation as its program.

Quantized apart, the add would put the scores at the scale of a bias of -3.4e38 and lose them; fused,
the bias is a table over the mask's integer values at the scores' scale, clipped where it already
masks (mrt.quantize.rules_text.masked_softmax). Runs after fuse_univariate; the univariate node goes when
nothing else reads it. A constant bias with masking entries (a causal mask: 0 or minus infinity), alone or added
to a computed bias m, is a constant mask: softmax((x + m) + C) -> masked_softmax(x + m, C) with the empty
program; the scores keep their own scale and C becomes a constant penalty at it."""
from dataclasses import replace

import numpy as np

from mrt.graph import Node, fresh_name
from mrt.passes.fuse_univariate import _cone, _program, _roots
from mrt.passes.rewrite import rebuild, sole_consumer


MASK_FLOOR = 2.0 ** 64  # a constant bias entry at or below -MASK_FLOOR masks its position


def _bias_program(graph, roots, u):
    """(mask, program) when `u` is computed from one tensor by element-wise ops with scalar constants (a
    univariate node, or a chain fuse_univariate left as arithmetic: BERT's (1 - m) * -3.4e38)."""
    producer = graph.producer(u)
    if producer is not None and producer.op == "univariate":
        return producer.inputs[0], producer.attrs["program"]
    if u in roots:
        return roots[u], _program(graph, _cone(graph, roots, u), roots[u])
    return None


def _masked(graph, roots, node):
    """(scores, mask, program) when `node` is a softmax over the last axis of x + bias(mask)."""
    if node.op != "softmax":
        return None
    rank = len(graph.full_shape(node.inputs[0]))
    add = graph.producer(node.inputs[0])
    if node.attrs["axis"] not in (-1, rank - 1) or add is None or add.op != "add":
        return None
    if sole_consumer(graph, add.outputs[0]) is not node:
        return None
    for x, u in (add.inputs, add.inputs[::-1]):
        if graph.is_constant(x) or graph.full_shape(x) != graph.full_shape(add.outputs[0]):
            continue
        if _constant_mask(graph, u):
            return x, u, (), None
        inner = graph.producer(u)
        if inner is not None and inner.op == "add":  # (the bias may have other readers: a row-all-masked test)
            for m, c in (inner.inputs, inner.inputs[::-1]):
                if _constant_mask(graph, c) and not graph.is_constant(m):
                    return x, c, (), m
        bias = None if graph.is_constant(u) else _bias_program(graph, roots, u)
        if bias is not None and bias[0] != x:
            return x, *bias, None
    return None


def _constant_mask(graph, name) -> bool:
    """Whether `name` is a constant bias that masks: some entry at or below -MASK_FLOOR (a causal mask's minus
    infinity, which the importer makes -2^100, or an exporter's float32 lowest)."""
    c = graph.initializers.get(name)
    return c is not None and c.size > 0 and float(np.min(c)) <= -MASK_FLOOR


def fuse_masked_softmax(graph):
    nodes, changed, roots = [], False, _roots(graph)
    for node in graph.nodes:
        found = _masked(graph, roots, node)
        if found is None:
            nodes.append(node)
            continue
        x, mask, program, also = found
        if also is not None:  # softmax(x + (m + C)): the scores x + m, masked by the constant C
            summed = fresh_name(f"{node.name}.scores", graph.tensor_names())
            nodes.append(Node("add", (x, also), (summed,), {}, f"{node.name}.scores"))
            x = summed
        nodes.append(Node("masked_softmax", (x, mask), node.outputs, {"program": program}, node.name))
        changed = True
    if not changed:
        return graph
    used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
    kept = [n for n in nodes if n.outputs[0] in used or n.op == "masked_softmax"]
    while len(kept) != len(nodes):  # drop the adds and univariates nothing reads any more
        nodes = kept
        used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
        kept = [n for n in nodes if n.outputs[0] in used]
    return rebuild(graph, [replace(n) for n in kept], dict(graph.initializers))
