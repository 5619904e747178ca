"""keep_reduced_axes: a sum or reduce_max that removes every per-sample axis (keepdims=0 on [N, ...] gives [N])
keeps them instead when its result reaches only reshapes, through element-wise ops on it alone or with a
one-element constant.

CVM values keep at least one per-sample axis, so a [N] tensor cannot be written. Models reach one in passing:
silero-vad ends with `ReduceMean` of a [N, 1] probability followed by `Unsqueeze` back to [N, 1]. Keeping the
reduced axes as size 1 changes no value and no element order, and a reshape reads nothing else, so the rewrite
is exact.
"""
import numpy as np

from mrt.graph import Node
from mrt.passes.rewrite import rebuild

REDUCTIONS = ("sum", "reduce_max")
UNARY = {"abs", "ceil", "clip", "cos", "elu", "erf", "exp", "floor", "gelu", "hard_sigmoid", "hard_swish",
         "identity", "leaky_relu", "log", "neg", "reciprocal", "relu", "round", "selu", "sigmoid", "sign", "sin",
         "softplus", "softsign", "sqrt", "tanh", "thresholded_relu", "celu", "mish", "univariate"}
SCALAR_BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"}


def _follows(graph, node, name):
    """Whether `node`'s output keeps the shape of its input `name` whatever that shape is."""
    if node.op in UNARY:
        return True
    others = [i for i in node.inputs if i != name]
    return (node.op in SCALAR_BINARY and len(others) == 1 and graph.is_constant(others[0])
            and np.asarray(graph.initializers[others[0]]).size == 1)


def _only_reshaped(graph, name):
    """Whether every path from tensor `name` ends in a reshape, through shape-following ops only."""
    if name in graph.outputs:
        return False
    for c in graph.consumers(name):
        if c.op != "reshape" and not (_follows(graph, c, name) and _only_reshaped(graph, c.outputs[0])):
            return False
    return True


def keep_reduced_axes(graph):
    nodes = []
    for n in graph.nodes:
        if (n.op in REDUCTIONS and not n.attrs["keepdims"]
                and len(n.attrs["axes"]) == len(graph.full_shape(n.inputs[0])) - 1
                and _only_reshaped(graph, n.outputs[0])):
            n = Node(n.op, n.inputs, n.outputs, {**n.attrs, "keepdims": 1}, n.name)
        nodes.append(n)
    return rebuild(graph, nodes, dict(graph.initializers))
