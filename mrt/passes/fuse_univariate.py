"""Univariate fusion: any chain of element-wise ops computed from one tensor (with scalar constants)
becomes one `univariate` node, which the quantizer turns into one lookup table over that tensor's
proven integer range (the table-lookup fusion of Concrete ML). SiLU (x * sigmoid(x)), HardSwish
(x * relu6(x + 3) / 6), Mish, GELU in its Erf or tanh form, and the next activation nobody listed
need no rule of their own, and a table is exact for whatever the chain computes at each input value.

A chain is fused when a table is the only way (an op with no rule, or an op reading the tensor twice,
like x * sigmoid(x)) or saves work (two or more table ops in a row). A lone relu, clip, sigmoid or a
multiplication by a constant keeps its own rule, which costs less than a table.
"""
from __future__ import annotations

from mrt.float_ops.unary import NONLINEAR
from mrt.graph import Node
from mrt.passes.rewrite import rebuild

ARITHMETIC = frozenset({"add", "sub", "mul", "div", "neg", "minimum", "maximum", "pow", "where", "greater", "less",
                        "greater_equal", "less_equal", "equal"})
TABLE_OPS = frozenset({"relu", "clip", "leaky_relu", "hard_sigmoid", "sigmoid", "tanh"})
FUSIBLE = ARITHMETIC | TABLE_OPS | NONLINEAR


def _scalar(graph, name):
    return graph.is_constant(name) and graph.initializers[name].size == 1


def _roots(graph) -> dict[str, str]:
    """tensor -> the one non-constant tensor it is computed from through fusible ops alone."""
    root: dict[str, str] = {}
    for node in graph.nodes:
        if node.op not in FUSIBLE:
            continue
        if any(graph.is_constant(i) and not _scalar(graph, i) for i in node.inputs):
            continue
        variables = {root.get(i, i) for i in node.inputs if not graph.is_constant(i)}
        if len(variables) == 1:
            root[node.outputs[0]] = variables.pop()
    return root


def _cone(graph, root, exit_):
    """The nodes computing `exit_` from root[exit_], in graph order (sorted by Graph.position: picking the cone
    out of all the nodes per exit made the pass quadratic)."""
    r, seen, todo = root[exit_], set(), [exit_]
    while todo:
        t = todo.pop()
        if t in seen or t == r or root.get(t) != r:
            continue
        seen.add(t)
        todo.extend(graph.producer(t).inputs)
    return [graph.producer(t) for t in sorted(seen, key=graph.position)]


def _square(graph, node) -> bool:
    """Whether `node` is x * x or x ^ 2."""
    if node.op == "mul":
        return len(node.inputs) == 2 and node.inputs[0] == node.inputs[1]
    return node.op == "pow" and _scalar(graph, node.inputs[1]) and float(graph.initializers[node.inputs[1]].reshape(())) == 2


def _worth_a_table(graph, cone) -> bool:
    if any(n.op in NONLINEAR for n in cone):
        return True
    if any(sum(not graph.is_constant(i) for i in n.inputs) > 1 for n in cone):
        return True
    return sum(n.op in TABLE_OPS for n in cone) > 1


def _program(graph, cone, r):
    """The cone as univariate steps (op, args, attrs): "x" for the root, step indices, float scalars."""
    index = {n.outputs[0]: k for k, n in enumerate(cone)}
    steps = []
    for n in cone:
        args = tuple("x" if i == r else index[i] if i in index else float(graph.initializers[i].reshape(()))
                     for i in n.inputs)
        steps.append((n.op, args, tuple(sorted(n.attrs.items()))))
    return tuple(steps)


def fuse_univariate(graph):
    root = _roots(graph)
    exits = [t for t in root if t in graph.outputs or any(root.get(c.outputs[0]) != root[t] for c in graph.consumers(t))]
    fused = {}
    for e in exits:
        cone = _cone(graph, root, e)
        if len(cone) == 1 and _square(graph, cone[0]):  # x * x exact in integers (16 bits of 8), where a table
            fused[e] = Node("mul", (root[e], root[e]), (e,), {}, name=cone[0].name)  # rounds it to 8 (a variance)
        elif _worth_a_table(graph, cone):
            fused[e] = Node("univariate", (root[e],), (e,), {"program": _program(graph, cone, root[e])},
                            name=cone[-1].name)
    if not fused:
        return graph
    nodes = [fused.get(n.outputs[0], n) for n in graph.nodes]
    return rebuild(graph, _live(nodes, graph.outputs), graph.initializers)


def _live(nodes, outputs):
    """The nodes whose results something still reads (the fused chains' inner nodes are dropped)."""
    needed, kept = set(outputs), []
    for n in reversed(nodes):
        if n.outputs[0] in needed:
            kept.append(n)
            needed.update(n.inputs)
    return kept[::-1]
