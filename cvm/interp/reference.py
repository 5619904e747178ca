"""The reference interpreter: a dict of values and a loop over nodes, int64 throughout.

It is the executable form of docs/spec.md: each op's semantics is its `reference` function in
cvm/ops, fed int64 arrays (activations with the batch axis first, constants without it).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ops import OPSETS
from ..verify import Analysis
from ..values import storage_dtype


def run(graph: Graph, analysis: Analysis, inputs: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
    """Outputs by name; with keep_all, every input and node output (for debugging and `mrt eval`)."""
    ops = OPSETS[graph.opset]
    env = {name: v.astype(np.int64) for name, v in inputs.items()}
    consts = {name: v.astype(np.int64) for name, v in graph.constants.items()}
    last_use = {name: i for i, node in enumerate(graph.nodes) for name in node.inputs}
    keep = set(graph.outputs) | (set(last_use) if keep_all else set())
    for i, (node, attrs) in enumerate(zip(graph.nodes, analysis.attrs)):
        args = [env[n] if n in env else consts[n] for n in node.inputs]
        out = ops[node.op].reference(*args, **attrs)
        info = analysis.tensors[node.output]
        assert out.shape[1:] == info.shape, f"{node.output}: shape {out.shape[1:]} != proven {info.shape}"
        assert out.size == 0 or (out.min() >= info.lo and out.max() <= info.hi), f"{node.output}: value outside its proof"
        env[node.output] = out
        for name in node.inputs:
            if last_use.get(name) == i and name not in keep and name in env:
                del env[name]
    names = list(env) if keep_all else graph.outputs
    return {name: env[name].astype(storage_dtype(analysis.tensors[name].bits)) for name in names}


def prepare(graph: Graph, analysis: Analysis):
    """Backend protocol: return a runner inputs -> outputs (the reference has nothing to prepare)."""
    return lambda inputs: run(graph, analysis, inputs)
