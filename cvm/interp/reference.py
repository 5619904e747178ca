"""The reference interpreter: a dict of values and a loop over nodes, int64 throughout.

It is the executable form of docs/spec.md: each op's semantics is its `reference` function in
cvm/ops, fed int64 arrays (activations with the batch axis first, constants without it).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ops import OPSETS
from ..ops.base import elements
from ..verify import Analysis
from ..values import storage_dtype


WORKING_BYTES = 1 << 28  # int64 working set of one node for one chunk of samples (the batch is cut to fit)


def run(graph: Graph, analysis: Analysis, inputs: dict[str, np.ndarray], keep_all: bool = False,
        chunk: int | None = None, consts: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Outputs by name; with keep_all, every input and node output (for debugging and `mrt eval`).

    Samples are independent, so the batch runs in chunks whose int64 temporaries fit WORKING_BYTES;
    between nodes every tensor is held in its storage dtype. Memory is then the run's activations at
    their storage size (what MAX_RUN_BYTES admits) plus one node's working set.

    consts: the constants widened to int64 (`widen_constants`), made once by `prepare` rather than on
    every call (a lut's table is not paid per call: 256 tables of 65,535 entries cost 26,000 gas)."""
    batch = next(iter(inputs.values())).shape[0]
    chunk = chunk or chunk_size(graph, analysis)
    consts = widen_constants(graph) if consts is None else consts
    parts = [_run_chunk(graph, analysis, {k: v[i:i + chunk] for k, v in inputs.items()}, keep_all, consts)
             for i in range(0, batch, chunk)]
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def chunk_size(graph: Graph, analysis: Analysis) -> int:
    """Samples per chunk: a node holds its distinct inputs and its output as int64 at once."""
    size = {name: elements(info.shape) for name, info in analysis.tensors.items() if info.kind != "const"}
    widest = max((sum(size.get(n, 0) for n in dict.fromkeys(node.inputs)) + size[node.output]
                  for node in graph.nodes), default=1)
    return max(1, WORKING_BYTES // (8 * widest))


def widen_constants(graph: Graph) -> dict[str, np.ndarray]:
    """Every constant as int64 (read-only: the runs share them)."""
    consts = {name: v.astype(np.int64) for name, v in graph.constants.items()}
    for v in consts.values():
        v.flags.writeable = False
    return consts


def _run_chunk(graph: Graph, analysis: Analysis, inputs: dict[str, np.ndarray], keep_all: bool,
               consts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ops = OPSETS[graph.opset]
    env = {name: v.astype(storage_dtype(analysis.tensors[name].bits)) for name, v in inputs.items()}
    distinct = [tuple(dict.fromkeys(node.inputs)) for node in graph.nodes]  # a node may list a name 10^5 times
    last_use = {name: i for i, names in enumerate(distinct) for name in names}
    keep = set(graph.outputs) | (set(last_use) if keep_all else set())
    for i, (node, attrs) in enumerate(zip(graph.nodes, analysis.attrs)):
        wide = {n: env[n].astype(np.int64) if n in env else consts[n] for n in distinct[i]}  # once per name
        args = list(map(wide.__getitem__, node.inputs))
        out = ops[node.op].reference(*args, **attrs)
        info = analysis.tensors[node.output]
        assert out.shape[1:] == info.shape, f"{node.output}: shape {out.shape[1:]} != proven {info.shape}"
        assert out.size == 0 or (out.min() >= info.lo and out.max() <= info.hi), f"{node.output}: value outside its proof"
        env[node.output] = out.astype(storage_dtype(info.bits))
        del args, wide, out
        for name in distinct[i]:
            if last_use.get(name) == i and name not in keep and name in env:
                del env[name]
    names = list(env) if keep_all else graph.outputs
    return {name: env[name] for name in names}


def prepare(graph: Graph, analysis: Analysis):
    """Backend protocol: return a runner inputs -> outputs (the reference has nothing to prepare)."""
    chunk, consts = chunk_size(graph, analysis), widen_constants(graph)
    return lambda inputs: run(graph, analysis, inputs, chunk=chunk, consts=consts)
