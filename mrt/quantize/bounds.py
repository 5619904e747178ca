"""The quantizer's view of what the verifier proves: the incremental verifier (cvm.verify.Verifier),
told explicitly about each input, constant and node as it is emitted, and read without side effects.
MRT's rules and MAC-split planner read their intervals here, so they plan with exactly the bounds the
model will be verified with."""
from __future__ import annotations

import numpy as np

from cvm.ir import Input, Node
from cvm.limits import Footprint
from cvm.verify import TensorInfo, Verifier


class Bounds:
    def __init__(self, opset: int):
        self._verifier = Verifier(opset)

    # ---------------------------------------------------------------- told, once per item

    def admit_input(self, inp: Input) -> None:
        self._verifier.add_input(inp)

    def admit_constant(self, name: str, values: np.ndarray) -> None:
        self._verifier.add_constant(name, values)

    def admit_node(self, node: Node) -> None:
        """Verify the node against everything admitted before (a broken rule fails here, at the node)."""
        self._verifier.add_node(node)

    # ---------------------------------------------------------------- read

    def info(self, name: str) -> TensorInfo:
        return self._verifier.tensors[name]

    def interval(self, name: str) -> tuple[int, int]:
        info = self.info(name)
        return info.lo, info.hi

    def shape(self, name: str) -> tuple[int, ...]:
        return self.info(name).shape

    def footprint(self) -> Footprint:
        """The size of the graph so far, activations included (for the lowest opset that admits it)."""
        return self._verifier.footprint()
