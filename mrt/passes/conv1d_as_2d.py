"""conv1d_as_2d: a 1-D convolution ([N, C, L] input, [O, C/g, K] weight) becomes reshape -> 2-D convolution with a
height-1 kernel -> reshape back, which the quantizer and CVM's conv2d handle.

Audio models are 1-D convolutions end to end, their STFT front end included (silero-vad's `stft/Conv`: the real
and imaginary Fourier kernels as one constant [2F, 1, window] weight at stride hop). The 2-D form computes the
same sums in the same order; the reshapes move no value, so the rewrite is exact in float and in integers.

A relu that is the conv's only reader goes before the reshape back (relu commutes with a reshape): the
quantizer then sees conv -> relu and gives the relu's output its own unsigned scale from the conv's
accumulator, instead of first rounding the conv output at the scale of its whole range, negative tail
included (silero-vad's encoder: conv thresholds 260 against 68 after the relu, four such layers).
"""
from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild


def conv1d_as_2d(graph):
    consts = Constants(graph)
    readers = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    moved = set()  # relus now emitted with their conv
    nodes = []
    for n in graph.nodes:
        if id(n) in moved:
            continue
        if n.op != "conv" or len(graph.full_shape(n.inputs[0])) != 3:
            nodes.append(n)
            continue
        _, c, length = graph.full_shape(n.inputs[0])
        w = graph.initializers[n.inputs[1]]
        o_shape = graph.full_shape(n.outputs[0])
        a = n.attrs
        x2, y2 = consts.fresh(f"{n.inputs[0]}/2d"), consts.fresh(f"{n.outputs[0]}/2d")
        w2 = consts.add(f"{n.inputs[1]}/2d", w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]))
        attrs = {"strides": (1, a["strides"][0]), "dilations": (1, a["dilations"][0]),
                 "pads": (0, a["pads"][0], 0, a["pads"][1]), "groups": a["groups"]}
        nodes += [Node("reshape", (n.inputs[0],), (x2,), {"shape": (c, 1, length)}, f"{n.name}/to_2d"),
                  Node("conv", (x2, w2, *n.inputs[2:]), (y2,), attrs, n.name)]
        relu = _only_relu(readers.get(n.outputs[0], []), n.outputs[0], graph)
        if relu is not None:
            r2 = consts.fresh(f"{relu.outputs[0]}/2d")
            nodes += [Node("relu", (y2,), (r2,), {}, relu.name),
                      Node("reshape", (r2,), relu.outputs, {"shape": tuple(o_shape[1:])}, f"{n.name}/to_1d")]
            moved.add(id(relu))
        else:
            nodes.append(Node("reshape", (y2,), n.outputs, {"shape": tuple(o_shape[1:])}, f"{n.name}/to_1d"))
    return rebuild(graph, nodes, consts.values)


def _only_relu(readers: list, name: str, graph):
    """The relu that alone reads `name` (no graph output either), or None."""
    if len(readers) == 1 and readers[0].op == "relu" and name not in graph.outputs:
        return readers[0]
    return None
