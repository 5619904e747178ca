"""Mutations of the nodes: attribute values and shapes, attribute keys, the op, the wiring, the node
list itself, and splicing in a node from another seed.

Each takes (graph object, meta holder, rng), mutates the graph in place and returns a short
description for the case's step list, or None when it does not apply to this graph. The nodes are
where the verifier's per-op rules live, so these carry most of the weight in `mutations.STRUCTURAL`.
"""
from __future__ import annotations

from .draws import OPS, odd_value, pick, some_int, some_node, tensor_names
from .seeds import Seed, copy_tree


def m_attr_value(g, meta, rng):
    """An attribute (or one element of a list attribute) set to a boundary value or moved by up to 2:
    the verifier's range checks at their edges."""
    n = some_node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = pick(rng, sorted(n[3]))
    v = n[3][k]
    if isinstance(v, list) and v:
        i = int(rng.integers(len(v)))
        v[i] = some_int(rng) if rng.random() < 0.7 else v[i] + int(rng.integers(-2, 3))
        return f"attr {n[2]}.{k}[{i}]={v[i]}"
    n[3][k] = some_int(rng) if rng.random() < 0.7 or not isinstance(v, int) else v + int(rng.integers(-2, 3))
    return f"attr {n[2]}.{k}={n[3][k]}"


def m_attr_nudge(g, meta, rng):
    """A small step from the attribute's value: more often still valid, so it reaches the backends."""
    n = some_node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = pick(rng, sorted(n[3]))
    v = n[3][k]
    step = lambda x: x if not isinstance(x, int) or isinstance(x, bool) else pick(  # noqa: E731
        rng, [x - 1, x + 1, x * 2, x // 2, -x, 0, 1, 2, x + int(rng.integers(-4, 5))])
    if isinstance(v, list) and v:
        i = int(rng.integers(len(v)))
        v[i] = step(v[i])
        return f"nudge {n[2]}.{k}[{i}]={v[i]}"[:120]
    n[3][k] = step(v)
    return f"nudge {n[2]}.{k}={n[3][k]!r}"[:120]


def m_attr_shape(g, meta, rng):
    """A list attribute lengthened, cut or collapsed to a scalar; a scalar one made a list or an odd
    value: the attribute arity and type checks."""
    n = some_node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = pick(rng, sorted(n[3]))
    v = n[3][k]
    r = rng.random()
    if isinstance(v, list) and r < 0.4:
        n[3][k] = v + [some_int(rng) for _ in range(int(rng.integers(1, 4)))]
    elif isinstance(v, list) and r < 0.7:
        n[3][k] = v[:int(rng.integers(len(v)))] if v else []
    elif isinstance(v, list):
        n[3][k] = v[0] if v else 0
    elif r < 0.5:
        n[3][k] = [v] * int(rng.integers(0, 4))
    else:
        n[3][k] = odd_value(rng)
    return f"attr shape {n[2]}.{k}={n[3][k]!r}"[:120]


def m_attr_keys(g, meta, rng):
    """An attribute deleted, or one added (a key some node uses, or one none does): required and
    unknown keys."""
    n = some_node(g, rng)
    if n is None:
        return None
    attrs = n[3]
    if attrs and rng.random() < 0.5:
        k = pick(rng, sorted(attrs))
        del attrs[k]
        return f"attr del {n[2]}.{k}"
    other = [k for m in g["nodes"] if isinstance(m, list) and len(m) == 4 and isinstance(m[3], dict) for k in m[3]]
    k = pick(rng, other + ["axis", "shift", "bogus", ""]) if other else "bogus"
    attrs[k] = some_int(rng) if rng.random() < 0.7 else [some_int(rng), some_int(rng)]
    return f"attr add {n[2]}.{k}"


def m_op(g, meta, rng):
    """The op replaced by another of the opset (its attributes and inputs now wrong for it) or by a
    name no opset has."""
    n = some_node(g, rng)
    if n is None:
        return None
    n[0] = pick(rng, OPS) if rng.random() < 0.9 else pick(rng, ["", "Conv", "nop", "dense ", 7])
    return f"op {n[2]}={n[0]}"


def m_rewire(g, meta, rng):
    """A node input pointed at another tensor (or a missing one), repeated, dropped or added: arity,
    dangling names, use before definition."""
    n = some_node(g, rng)
    if n is None or not isinstance(n[1], list):
        return None
    names = tensor_names(g)
    ins = n[1]
    r = rng.random()
    if ins and r < 0.5:
        ins[int(rng.integers(len(ins)))] = pick(rng, names) if rng.random() < 0.95 else "missing"
    elif ins and r < 0.7:
        ins.append(ins[int(rng.integers(len(ins)))])  # the same tensor twice
    elif ins and r < 0.85:
        del ins[int(rng.integers(len(ins)))]
    else:
        ins.insert(int(rng.integers(len(ins) + 1)), pick(rng, names))
    return f"inputs {n[2]}={ins}"[:120]


def m_node_list(g, meta, rng):
    """A node deleted, duplicated, cloned under a fresh name, swapped with another or renamed: the
    graph's order and naming rules."""
    nodes = g["nodes"]
    if not nodes:
        return None
    i = int(rng.integers(len(nodes)))
    r = rng.random()
    if r < 0.3:
        del nodes[i]
        return f"node del #{i}"
    if r < 0.55:
        nodes.insert(int(rng.integers(len(nodes) + 1)), copy_tree(nodes[i]))
        return f"node dup #{i}"
    if r < 0.75 and isinstance(nodes[i], list) and len(nodes[i]) == 4:  # duplicate under a new name
        new = copy_tree(nodes[i])
        new[2] = f"fz{i}"
        nodes.insert(i + 1, new)
        last = nodes[-1]
        if rng.random() < 0.5 and isinstance(last, list) and len(last) == 4 and isinstance(last[1], list):
            last[1].append(new[2])
        return f"node clone #{i}"
    if r < 0.9:
        j = int(rng.integers(len(nodes)))
        nodes[i], nodes[j] = nodes[j], nodes[i]
        return f"node swap #{i} #{j}"
    if isinstance(nodes[i], list) and len(nodes[i]) == 4:
        nodes[i][2] = pick(rng, tensor_names(g)) if rng.random() < 0.7 else pick(rng, ["", "a" * 200, "\x00"])
        return f"node rename #{i}"
    return None


def templates(seeds: list[Seed]) -> dict[str, list[tuple[list, dict]]]:
    """Every node of every seed with the constants it reads, by op: material for splicing."""
    out: dict[str, list] = {}
    for s in seeds:
        consts = {c[0]: c for c in s.graph["constants"]}
        for n in s.graph["nodes"]:
            out.setdefault(n[0], []).append((n, {i: consts[i] for i in n[1] if i in consts}))
    return out


def m_splice(g, meta, rng, library=None):
    """A node of some seed (with its constants) appended to this graph, reading this graph's tensors,
    and made an output: op combinations and shapes no seed has."""
    if not library:
        return None
    nodes = library[pick(rng, sorted(library))]  # an op first, so the ops of the big seeds do not crowd out the rest
    node, consts = nodes[int(rng.integers(len(nodes)))]
    node = copy_tree(node)
    k = len(g["nodes"])
    tensors = [i[0] for i in g["inputs"] if isinstance(i, list) and i and isinstance(i[0], str)]
    tensors += [n[2] for n in g["nodes"] if isinstance(n, list) and len(n) == 4 and isinstance(n[2], str)]
    if not tensors or not isinstance(g["constants"], list):
        return None
    for j, name in enumerate(node[1]):
        if name in consts:
            c = copy_tree(consts[name])
            c[0] = node[1][j] = f"fz{k}_{j}"
            g["constants"].append(c)
        else:
            node[1][j] = pick(rng, tensors[-4:] if rng.random() < 0.6 else tensors)
    node[2] = f"fz{k}"
    g["nodes"].append(node)
    if g["outputs"] and rng.random() < 0.7:
        g["outputs"][int(rng.integers(len(g["outputs"])))] = node[2]
    else:
        g["outputs"].append(node[2])
    return f"splice {node[0]}({', '.join(node[1])})"[:120]
