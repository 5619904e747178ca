"""The integer graph: inputs, constants, a flat topologically ordered node list, outputs."""
from __future__ import annotations

from dataclasses import InitVar, dataclass, field

import numpy as np

from .limits import Footprint, static_footprint
from .ops import lowest_opset


@dataclass(frozen=True)
class Input:
    name: str
    shape: tuple[int, ...]  # per sample (the batch axis is implicit)
    bits: int


@dataclass(frozen=True)
class Node:
    op: str
    inputs: tuple[str, ...]
    output: str
    attrs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        attrs = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in sorted(self.attrs.items()))
        return f"{self.output} = {self.op}({', '.join(self.inputs)}{'; ' + attrs if attrs else ''})"


@dataclass
class Graph:
    inputs: list[Input]
    constants: dict[str, np.ndarray]  # int8 / int16 / int32 arrays
    nodes: list[Node]
    outputs: list[str]
    opset: int | None = None  # None: the lowest opset that holds every op and admits the graph's size
    footprint: InitVar[Footprint | None] = None  # sizes known beyond the structure (activations: the verifier's)

    def __post_init__(self, footprint: Footprint | None):
        if self.opset is None:
            size = static_footprint(self.inputs, self.constants, self.nodes)
            self.opset = lowest_opset({n.op for n in self.nodes}, size if footprint is None else size | footprint)

    def __str__(self) -> str:
        lines = [f"input {i.name}: {list(i.shape)} bits={i.bits}" for i in self.inputs]
        lines += [f"const {k}: {v.dtype}{list(v.shape)}" for k, v in self.constants.items()]
        lines += [str(n) for n in self.nodes]
        lines.append(f"outputs: {', '.join(self.outputs)}")
        return "\n".join(lines)
