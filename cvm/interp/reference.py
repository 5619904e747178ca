"""The reference interpreter: a dict of values and a loop over nodes, int64 throughout.

It is the executable form of docs/spec.md: each op's semantics is its `reference` function in
cvm/ops, fed int64 arrays (activations with the batch axis first, constants without it).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..ir import Graph
from ..ops import OPSETS
from ..ops.base import elements
from ..verify import Analysis
from ..values import storage_dtype


WORKING_BYTES = 1 << 28  # int64 working set of one node for one chunk of samples (the batch is cut to fit)


def run(graph: Graph, analysis: Analysis, inputs: dict[str, np.ndarray], keep_all: bool = False,
        chunk: int | None = None, consts: dict[str, np.ndarray] | None = None,
        steps: list[Step] | None = None) -> dict[str, np.ndarray]:
    """Outputs by name; with keep_all, every input and node output (for debugging and `mrt eval`).

    Samples are independent, so the batch runs in chunks whose int64 temporaries fit WORKING_BYTES;
    between nodes every tensor is held in its storage dtype. Memory is then the run's activations at
    their storage size (what MAX_RUN_BYTES admits) plus one node's working set.

    consts: the constants widened to int64 (`widen_constants`), made once by `prepare` rather than on
    every call (a lut's table is not paid per call: 256 tables of 65,535 entries cost 26,000 gas);
    steps: `plan_steps(graph, analysis)`, also made once by `prepare`."""
    batch = next(iter(inputs.values())).shape[0]
    chunk = chunk or chunk_size(graph, analysis)
    consts = widen_constants(graph) if consts is None else consts
    steps = plan_steps(graph, analysis, keep_all) if steps is None or keep_all else steps
    names = list(inputs) + [n.output for n in graph.nodes] if keep_all else graph.outputs
    parts = [_run_chunk(steps, analysis, {k: v[i:i + chunk] for k, v in inputs.items()}, names, consts)
             for i in range(0, batch, chunk)]
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


class Step(NamedTuple):
    """One node, with what the loop needs looked up once: its semantics, inputs (and each distinct
    one once: a node may list a name 10^5 times), its proven shape, interval and storage dtype, and
    the names whose last use it is."""
    reference: Callable
    attrs: dict
    inputs: tuple[str, ...]
    distinct: tuple[str, ...]
    output: str
    shape: tuple[int, ...]
    lo: int
    hi: int
    dtype: np.dtype
    frees: tuple[str, ...]


def plan_steps(graph: Graph, analysis: Analysis, keep_all: bool = False) -> list[Step]:
    ops = OPSETS[graph.opset]
    distinct = [tuple(dict.fromkeys(node.inputs)) for node in graph.nodes]
    last_use = {name: i for i, names in enumerate(distinct) for name in names}
    keep = set(graph.outputs) | (set(last_use) if keep_all else set())
    steps = []
    for i, (node, attrs) in enumerate(zip(graph.nodes, analysis.attrs)):
        info = analysis.tensors[node.output]
        frees = tuple(n for n in distinct[i] if last_use[n] == i and n not in keep and n not in graph.constants)
        steps.append(Step(ops[node.op].reference, attrs, node.inputs, distinct[i], node.output, tuple(info.shape),
                          info.lo, info.hi, storage_dtype(info.bits), frees))
    return steps


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


def _run_chunk(steps: list[Step], analysis: Analysis, inputs: dict[str, np.ndarray], names: list[str],
               consts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    env = {name: v.astype(storage_dtype(analysis.tensors[name].bits)) for name, v in inputs.items()}
    for step in steps:
        wide = {n: env[n].astype(np.int64) if n in env else consts[n] for n in step.distinct}  # once per name
        out = step.reference(*map(wide.__getitem__, step.inputs), **step.attrs)
        assert out.shape[1:] == step.shape, f"{step.output}: shape {out.shape[1:]} != proven {step.shape}"
        assert out.size == 0 or (out.min() >= step.lo and out.max() <= step.hi), f"{step.output}: value outside its proof"
        env[step.output] = out.astype(step.dtype)
        del wide, out
        for name in step.frees:
            del env[name]
    return {name: env[name] for name in names}


def prepare(graph: Graph, analysis: Analysis):
    """Backend protocol: return a runner inputs -> outputs (the reference has nothing to prepare)."""
    chunk, consts, steps = chunk_size(graph, analysis), widen_constants(graph), plan_steps(graph, analysis)
    return lambda inputs: run(graph, analysis, inputs, chunk=chunk, consts=consts, steps=steps)
