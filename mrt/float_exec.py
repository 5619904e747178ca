"""The float reference interpreter: runs a float Graph with numpy, one op-table function per
node. It is what the passes are checked against and what calibration observes."""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops import OPS


def _bind_inputs(graph, inputs):
    if isinstance(inputs, np.ndarray):
        if len(graph.inputs) != 1:
            raise GraphError(f"graph has {len(graph.inputs)} inputs: pass a dict by name")
        inputs = {graph.inputs[0].name: inputs}
    missing = {s.name for s in graph.inputs} - set(inputs)
    extra = set(inputs) - {s.name for s in graph.inputs}
    if missing or extra:
        raise GraphError(f"inputs: missing {sorted(missing)}, unknown {sorted(extra)}")
    values, batch = {}, set()
    for spec in graph.inputs:
        x = np.asarray(inputs[spec.name], dtype=np.float32)
        if x.shape[1:] != spec.shape:
            raise GraphError(f"input {spec.name!r}: shape {x.shape} is not (batch, *{spec.shape})")
        values[spec.name] = x
        batch.add(x.shape[0])
    if len(batch) > 1:
        raise GraphError(f"inputs have different batch sizes {sorted(batch)}")
    return values


def _last_uses(graph):
    """For each node index, the tensors read for the last time there (freed afterwards); an output
    nobody reads is freed right after the node that made it."""
    last = {}
    for k, node in enumerate(graph.nodes):
        for name in (*node.inputs, *node.outputs):
            last[name] = k
    keep = set(graph.outputs) | set(graph.initializers)
    frees = [[] for _ in graph.nodes]
    for name, k in last.items():
        if name not in keep:
            frees[k].append(name)
    return frees


def run_float(graph, inputs, *, capture=False, observe=None):
    """Run `graph` on a batch. `inputs`: {name: array (batch, *shape)} or one array when the
    graph has one input. Returns {output name: float32 array}; with capture=True returns
    (outputs, values) where values holds every graph input and node output (layer reports).

    observe(name, value), when given, sees every graph input and node output as soon as it exists.
    Without capture, every value is freed after its last reader ran, so a run holds only the live
    activations of its batch (calibration streams its statistics through `observe`).
    """
    env = dict(graph.initializers)
    env.update(_bind_inputs(graph, inputs))
    for spec in graph.inputs if observe else ():
        observe(spec.name, env[spec.name])
    frees = None if capture else _last_uses(graph)
    for k, node in enumerate(graph.nodes):
        value = OPS[node.op].run(*(env[i] for i in node.inputs), **node.attrs)
        out = node.outputs[0]
        expected = graph.shapes.get(out)
        if expected is not None and value.shape[1:] != expected:
            raise GraphError(f"node {node.name!r} ({node.op}) produced {value.shape}, its shape "
                             f"rule says (batch, *{expected})")
        env[out] = value
        if observe is not None:
            observe(out, value)
        for name in frees[k] if frees else ():
            del env[name]
    outputs = {name: env[name] for name in graph.outputs}
    if not capture:
        return outputs
    return outputs, {k: v for k, v in env.items() if k not in graph.initializers}
