"""fuse_log_sum_exp: log(sum(exp(x))) written out (ReduceLogSumExp's expanded function body: Exp, ReduceSum,
Log) becomes m + log(sum(exp(x - m))), m = reduce_max(x) over the same axes, as the importer writes
ReduceLogSumExp itself (mrt.onnx_import.ops_reduce).

Quantized as written, exp's table spans exp(min x) .. exp(max x): inputs from 1 to 60 give outputs from 2.7 to
1e26, and at 8-16 bits every exp but the largest few rounds to zero, so the log of a row without a large entry
is the log of zero (ONNX's own example: cosine -0.04). Shifted by the maximum, every exp lies in (0, 1] and the
sum in [1, n], which any width holds. Exact in real arithmetic. Runs before fuse_univariate, which would
otherwise take the exp and the log into tables of their own.
"""
from mrt.graph import Node
from mrt.passes.rewrite import Constants, rebuild, sole_consumer


def _pattern(graph, log):
    """(x, sum node) when `log` reads sum(exp(x)), the sum and the exp read by nothing else."""
    if log.op != "log":
        return None
    total = graph.producer(log.inputs[0])
    if total is None or total.op != "sum" or sole_consumer(graph, total.outputs[0]) is not log:
        return None
    exp = graph.producer(total.inputs[0])
    if exp is None or exp.op != "exp" or sole_consumer(graph, exp.outputs[0]) is not total:
        return None
    if graph.is_constant(exp.inputs[0]) or "axes" not in total.attrs:
        return None
    return exp.inputs[0], total


def _shifted(names, log, x, total):
    """The nodes computing m + log(sum(exp(x - m))) into log's output."""
    axes, keep, tag = total.attrs["axes"], int(total.attrs.get("keepdims", 1)), log.name
    m, d, e, s, lg = (names.fresh(f"{tag}.{part}") for part in ("max", "shifted", "exp", "sum", "log"))
    nodes = [Node("reduce_max", (x,), (m,), {"axes": axes, "keepdims": 1}, f"{tag}.max"),
             Node("sub", (x, m), (d,), {}, f"{tag}.shifted"),
             Node("exp", (d,), (e,), {}, f"{tag}.exp"),
             Node("sum", (e,), (s,), {"axes": axes, "keepdims": keep}, f"{tag}.sum"),
             Node("log", (s,), (lg,), {}, f"{tag}.log")]
    top = m
    if not keep:
        top = names.fresh(f"{tag}.top")
        nodes.append(Node("reduce_max", (x,), (top,), {"axes": axes, "keepdims": 0}, f"{tag}.top"))
    nodes.append(Node("add", (lg, top), log.outputs, {}, tag))
    return nodes


def fuse_log_sum_exp(graph):
    found = {id(n): p for n in graph.nodes if (p := _pattern(graph, n)) is not None}
    if not found:
        return graph
    names = Constants(graph)
    drop = {id(graph.producer(total.inputs[0])) for _, total in found.values()}
    drop |= {id(total) for _, total in found.values()}
    nodes = []
    for n in graph.nodes:
        if id(n) in found:
            nodes.extend(_shifted(names, n, *found[id(n)]))
        elif id(n) not in drop:
            nodes.append(n)
    return rebuild(graph, nodes, names.values)
