"""remove_unit_ops: x * 1, x / 1, x + 0 and x - 0 (a constant that changes nothing, and whose broadcast
adds no axis) are dropped like identity nodes (mrt.passes.remove_identity). Converters write them (onnxmltools
multiplies LightGBM's probabilities by a constant 1), and left in place they would hide a final sigmoid or
softmax from strip_output_transform and cost a rescale."""
from dataclasses import replace

from mrt.passes.remove_identity import remove_identity
from mrt.passes.rewrite import rebuild

NEUTRAL = {"mul": 1.0, "div": 1.0, "add": 0.0, "sub": 0.0}


def remove_unit_ops(graph):
    nodes = []
    for n in graph.nodes:
        if n.op in NEUTRAL and len(n.inputs) == 2 and graph.is_constant(n.inputs[1]) \
                and not graph.is_constant(n.inputs[0]):
            c = graph.initializers[n.inputs[1]]
            if (c == NEUTRAL[n.op]).all() and graph.full_shape(n.outputs[0]) == graph.full_shape(n.inputs[0]):
                n = replace(n, op="identity", inputs=(n.inputs[0],), attrs={})
        nodes.append(n)
    return remove_identity(rebuild(graph, nodes, graph.initializers))
