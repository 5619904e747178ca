"""fuse_layer_norm: the written-out LayerNorm older exporters emit (Paddle2ONNX, ONNX opset < 17, TF):

    m = ReduceMean(x, last axis)      -> sum(x) then a scalar chain t / n (mul by 1/n, div by n)
    d = x - m                         -> sub
    v = ReduceMean(Pow(d, 2))         -> a univariate d^2 (or mul d, d), sum, a scalar chain
    y = d / Sqrt(v + eps)             -> div_tensor(d, sqrt(sum / n + eps))

becomes layer_norm(x, epsilon=eps), which mrt.quantize.rules_text.layer_norm computes in integers
(integer mean and variance, isqrt, one division). Quantized op by op instead, d / sqrt(.) is a division
by a tabulated square root of an 8-bit variance, and the squares lose the small deviations.

Each scalar step is recognised by what it computes, not by how it is spelled: a chain of element-wise ops
with scalar constants (a univariate node, mul/div/add/sub by a scalar) is evaluated at test points and
must equal t / n, d^2, sqrt(t / n + eps) to float32 precision. Runs after fuse_univariate."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from mrt.float_ops.unary import run_program
from mrt.graph import Node
from mrt.passes.rewrite import rebuild

SCALAR_OPS = {"mul": np.multiply, "div": np.divide, "add": np.add, "sub": np.subtract}
MEAN_POINTS = np.array([-1000.0, -7.0, 0.0, 3.0, 77.5, 1e4])
SQUARE_POINTS = np.array([-50.0, -3.0, -0.5, 0.0, 0.25, 2.0, 40.0])
STD_POINTS = np.array([0.0, 1e-3, 1.0, 10.0, 1e3, 1e6])
RTOL = 1e-4  # float32 chains: a few ulps, far below any other function's distance


def _scalar(graph, name):
    """The value of a constant holding one number, else None."""
    if not graph.is_constant(name):
        return None
    value = np.asarray(graph.initializers[name], np.float64)
    return float(value.reshape(-1)[0]) if value.size == 1 else None


def _step(graph, node):
    """(input tensor, f) when `node` is an element-wise function of one tensor: a univariate, or
    mul/div/add/sub with a scalar constant on either side. f evaluates it on a float64 array."""
    if node.op == "univariate":
        program = node.attrs["program"]
        return node.inputs[0], lambda t: run_program(np.asarray(t, np.float32), program).astype(np.float64)
    if node.op in SCALAR_OPS and len(node.inputs) == 2:
        fn = SCALAR_OPS[node.op]
        a, b = node.inputs
        if (c := _scalar(graph, b)) is not None and not graph.is_constant(a):
            return a, lambda t: fn(np.float32(t), np.float32(c)).astype(np.float64)
        if (c := _scalar(graph, a)) is not None and not graph.is_constant(b):
            return b, lambda t: fn(np.float32(c), np.float32(t)).astype(np.float64)
    return None


def _chain_to(graph, name, stop):
    """(source tensor, f, nodes) walking back from `name` through scalar steps until `stop(node)` holds
    for the producer of the source (or a tensor with no such producer); f maps source to name."""
    fns, nodes = [], []
    while True:
        node = graph.producer(name)
        if node is None or stop(node):
            break
        step = _step(graph, node)
        if step is None:
            break
        name, fn = step
        fns.append(fn)
        nodes.append(node)

    def f(t):
        for fn in reversed(fns):
            t = fn(t)
        return t
    return name, f, nodes


def _last_axis_sum(graph, name):
    """The node making `name` when it is a keepdims sum over the last axis only."""
    node = graph.producer(name)
    if node is None or node.op != "sum" or not node.attrs.get("keepdims"):
        return None
    rank = len(graph.full_shape(node.inputs[0]))
    return node if tuple(a % rank for a in node.attrs["axes"]) == (rank - 1,) else None


def _close(a, b) -> bool:
    return bool(np.allclose(a, b, rtol=RTOL, atol=1e-9))


def _match(graph, node):
    """(x, epsilon, matched nodes) when div_tensor `node` divides x - mean(x) by sqrt(var(x) + eps)."""
    if node.op != "div_tensor":
        return None
    d, r = node.inputs
    sub = graph.producer(d)
    if sub is None or sub.op != "sub" or any(graph.is_constant(i) for i in sub.inputs):
        return None
    x, m = sub.inputs
    shape = graph.full_shape(x)
    if graph.full_shape(d) != shape:
        return None
    n = shape[-1]
    is_sum = lambda k: k.op == "sum"  # noqa: E731
    src, mean_f, mean_nodes = _chain_to(graph, m, is_sum)
    mean_sum = _last_axis_sum(graph, src)
    if mean_sum is None or mean_sum.inputs[0] != x or not mean_nodes or not _close(mean_f(MEAN_POINTS), MEAN_POINTS / n):
        return None
    src, std_f, std_nodes = _chain_to(graph, r, is_sum)
    var_sum = _last_axis_sum(graph, src)
    if var_sum is None or not std_nodes:
        return None
    base, square_f, square_nodes = _chain_to(graph, var_sum.inputs[0], lambda k: False)
    squared = var_sum.inputs[0] if not square_nodes else None
    if squared is not None:  # mul(d, d) is not a scalar step
        sq = graph.producer(squared)
        if sq is None or sq.op != "mul" or tuple(sq.inputs) != (d, d):
            return None
        base, square_nodes = d, [sq]
    elif base != d or not _close(square_f(SQUARE_POINTS), SQUARE_POINTS ** 2):
        return None
    eps = float(std_f(np.zeros(1))[0]) ** 2
    if not np.isfinite(eps) or not _close(std_f(STD_POINTS), np.sqrt(STD_POINTS / n + eps)):
        return None
    return x, eps, [sub, mean_sum, *mean_nodes, var_sum, *std_nodes, *square_nodes]


def fuse_layer_norm(graph):
    nodes, changed, matched = [], False, set()
    for node in graph.nodes:
        found = _match(graph, node)
        if found is None:
            nodes.append(node)
            continue
        x, eps, parts = found
        nodes.append(Node("layer_norm", (x,), node.outputs, {"epsilon": eps}, node.name))
        matched |= {p.outputs[0] for p in parts}
        changed = True
    if not changed:
        return graph
    while True:  # drop the matched nodes nothing reads any more (the sub may still feed others)
        used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
        kept = [n for n in nodes if n.outputs[0] in used or n.outputs[0] not in matched]
        if len(kept) == len(nodes):
            break
        nodes = kept
    return rebuild(graph, [replace(n) for n in nodes], dict(graph.initializers))
