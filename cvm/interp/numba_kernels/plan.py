"""The execution plan: the graph lowered once, at prepare time, to a flat list of steps.

A step names its input and output tensors and knows how to bind itself to buffers: `bind(ins, out)`
returns the kernel calls `(fn, args)` to run, with every array already allocated, so a run is a loop
over prebuilt calls. Multiply-accumulate nodes absorb the requant -> relu/clip chain that follows
them when nothing else reads the intermediate tensors (the fused output step).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...ir import Graph
from ...arith import INT32_MAX, INT32_MIN, bits_max
from ...values import storage_dtype
from ...verify import Analysis
from .layout import C, FLAT, NHWC, Value, canonical
from .threads import Pool

OPEN_LO, OPEN_HI = INT32_MIN, INT32_MAX  # "no clamp": every value a kernel clamps is a tensor value,
# proven to fit int32 (the bounds reach int32 kernel arguments unchanged)


@dataclass
class Step:
    label: str
    inputs: tuple[str, ...]
    output: str
    value: Value
    bind: Callable  # (inputs: list[ndarray], out: ndarray) -> list[(fn, args)]; ignored for views
    view: Callable | None = None  # (input array) -> output array, when the output is a view
    scratch: int = 0  # bytes per sample that bind() allocates besides the output (a padded copy)

    def __str__(self) -> str:
        return f"{self.output} = {self.label}({', '.join(self.inputs)}) [{self.value.layout} {self.value.dtype}]"


@dataclass(frozen=True)
class OutputStep:
    """What a multiply-accumulate kernel does with each accumulator before storing it:
    y = clip(floor((acc*mult[o] + rnd) / 2^shift), lo, hi)            (requant, relu, clip folded)
    and with a residual tensor r (an add after that):
    y = clip(floor(((y + r)*mult2[o] + rnd2) / 2^shift2), lo2, hi2)   (the add's requant, relu, clip)."""
    mult: np.ndarray  # int64, one per output channel
    shift: int
    lo: int
    hi: int
    residual: str | None
    mult2: np.ndarray
    shift2: int
    lo2: int
    hi2: int
    output: str  # the last fused node's output
    nodes: tuple[int, ...]  # indices of the fused nodes

    def params(self) -> np.ndarray:
        return np.array([(1 << self.shift) >> 1, self.shift, self.lo, self.hi, self.residual is not None,
                         (1 << self.shift2) >> 1, self.shift2, self.lo2, self.hi2], np.int64)


def fold_clamp(lo: int, hi: int, lo2: int, hi2: int) -> tuple[int, int]:
    """clip(clip(v, lo, hi), lo2, hi2) == clip(v, lo', hi') (lo2 <= hi2)."""
    return min(max(lo, lo2), hi2), max(min(hi, hi2), lo2)


class Planner:
    def __init__(self, graph: Graph, analysis: Analysis, isa: str, pool: Pool):
        self.graph, self.analysis, self.isa, self.pool = graph, analysis, isa, pool
        self.values: dict[str, Value] = {}
        self.steps: list[Step] = []
        self._converted: dict[tuple[str, str], str] = {}
        self.deferred: dict[int, list] = {}  # node index -> lowerings to run once that node is reached
        self.claimed: set[int] = set()  # nodes a fused chain computes
        self.uses = Counter(n for node in graph.nodes for n in node.inputs) + Counter(graph.outputs)
        self.consumers = {}
        for i, node in enumerate(graph.nodes):
            for n in node.inputs:
                self.consumers.setdefault(n, []).append(i)
        for inp in graph.inputs:
            self.values[inp.name] = self.spec_value(inp.name)

    # ------------------------------------------------------------ tensors

    def spec_value(self, name: str, layout: str = C) -> Value:
        info = self.analysis.tensors[name]
        return Value(tuple(info.shape), storage_dtype(info.bits), info.lo, info.hi, layout)

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.constants.get(name)

    def add(self, label, inputs, output, value, bind, view=None, scratch: int = 0) -> str:
        self.steps.append(Step(label, tuple(inputs), output, value, bind, view, scratch))
        self.values[output] = value
        return output

    def at(self, index: int, emit) -> None:
        """Run emit() (which adds steps) when the planner reaches node `index` (a fused chain runs
        where its last node was, once every tensor it reads exists)."""
        self.deferred.setdefault(index, []).append(emit)

    def in_layout(self, name: str, layout: str) -> str:
        """The name of a tensor holding `name` stored in `layout` (a conversion step is added once)."""
        v = self.values[name]
        if v.layout == layout:
            return name
        key = (name, layout)
        if key not in self._converted:
            self._converted[key] = self._convert(name, v, layout)
        return self._converted[key]

    def viewable(self, name: str) -> str:
        """A tensor with a canonical view (layout "c" or "nhwc")."""
        return self.in_layout(name, C) if self.values[name].layout == FLAT else name

    def _convert(self, name: str, v: Value, layout: str) -> str:
        out = f"{name}@{layout}"
        if layout == NHWC and v.layout == FLAT:
            c, h, w = v.chw
            return self.add("flat->nhwc", [name], out, Value(v.chw, v.dtype, v.lo, v.hi, NHWC), None,
                            view=lambda x: x.reshape(x.shape[0], h, w, c))
        if layout == NHWC:
            return self.add("to_nhwc", [name], out, v.with_layout(NHWC),
                            lambda ins, o: [(np.copyto, (o, ins[0].transpose(0, 2, 3, 1)))])
        if v.layout == FLAT:
            c, h, w = v.chw
            return self.add("flat->c", [name], out, v.with_layout(C), lambda ins, o: [
                (np.copyto, (o.reshape(o.shape[0], c, h, w), ins[0].reshape(-1, h, w, c).transpose(0, 3, 1, 2)))])
        return self.add("to_c", [name], out, v.with_layout(C),
                        lambda ins, o: [(np.copyto, (o, canonical(ins[0], v)))])

    # ------------------------------------------------------------ fusion

    def output_step(self, index: int, channel_axis: int) -> OutputStep:
        """The chain after MAC node `index` that its output step can compute: [requant] [relu|clip]*
        [add(residual of the same shape) [requant] [relu|clip]*], while each tensor has no other reader."""
        nodes, attrs = self.graph.nodes, self.analysis.attrs
        info = self.analysis.tensors[nodes[index].output]
        n_out = info.shape[channel_axis]
        stages = [[np.ones(n_out, np.int64), 0, OPEN_LO, OPEN_HI, False] for _ in range(2)]
        stage, residual = 0, None
        name, fused = nodes[index].output, []
        while self.uses[name] == 1 and name not in self.graph.outputs and name in self.consumers:
            j = self.consumers[name][0]
            if j in self.claimed:
                break
            nxt, a, st = nodes[j], attrs[j], stages[stage]
            if nxt.op == "requant" and not st[4] and st[2] == OPEN_LO and st[3] == OPEN_HI:
                m = self.const(nxt.inputs[1]).astype(np.int64)
                if m.shape[0] != 1 and a["axis"] != channel_axis:
                    break
                lim = bits_max(a["bits"])
                st[:] = [np.broadcast_to(m, (n_out,)).copy(), a["shift"], -lim, lim, True]
            elif nxt.op == "relu":
                st[2], st[3] = fold_clamp(st[2], st[3], 0, OPEN_HI)
            elif nxt.op == "clip":
                st[2], st[3] = fold_clamp(st[2], st[3], a["lo"], a["hi"])
            elif nxt.op == "add" and stage == 0:
                other = nxt.inputs[1] if nxt.inputs[0] == name else nxt.inputs[0]
                if other == name or self.const(other) is not None or self.analysis.tensors[other].shape != info.shape:
                    break
                stage, residual = 1, other
            else:
                break
            fused.append(j)
            name = nxt.output
        (m1, s1, lo1, hi1, _), (m2, s2, lo2, hi2, _) = stages
        self.claimed.update(fused)
        return OutputStep(m1, s1, lo1, hi1, residual, m2, s2, lo2, hi2, name, tuple(fused))


def build(graph: Graph, analysis: Analysis, isa: str, pool: Pool, lowerings: dict,
          refused: dict | None = None) -> tuple[Planner, dict[str, str]]:
    """Lower every node; returns the planner (values and steps) and graph output -> stored tensor.
    `lowerings` and `refused` (why an op is not lowered) are keyed by (opset, op)."""
    p = Planner(graph, analysis, isa, pool)
    skip: set[int] = set()
    for i, (node, attrs) in enumerate(zip(graph.nodes, analysis.attrs)):
        if i not in skip:
            lower = lowerings.get((graph.opset, node.op))
            if lower is None:
                why = (refused or {}).get((graph.opset, node.op), "no lowering")
                raise NotImplementedError(f"the numba backend does not run op {node.op!r} of opset {graph.opset}: {why}")
            skip.update(lower(p, i, node, attrs) or ())
        for emit in p.deferred.pop(i, []):
            emit()
    outputs = {name: p.in_layout(name, C) for name in graph.outputs}
    return p, outputs
