"""ONNX loops whose iteration count a conversion fixes: a `Scan` (its sequence length is a dim of one sample, known
at import) and a `Loop` whose trip count is a constant and whose condition stays a constant, imported unrolled.

Each iteration is the body's nodes with the body's inputs bound to that iteration's values and every name the body
defines made unique by the node's name and the iteration (`{node}/{op}{t}/{name}`); names the body reads from the
enclosing graph keep theirs. A Scan reads the t-th slice of each scan input (Slice + Squeeze along its
scan_input_axes, from the end for a reverse direction); a scan output is every iteration's value stacked (Unsqueeze
+ Concat along its scan_output_axes, Loop's along a new axis 0; a reverse one in reverse order). The body's
constants (initializers, Constant nodes) are bound once, not once per iteration. A subgraph inside the body (an
If, a nested Scan or Loop) is renamed the same way and imported by the importer in turn, so it is unrolled or
inlined, or refused, on its own terms.

`unroll_scan(ctx, node)` and `unroll_loop(ctx, node)` give the ONNX nodes to import in place of the node, in
order; unroll_loop is a generator, as each iteration's condition is known only once the importer has imported the
iteration before. An unrolled loop larger than MAX_ITERATIONS iterations or MAX_UNROLLED_NODES body nodes, a trip
count or condition computed from the input, and a sequence of length 0 are refused by name.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.float_ops import OPS
from mrt.onnx_import.attrs import where
from mrt.onnx_import.one_sample import INTEGER_TYPES

MAX_ITERATIONS = 4096  # iterations of one unrolled Scan or Loop
MAX_UNROLLED_NODES = 200_000  # iterations x body nodes of one unrolled Scan or Loop


def _attributes(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _check_size(node, iterations: int, body) -> None:
    if iterations > MAX_ITERATIONS or iterations * len(body.node) > MAX_UNROLLED_NODES:
        raise UnsupportedOp(f"{where(node)}: unrolling {iterations} iterations of a body of {len(body.node)} nodes "
                            f"passes the limit ({MAX_ITERATIONS} iterations, {MAX_UNROLLED_NODES} nodes)")


def _defined(graph) -> set:
    """The names a graph defines in its own scope: its inputs, initializers and node outputs."""
    return {*(v.name for v in graph.input), *(t.name for t in graph.initializer),
            *(o for n in graph.node for o in n.output if o)}


def _bind_nodes(nodes, rename, prefix: str) -> list:
    """Copies of `nodes` with every input and output renamed, named under `prefix`, their subgraphs bound too."""
    bound_nodes = []
    for k, inner in enumerate(nodes):
        bound = onnx.NodeProto()
        bound.CopyFrom(inner)
        bound.input[:] = [rename(i) if i else "" for i in inner.input]
        bound.output[:] = [rename(o) if o else "" for o in inner.output]
        bound.name = f"{prefix}{inner.name or inner.op_type}_{k}"
        for a in bound.attribute:
            if a.type == AttributeProto.GRAPH:
                a.g.CopyFrom(_bind_graph(a.g, prefix, rename))
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    g.CopyFrom(_bind_graph(g, prefix, rename))
        bound_nodes.append(bound)
    return bound_nodes


def _bind_graph(graph, prefix: str, outer):
    """A nested subgraph with the names it defines under `prefix` and the names it reads from enclosing scopes
    renamed as those scopes are (`outer`)."""
    local = _defined(graph)

    def rename(name):
        return prefix + name if name in local else outer(name)

    bound = onnx.GraphProto()
    bound.CopyFrom(graph)
    del bound.node[:]
    bound.node.extend(_bind_nodes(graph.node, rename, prefix))
    for value in [*bound.input, *bound.output, *bound.value_info, *bound.initializer]:
        value.name = rename(value.name)
    return bound


class _Body:
    """A loop's body, bound once per iteration: its constants under `{base}/`, its other names under
    `{base}/{op}{t}/`."""

    def __init__(self, ctx, node, body):
        self.ctx, self.node, self.body = ctx, node, body
        self.base = f"{node.name or node.output[0]}/{node.op_type}"
        constant_nodes = [n for n in body.node if n.op_type == "Constant" and not n.input]
        self.hoisted = {t.name for t in body.initializer} | {o for n in constant_nodes for o in n.output}
        self.local = _defined(body)
        for t in body.initializer:
            ctx.consts[f"{self.base}/{t.name}"] = numpy_helper.to_array(t)
        self.integer = {v.name for v in [*body.input, *body.output, *body.value_info]
                        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in INTEGER_TYPES}

    def iteration(self, t: int, values: list) -> tuple[list, list]:
        """(the body's nodes for iteration t with its inputs bound to `values`, the names of its outputs)."""
        binding = dict(zip((v.name for v in self.body.input), values))
        prefix = f"{self.base}{t}/"

        def rename(name):
            if name in binding:
                return binding[name]
            if name in self.hoisted:
                return f"{self.base}/{name}"
            return prefix + name if name in self.local else name

        nodes = [n for n in self.body.node if t == 0 or not (n.op_type == "Constant" and not n.input)]
        bound = _bind_nodes(nodes, rename, prefix)
        self.ctx.integer_tensors |= {rename(name) for name in self.integer}
        return bound, [rename(o.name) for o in self.body.output]


def _const(ctx, name: str, value) -> str:
    if name not in ctx.consts:
        ctx.consts[name] = np.asarray(value)
    return name


def _shape(ctx, node, name):
    return ctx.consts[name].shape if ctx.is_const(name) else ctx.onnx_shape(name, node)


def _stack(ctx, base: str, values: list, axis: int, out: str) -> list:
    """Nodes writing `out`: the tensors `values`, each given a new axis `axis`, concatenated along it (in groups of
    at most the IR concat's arity, then the groups)."""
    axes = _const(ctx, f"{base}/stack_axes{axis}", np.array([axis], np.int64))
    nodes = [helper.make_node("Unsqueeze", [v, axes], [f"{out}/{k}"], name=f"{out}/unsqueeze{k}")
             for k, v in enumerate(values)]
    parts, most, level = [n.output[0] for n in nodes], OPS["concat"].arity[1], 0
    while len(parts) > most:
        groups = [parts[i:i + most] for i in range(0, len(parts), most)]
        nodes += [helper.make_node("Concat", g, [f"{out}/group{level}.{k}"], axis=axis, name=f"{out}/group{level}.{k}")
                  for k, g in enumerate(groups)]
        parts, level = [n.output[0] for n in nodes[-len(groups):]], level + 1
    return [*nodes, helper.make_node("Concat", parts, [out], axis=axis, name=f"{out}/concat")]


def _finals(node, values: list, outputs) -> list:
    """Identity nodes writing the node's outputs `outputs` (left out where unnamed) from `values`."""
    return [helper.make_node("Identity", [v], [out], name=f"{where(node)}/{out}") for v, out in zip(values, outputs)
            if out]


def _scan_length(ctx, node, scans: list, axes: list) -> int:
    lengths = set()
    for x, axis in zip(scans, axes):
        lengths.add(_shape(ctx, node, x)[axis])
    if len(lengths) != 1:
        raise UnsupportedOp(f"{where(node)}: the scan inputs have different lengths {sorted(lengths)}")
    length = lengths.pop()
    if length == 0:
        raise UnsupportedOp(f"{where(node)}: a sequence of length 0 gives empty scan outputs")
    return length


def _scan_item(ctx, base: str, x: str, j: int, axis: int, index: int) -> tuple[list, str]:
    """(Slice and Squeeze nodes, the name they write): entry `index` of scan input j (`x`) along `axis`."""
    starts = _const(ctx, f"{base}/start{index}", np.array([index], np.int64))
    ends = _const(ctx, f"{base}/end{index}", np.array([index + 1], np.int64))
    along = _const(ctx, f"{base}/axes{axis}", np.array([axis], np.int64))
    sliced, item = f"{base}/input{j}/slice{index}", f"{base}/input{j}/item{index}"
    return [helper.make_node("Slice", [x, starts, ends, along], [sliced], name=sliced),
            helper.make_node("Squeeze", [sliced, along], [item], name=item)], item


def _scan_attributes(ctx, node, n_states: int, n_out: int) -> tuple[list, list, list, list]:
    """(input axes made non-negative, input directions, output axes, output directions)."""
    attrs = _attributes(node)
    unknown = set(attrs) - {"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                            "scan_output_axes", "scan_output_directions"}
    if unknown:
        raise UnsupportedOp(f"{where(node)}: unsupported attribute(s) {sorted(unknown)}")
    scans = node.input[n_states:]
    in_axes = attrs.get("scan_input_axes", [0] * len(scans))
    in_axes = [a + len(_shape(ctx, node, x)) if a < 0 else a for a, x in zip(in_axes, scans)]
    return (in_axes, attrs.get("scan_input_directions", [0] * len(scans)), attrs.get("scan_output_axes", [0] * n_out),
            attrs.get("scan_output_directions", [0] * n_out))


def unroll_scan(ctx, node) -> list:
    """The nodes computing a Scan, every iteration written out."""
    attrs = _attributes(node)
    if "body" not in attrs or attrs.get("num_scan_inputs", 0) < 1:
        raise UnsupportedOp(f"{where(node)}: a Scan needs a body and num_scan_inputs >= 1")
    body, n_states = attrs["body"], len(node.input) - attrs["num_scan_inputs"]
    n_out = len(body.output) - n_states
    in_axes, in_reverse, out_axes, out_reverse = _scan_attributes(ctx, node, n_states, n_out)
    states, scans = list(node.input[:n_states]), list(node.input[n_states:])
    length = _scan_length(ctx, node, scans, in_axes)
    _check_size(node, length, body)
    loop = _Body(ctx, node, body)
    nodes, collected = [], [[] for _ in range(n_out)]
    for t in range(length):
        items = []
        for j, (x, axis, reverse) in enumerate(zip(scans, in_axes, in_reverse)):
            sliced, item = _scan_item(ctx, loop.base, x, j, axis, length - 1 - t if reverse else t)
            nodes += sliced
            items.append(item)
        bound, outs = loop.iteration(t, [*states, *items])
        nodes += bound
        states = outs[:n_states]
        for k, value in enumerate(outs[n_states:]):
            collected[k].append(value)
    nodes += _finals(node, states, node.output[:n_states])
    for k, out in enumerate(node.output[n_states:]):
        if out:
            values = collected[k][::-1] if out_reverse[k] else collected[k]
            nodes += _stack(ctx, loop.base, values, out_axes[k], out)
    return nodes


def _loop_count(ctx, node) -> tuple[int | None, str | None]:
    """(the trip count, None where there is none; the condition's constant name, None where there is none)."""
    trip = node.input[0] if node.input and node.input[0] else None
    cond = node.input[1] if len(node.input) > 1 and node.input[1] else None
    if trip is None and cond is None:
        raise UnsupportedOp(f"{where(node)}: a Loop with neither a trip count nor a condition never ends")
    count = max(int(np.asarray(ctx.const(trip, node, "Loop trip count")).reshape(())), 0) if trip else None
    if cond is not None:
        ctx.const(cond, node, "Loop condition")
    return count, cond


def _condition(ctx, node, name: str, t: int) -> bool:
    if not ctx.is_const(name):
        raise UnsupportedOp(f"{where(node)}: the condition for iteration {t} ({name!r}) is computed from the input; "
                            "only a loop of a fixed count unrolls")
    value = np.asarray(ctx.consts[name])
    if value.size != 1:
        raise UnsupportedOp(f"{where(node)}: the condition has {value.size} elements, not one")
    return bool(value.reshape(()))


def unroll_loop(ctx, node):
    """The nodes computing a Loop, iteration by iteration (a generator: the importer imports each iteration's
    nodes before the next iteration's condition is read)."""
    attrs = _attributes(node)
    if set(attrs) != {"body"}:
        raise UnsupportedOp(f"{where(node)}: unsupported attribute(s) {sorted(set(attrs) - {'body'})}")
    body = attrs["body"]
    count, cond = _loop_count(ctx, node)
    if count is not None:
        _check_size(node, count, body)
    loop = _Body(ctx, node, body)
    carried = list(node.input[2:])
    cond = cond or _const(ctx, f"{loop.base}/true", np.array(True))
    collected = [[] for _ in range(len(body.output) - 1 - len(carried))]
    t = 0
    while (count is None or t < count) and _condition(ctx, node, cond, t):
        if count is None:
            _check_size(node, t + 1, body)  # the condition alone ends it: refused once the limit is passed
        iteration = _const(ctx, f"{loop.base}/iteration{t}", np.array(t, np.int64))
        bound, outs = loop.iteration(t, [iteration, cond, *carried])
        yield from bound
        cond, carried = outs[0], outs[1:1 + len(carried)]
        for k, value in enumerate(outs[1 + len(carried):]):
            collected[k].append(value)
        t += 1
    yield from _finals(node, carried, node.output[:len(carried)])
    for k, out in enumerate(node.output[len(carried):]):
        if out:
            if not collected[k]:
                raise UnsupportedOp(f"{where(node)}: no iteration runs, so scan output {out!r} is empty")
            yield from _stack(ctx, loop.base, collected[k], 0, out)


UNROLL = {"Scan": unroll_scan, "Loop": unroll_loop}
