"""remove_identity: drop identity and dropout nodes (both are the identity at inference).

Readers of the node's output read its input instead. When the output is a graph output, the
input is renamed to it instead, so graph output names survive; an identity from a graph input
(or constant) straight to a graph output is kept, as nothing else can carry that name.
"""
from mrt.passes.rewrite import rebuild


IDENTITY_OPS = ("identity", "dropout")


def _find(names, name):
    """The name `name` goes by now (a renamed name points to its new one; paths are shortened)."""
    root = name
    while root in names:
        root = names[root]
    while name in names and names[name] != root:
        names[name], name = root, names[name]
    return root


def remove_identity(graph):
    """The identities in graph order, each decided on the names the ones before it left (one rename
    applied everywhere per identity, as a table of renames: renaming every node per identity made the
    pass quadratic in the nodes)."""
    renamed, dropped = {}, set()
    inputs = {s.name for s in graph.inputs}
    for n in graph.nodes:
        if n.op not in IDENTITY_OPS:
            continue
        src, dst = _find(renamed, n.inputs[0]), _find(renamed, n.outputs[0])
        if dst not in graph.outputs:
            renamed[dst] = src
        elif src not in inputs and src not in graph.outputs and not graph.is_constant(src):
            renamed[src] = dst
        else:
            continue
        dropped.add(id(n))
    nodes = [_renamed(n, renamed) for n in graph.nodes if id(n) not in dropped]
    return rebuild(graph, nodes, graph.initializers)


def _renamed(node, renamed):
    if not any(t in renamed for t in node.inputs + node.outputs):
        return node
    return type(node)(node.op, tuple(_find(renamed, t) for t in node.inputs),
                      tuple(_find(renamed, t) for t in node.outputs), node.attrs, node.name)
