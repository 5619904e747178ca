"""fuse_masked_softmax: softmax(x + u) over the last axis, with u computed from one tensor m by element-wise
ops with scalar constants (an additive attention mask such as BERT's (1 - mask) * finfo.min, a univariate
node or left as arithmetic) -> masked_softmax(x, m) with that computation as its program.

Quantized apart, the add would put the scores at the scale of a bias of -3.4e38 and lose them; fused,
the bias is a table over the mask's integer values at the scores' scale, clipped where it already
masks (mrt.quantize.rules_text.masked_softmax). Runs after fuse_univariate; the univariate node goes when
nothing else reads it. A bias with masking constants (a causal mask: 0 or minus infinity; a padded cache's mask,
padded with minus infinity) splits into a computed part m and a constant C holding every masking entry (through
adds and pads): softmax(x + bias) -> masked_softmax(x + m, C) with the empty program; the scores keep their own
scale and C becomes a constant penalty at it."""
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
        new = []
        act, const = _split(graph, u, new)
        if const is not None and float(np.min(const)) <= -MASK_FLOOR:
            bias = None if act is None else _reshaped_bias(graph, roots, act, new)
            if bias is not None and bias[0] != x:  # a computed mask besides the constant one
                return x, *bias, None, new, const.astype(np.float32)
            return x, None, (), act, new, const.astype(np.float32)
        bias = None if graph.is_constant(u) else _bias_program(graph, roots, u)
        if bias is not None and bias[0] != x:
            return x, *bias, None, [], None
    return None


def _reshaped_bias(graph, roots, u, new):
    """_bias_program of u, looking through reshapes (the mask reshaped the same way, in `new`)."""
    p = graph.producer(u)
    if p is None or p.op != "reshape":
        return _bias_program(graph, roots, u)
    inner = _reshaped_bias(graph, roots, p.inputs[0], new)
    if inner is None:
        return None
    m = fresh_name(f"{u}.mask", graph.tensor_names() | {o for n in new for o in n.outputs})
    new.append(Node("reshape", (inner[0],), (m,), dict(p.attrs), m))
    return m, inner[1]


def _split(graph, u, new):
    """(activation part, constant part) of a bias u = a + c, c a numpy constant holding every masking entry; the
    nodes computing the activation part go to `new`. Reads sums and pads with a masking value (a padded cache's
    mask); (u, None) where u has no constant part."""
    if graph.is_constant(u):
        return None, np.asarray(graph.initializers[u], np.float64)
    p = graph.producer(u)
    if p is not None and p.op == "add":
        (a, ca), (b, cb) = _split(graph, p.inputs[0], new), _split(graph, p.inputs[1], new)
        if ca is None and cb is None:
            return u, None
        return _sum(graph, a, b, new, u), ca if cb is None else cb if ca is None else ca + cb
    if p is not None and p.op == "pad" and p.attrs["value"] <= -MASK_FLOOR:
        a, ca = _split(graph, p.inputs[0], new)
        rank, pads = len(graph.full_shape(u)), p.attrs["pads"]
        inner = (1, *graph.full_shape(p.inputs[0])[1:])
        base = np.broadcast_to(np.zeros(inner) if ca is None else ca, inner)
        const = np.pad(base, [(pads[i], pads[rank + i]) for i in range(rank)], constant_values=p.attrs["value"])
        if a is not None:
            padded = fresh_name(f"{u}.unmasked", graph.tensor_names() | {o for n in new for o in n.outputs})
            new.append(Node("pad", (a,), (padded,), {"pads": pads, "value": 0.0}, padded))
            a = padded
        return a, const
    return u, None


def _sum(graph, a, b, new, hint):
    if a is None or b is None:
        return b if a is None else a
    out = fresh_name(f"{hint}.unmasked", graph.tensor_names() | {o for n in new for o in n.outputs})
    new.append(Node("add", (a, b), (out,), {}, out))
    return out


def fuse_masked_softmax(graph):
    nodes, changed, roots, inits = [], False, _roots(graph), dict(graph.initializers)
    for node in graph.nodes:
        found = _masked(graph, roots, node)
        if found is None:
            nodes.append(node)
            continue
        x, mask, program, also, extra, constant = found
        nodes += extra
        if constant is not None:  # softmax(x + (m + C)): masked_softmax(x + m, C), or (x, mask, C) with a program
            name = fresh_name(f"{node.name}.mask", graph.tensor_names() | set(inits))
            inits[name] = constant
            mask_inputs = (name,) if mask is None else (mask, name)
        else:
            mask_inputs = (mask,)
        if also is not None:
            summed = fresh_name(f"{node.name}.scores", graph.tensor_names() | {o for n in nodes for o in n.outputs})
            nodes.append(Node("add", (x, also), (summed,), {}, f"{node.name}.scores"))
            x = summed
        nodes.append(Node("masked_softmax", (x, *mask_inputs), node.outputs, {"program": program}, node.name))
        changed = True
    if not changed:
        return graph
    used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
    kept = [n for n in nodes if n.outputs[0] in used or n.op == "masked_softmax"]
    while len(kept) != len(nodes):  # drop the adds and univariates nothing reads any more
        nodes = kept
        used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
        kept = [n for n in nodes if n.outputs[0] in used]
    return rebuild(graph, [replace(n) for n in kept], inits)
