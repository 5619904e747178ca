"""rewrite_global_avg_pool: global_avg_pool -> sum over the spatial axes (keepdims) followed by
mul by the constant 1/(H*W...), so the quantizer sees an exact integer sum and one rescale."""
import math

import numpy as np

from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild


def rewrite_global_avg_pool(graph):
    consts = Constants(graph)
    nodes = []
    for n in graph.nodes:
        if n.op != "global_avg_pool":
            nodes.append(n)
            continue
        full = graph.full_shape(n.inputs[0])
        total = consts.fresh(f"{n.outputs[0]}/sum")
        inv = consts.add(f"{n.name}/inv_count", np.array(1 / math.prod(full[2:])))
        nodes += [Node("sum", n.inputs, (total,), {"axes": tuple(range(2, len(full))),
                                                   "keepdims": True}, f"{n.name}/sum"),
                  Node("mul", (total, inv), n.outputs, {}, n.name)]
    return rebuild(graph, nodes, consts.values)
