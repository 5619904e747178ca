"""matmul_as_dense: a matmul one of whose operands became a constant matrix once constants were folded (a
QLinearMatMul's dequantized weights, a Scan's unrolled initial state) is a dense layer, the form MRT quantizes a
constant weight in: x @ W -> dense(x, W^T); W @ x -> (dense(x^T, W))^T, x^T swapping x's last two axes. A constant
with leading axes of size 1 counts as its last two; any other constant stack is left as it is (the quantizer
names it)."""
from dataclasses import replace

import numpy as np

from mrt.graph import Node, fresh_name
from mrt.passes.rewrite import rebuild


def _matrix(graph, name):
    c = graph.initializers.get(name)
    if c is None or c.ndim < 2 or any(d != 1 for d in c.shape[:-2]):
        return None
    return np.asarray(c, np.float32).reshape(c.shape[-2:])


MAX_STACK = 64  # matrices of a constant stack, one dense layer each


def _stack(graph, a, b):
    """(b as a stack [k, m, n] of constant matrices, the number of b's axes before its last two that are not 1),
    where those axes are x's own before its last two."""
    c = graph.initializers.get(b)
    if c is None or c.ndim < 3 or _matrix(graph, b) is not None:
        return None
    lead = c.shape[:-2]
    while lead and lead[0] == 1:
        lead = lead[1:]
    x = graph.full_shape(a)
    if not lead or len(x) < len(lead) + 3 or tuple(x[-2 - len(lead):-2]) != lead or np.prod(lead) > MAX_STACK:
        return None
    return np.asarray(c, np.float32).reshape(-1, *c.shape[-2:]), len(lead)


def _stacked(graph, n, stack, consts, taken):
    """x [..., *lead, p, m] @ w [*lead, m, n]: x's lead axes merged into one, one dense per matrix, concatenated
    and split back."""
    (w, lead), a, x = stack, n.inputs[0], graph.full_shape(n.inputs[0])
    keep, axes = x[1:-2 - lead], x[-2 - lead:-2]
    names = iter(fresh_name(f"{n.name}.{k}", taken) for k in range(4 * len(w) + 2))
    merged = next(names)
    out = [Node("reshape", (a,), (merged,), {"shape": (*keep, int(np.prod(axes)), *x[-2:])}, merged)]
    axis, pieces = len(keep) + 1, []
    for k, matrix in enumerate(w):
        piece, weight, y = next(names), next(names), next(names)
        consts[weight] = np.ascontiguousarray(matrix.T)
        out += [Node("slice", (merged,), (piece,), {"axes": (axis,), "starts": (k,), "ends": (k + 1,), "steps": (1,)},
                     piece), Node("dense", (piece, weight), (y,), {}, y)]
        pieces.append(y)
    joined = next(names)
    out.append(Node("concat", tuple(pieces), (joined,), {"axis": axis}, joined) if len(pieces) > 1 else
               Node("identity", tuple(pieces), (joined,), {}, joined))
    out.append(Node("reshape", (joined,), n.outputs, {"shape": (*keep, *axes, x[-2], w.shape[-1])}, n.name))
    taken |= {o for node in out for o in node.outputs}
    return out


def matmul_as_dense(graph):
    nodes, consts, taken, changed = [], dict(graph.initializers), set(graph.tensor_names()), False
    for n in graph.nodes:
        a, b = n.inputs if n.op == "matmul" else (None, None)
        if n.op == "matmul" and not graph.is_constant(a) and _stack(graph, a, b) is not None:
            nodes += _stacked(graph, n, _stack(graph, a, b), consts, taken)
            changed = True
            continue
        right = _matrix(graph, b) if n.op == "matmul" and not graph.is_constant(a) else None
        left = _matrix(graph, a) if n.op == "matmul" and not graph.is_constant(b) and \
            len(graph.full_shape(b)) >= 3 else None  # (b^T swaps two per-sample axes, never the batch axis)
        if right is None and left is None:
            nodes.append(n)
            continue
        changed = True
        w = fresh_name(f"{n.name}.weight", taken)
        taken.add(w)
        if right is not None:
            consts[w] = np.ascontiguousarray(right.T)
            nodes.append(replace(n, op="dense", inputs=(a, w), attrs={}))
            continue
        consts[w] = left
        rank = len(graph.full_shape(b))
        swap = (*range(rank - 2), rank - 1, rank - 2)
        bt, yt = fresh_name(f"{n.name}.xt", taken), fresh_name(f"{n.name}.yt", taken | {f"{n.name}.xt"})
        taken |= {bt, yt}
        nodes += [Node("transpose", (b,), (bt,), {"perm": swap}, bt), Node("dense", (bt, w), (yt,), {}, yt),
                  Node("transpose", (yt,), n.outputs, {"perm": swap}, n.name)]
    return rebuild(graph, nodes, consts) if changed else graph
