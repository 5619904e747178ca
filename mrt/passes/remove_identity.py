"""remove_identity: drop identity and dropout nodes (both are the identity at inference).

Readers of the node's output read its input instead. When the output is a graph output, the
input is renamed to it instead, so graph output names survive; an identity from a graph input
(or constant) straight to a graph output is kept, as nothing else can carry that name.
"""
from mrt.passes.rewrite import rebuild, rename


IDENTITY_OPS = ("identity", "dropout")


def remove_identity(graph):
    nodes = list(graph.nodes)
    inputs = {s.name for s in graph.inputs}
    for name in [n.outputs[0] for n in graph.nodes if n.op in IDENTITY_OPS]:
        n = next(m for m in nodes if name in m.outputs)  # as now: removing an earlier identity renames its input
        src, dst = n.inputs[0], n.outputs[0]
        if dst not in graph.outputs:
            nodes = rename([m for m in nodes if m is not n], dst, src)
        elif src not in inputs and src not in graph.outputs and not graph.is_constant(src):
            nodes = rename([m for m in nodes if m is not n], src, dst)
    return rebuild(graph, nodes, graph.initializers)
