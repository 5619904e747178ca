"""fuse_magnitude: sqrt(a^2 + b^2) written out (Pow(x, 2) or x * x for each part, Add, Sqrt: how torch exports
an STFT magnitude, silero-vad's among them) becomes one `magnitude` node.

Quantized as written, each square is requantized to the activation bits, so a spectrum whose loud bins are 100x
its quiet ones loses the quiet ones twice (the square doubles the range in bits) before the square root's table
(silero-vad: 26% relative error after the sqrt even at 12 bits). `magnitude` is quantized with exact integer
squares and an integer square root instead (mrt.quantize.rules_audio). Runs before fuse_univariate, which would
otherwise take each square into a table of its own.
"""
import numpy as np

from mrt.graph import Node
from mrt.passes.rewrite import rebuild


def _square_of(graph, name):
    """x if tensor `name` is x^2 (pow by the constant 2, or x * x) read by one node only, else None."""
    node = graph.producer(name)
    if node is None or len(graph.consumers(name)) != 1 or name in graph.outputs:
        return None
    if node.op == "mul" and len(node.inputs) == 2 and node.inputs[0] == node.inputs[1]:
        return node.inputs[0]
    if node.op == "pow" and graph.is_constant(node.inputs[1]):
        e = np.asarray(graph.initializers[node.inputs[1]])
        if e.size == 1 and float(e.reshape(())) == 2.0:
            return node.inputs[0]
    return None


def fuse_magnitude(graph):
    drop, nodes = set(), {}
    for n in graph.nodes:
        if n.op != "sqrt":
            continue
        total = graph.producer(n.inputs[0])
        if total is None or total.op != "add" or len(graph.consumers(total.outputs[0])) != 1:
            continue
        parts = [_square_of(graph, i) for i in total.inputs]
        if None in parts or any(graph.is_constant(p) for p in parts) or \
                graph.full_shape(parts[0]) != graph.full_shape(parts[1]) or \
                graph.full_shape(parts[0]) != graph.full_shape(n.outputs[0]):
            continue
        drop |= {id(total), *(id(graph.producer(i)) for i in total.inputs)}
        nodes[id(n)] = Node("magnitude", tuple(parts), n.outputs, {}, n.name)
    if not nodes:
        return graph
    kept = [nodes.get(id(n), n) for n in graph.nodes if id(n) not in drop]
    return rebuild(graph, kept, dict(graph.initializers))
