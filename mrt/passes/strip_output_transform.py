"""Drop a softmax or sigmoid that produces a graph output: both are monotone, so the top-1 class is
unchanged, and the client applies them to the dequantized logits if it wants them. Not in
DEFAULT_PIPELINE: the converter runs it as its own stage when softmax="client", and records what it
dropped in the model's metadata."""
from __future__ import annotations

from mrt.graph import Graph

OUTPUT_TRANSFORMS = ("softmax", "sigmoid")


def strip_output_transform(graph: Graph) -> tuple[Graph, list[str]]:
    """The graph without its output softmax/sigmoid nodes, and the ops dropped (in graph order)."""
    outputs, dropped = list(graph.outputs), []
    nodes = list(graph.nodes)
    for node in list(nodes):
        if node.op in OUTPUT_TRANSFORMS and node.outputs[0] in outputs and len(graph.consumers(node.outputs[0])) == 0:
            outputs[outputs.index(node.outputs[0])] = node.inputs[0]
            nodes.remove(node)
            dropped.append(node.op)
    if not dropped:
        return graph, []
    return graph.replace(outputs=tuple(outputs), nodes=tuple(nodes)), dropped
