"""The format's size limits, checked before the slow stages: a model the format cannot hold in any opset
(cvm.limits.NEWEST, the largest limits) fails at once, naming the tensor or count and the limit, instead of
after calibration. Per-sample node outputs are checked by the float IR's shape inference (mrt.graph); this
adds the graph inputs, the constants and the node counts.

Nodes: the count that matters is the CVM graph's (the verifier refuses more than NEWEST.nodes), known only
after calibration and quantization, and neither an ONNX graph's nor its float graph's count bounds it
either way: the import folds constants and shape plumbing away (PP-OCR cls: 566 ONNX nodes, 220 CVM nodes)
and unrolls recurrences (rnn_ocr_bilstm: 31 ONNX nodes, 1557 float nodes); the passes fuse a few nodes into
one and the quantizer adds requantizations (resnet_cifar: 38 float nodes, 46 CVM nodes). So the early
checks allow NODE_MARGIN times the limit, more than any model the converter handles comes near, and the
verifier decides exactly at the end. They bound the work before it: a 10^5-node ONNX graph is refused
before the import reads a node (it once ran for more than 10 minutes before anything refused it)."""
from __future__ import annotations

from math import prod

from cvm import limits
from mrt.errors import GraphError

NODE_MARGIN = 4  # early node checks: ONNX nodes, and float nodes as the import emits them, <= 4 x NEWEST.nodes


def max_nodes() -> int:
    """The most nodes an ONNX graph (subgraphs included), or the float graph its import emits, may have."""
    return NODE_MARGIN * limits.NEWEST.nodes


def node_limit_text() -> str:
    """The early node limit in an error message."""
    return f"{max_nodes()}, the converter's limit ({NODE_MARGIN} x CVM's {limits.NEWEST.nodes} nodes) [limits.nodes]"


def check_onnx(graph) -> None:
    """Raise GraphError (one line) for an ONNX GraphProto with more than max_nodes() nodes, counting the
    nodes of If/Loop/Scan bodies too (without recursion: a deep nesting is no RecursionError)."""
    n, todo, cap = 0, [graph], max_nodes()
    while todo:
        g = todo.pop()
        n += len(g.node)
        if n > cap:
            raise GraphError(f"the ONNX model has at least {n} nodes > {node_limit_text()}")
        for node in g.node:
            for a in node.attribute:
                todo.extend([a.g] if a.HasField("g") else [])
                todo.extend(a.graphs)


def check_import(graph) -> None:
    """Raise GraphError (one line: tensor, size, limit, rule id) for the first size no opset admits."""
    lim = limits.NEWEST
    for spec in graph.inputs:
        n = prod(spec.shape)
        if n > lim.tensor_elements:
            raise GraphError(f"input {spec.name!r} has {n} elements per sample > CVM's limit "
                             f"{lim.tensor_elements} [limits.elements]")
    total = 0
    for name, value in graph.initializers.items():
        if value.size > lim.constant_elements:
            raise GraphError(f"constant {name!r} has {value.size} elements > CVM's limit "
                             f"{lim.constant_elements} [limits.elements]")
        total += value.size
    if total > lim.total_constant_elements:
        raise GraphError(f"the constants hold {total} elements > CVM's limit {lim.total_constant_elements} "
                         "[limits.constants]")
