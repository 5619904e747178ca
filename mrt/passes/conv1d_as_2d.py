"""conv1d_as_2d: a 1-D convolution ([N, C, L] input, [O, C/g, K] weight) becomes reshape -> 2-D convolution with a
height-1 kernel -> reshape back, which the quantizer and CVM's conv2d handle.

Audio models are 1-D convolutions end to end, their STFT front end included (silero-vad's `stft/Conv`: the real
and imaginary Fourier kernels as one constant [2F, 1, window] weight at stride hop). The 2-D form computes the
same sums in the same order; the reshapes move no value, so the rewrite is exact in float and in integers.
"""
from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild


def conv1d_as_2d(graph):
    consts = Constants(graph)
    nodes = []
    for n in graph.nodes:
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
                  Node("conv", (x2, w2, *n.inputs[2:]), (y2,), attrs, n.name),
                  Node("reshape", (y2,), n.outputs, {"shape": tuple(o_shape[1:])}, f"{n.name}/to_1d")]
    return rebuild(graph, nodes, consts.values)
