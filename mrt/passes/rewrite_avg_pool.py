"""rewrite_avg_pool: avg_pool -> sum_pool (window sum, zero padding) followed by mul by
1/count. The count is one number when every window divides by the same count (no padding, or
count_include_pad without ceil_mode padding); otherwise the mul takes a constant of shape
(*out_spatial) holding 1/count per output position."""
import numpy as np

from mrt.float_ops import avg_pool_counts
from mrt.float_ops.pool import with_end_pads
from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild


def rewrite_avg_pool(graph):
    consts = Constants(graph)
    nodes = []
    for n in graph.nodes:
        if n.op != "avg_pool":
            nodes.append(n)
            continue
        a = n.attrs
        counts = avg_pool_counts(graph.full_shape(n.inputs[0])[2:], **a)
        inv = 1 / counts
        if (counts == counts.flat[0]).all():
            inv = np.array(inv.flat[0])
        total = consts.fresh(f"{n.outputs[0]}/sum")
        pool_attrs = {"kernel": a["kernel"], "strides": a["strides"], "dilations": a["dilations"],
                      "pads": with_end_pads(a["pads"], a["ceil_pads"])}
        nodes += [Node("sum_pool", n.inputs, (total,), pool_attrs, f"{n.name}/sum_pool"),
                  Node("mul", (total, consts.add(f"{n.name}/inv_count", inv)), n.outputs, {},
                       n.name)]
    return rebuild(graph, nodes, consts.values)
