"""GraphBuilder: the one way code (MRT, tests, hand-built fixtures) assembles a graph."""
from __future__ import annotations

import numpy as np

from .ir import Graph, Input, Node
from .limits import MAX_BITS, Footprint
from .arith import bits_for
from .values import storage_dtype


def smallest_dtype(values: np.ndarray) -> np.dtype:
    bits = bits_for(int(values.min()), int(values.max())) if values.size else 1
    if bits > MAX_BITS:
        raise ValueError(f"constant needs {bits} bits, more than int32")
    return storage_dtype(bits)


class GraphBuilder:
    def __init__(self, opset: int | None = None):
        """opset None: the graph gets the lowest opset that holds its ops (cvm.ops.lowest_opset)."""
        self.opset = opset
        self.inputs: list[Input] = []
        self.constants: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []
        self._count = 0

    def _fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def input(self, name: str, shape, bits: int) -> str:
        self.inputs.append(Input(name, tuple(int(d) for d in shape), int(bits)))
        return name

    def const(self, values, name: str | None = None, dtype=None) -> str:
        values = np.asarray(values)
        if values.dtype.kind not in "iu" and not np.all(values == np.round(values)):
            raise ValueError("constants must be integers")
        values = np.asarray(values, np.int64)
        dtype = np.dtype(dtype) if dtype is not None else smallest_dtype(values)
        if not np.array_equal(values.astype(dtype).astype(np.int64), values):
            raise ValueError(f"constant values do not fit {dtype}")
        name = name or self._fresh("c")
        self.constants[name] = values.astype(dtype.newbyteorder("<"))
        return name

    def op(self, op: str, *inputs: str, name: str | None = None, **attrs) -> str:
        name = name or self._fresh(op)
        attrs = {k: tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else int(v) for k, v in attrs.items()}
        self.nodes.append(Node(op, tuple(inputs), name, attrs))
        return name

    def graph(self, outputs, footprint: Footprint | None = None) -> Graph:
        """footprint: sizes beyond the structure (a Verifier's, with the activations), for the opset choice."""
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        return Graph(list(self.inputs), dict(self.constants), list(self.nodes), outputs, self.opset, footprint)

    def build(self, outputs, meta: dict | None = None):
        from .model import Model
        return Model(self.graph(outputs), meta)
