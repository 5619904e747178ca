"""pool1d_as_2d: a 1-D max or average pool ([N, C, L] input) becomes reshape -> the 2-D pool with a height-1
window -> reshape back, which the quantizer and CVM's max_pool2d (or rewrite_avg_pool's window sum) handle.

Before this pass a 1-D AveragePool became a conv2d with one stride and the verifier refused the model
(`strides must be 2 ints`, issue 30). The 2-D form takes the same windows in the same order and the reshapes
move no value, so the rewrite is exact in float and in integers (as conv1d_as_2d is for convolutions).
"""
from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild

POOLS = ("max_pool", "avg_pool")


def _attrs_2d(a: dict) -> dict:
    """A 1-D pool's attributes for a height-1 2-D window: kernel, strides, dilations (1, v); pads (0, begin, 0,
    end); avg_pool's ceil_mode padding (0, extra)."""
    out = dict(a, kernel=(1, a["kernel"][0]), strides=(1, a["strides"][0]), dilations=(1, a["dilations"][0]),
               pads=(0, a["pads"][0], 0, a["pads"][1]))
    if "ceil_pads" in a:
        out["ceil_pads"] = (0, a["ceil_pads"][0])
    return out


def pool1d_as_2d(graph):
    consts = Constants(graph)
    nodes = []
    for n in graph.nodes:
        if n.op not in POOLS or len(n.attrs["kernel"]) != 1:
            nodes.append(n)
            continue
        _, c, length = graph.full_shape(n.inputs[0])
        x2, y2 = consts.fresh(f"{n.inputs[0]}/2d"), consts.fresh(f"{n.outputs[0]}/2d")
        nodes += [Node("reshape", (n.inputs[0],), (x2,), {"shape": (c, 1, length)}, f"{n.name}/to_2d"),
                  Node(n.op, (x2,), (y2,), _attrs_2d(n.attrs), n.name),
                  Node("reshape", (y2,), n.outputs, {"shape": tuple(graph.full_shape(n.outputs[0])[1:])},
                       f"{n.name}/to_1d")]
    if len(nodes) == len(graph.nodes):
        return graph
    return rebuild(graph, nodes, consts.values)
