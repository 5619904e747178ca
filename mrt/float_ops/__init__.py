"""The float op table: for every IR op, its numpy semantics (`run`, on full arrays, batch axis 0
included), its shape rule (`shape`, on full shapes with the symbolic `BATCH` at axis 0 of batched
tensors), its exact attribute names and its arity. `mrt.graph` uses the shape rules,
`mrt.float_exec` the run functions; passes and calibration see the same definition.

Attributes always refer to axes of the FULL tensor (axis 0 is the batch axis, as in ONNX), except
`reshape.shape`, which is the per-sample target shape.
"""
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable

from mrt.float_ops.audio import AUDIO
from mrt.float_ops.elementwise import ELEMENTWISE
from mrt.float_ops.layout import LAYOUT
from mrt.float_ops.linear import LINEAR
from mrt.float_ops.pool import POOL, avg_pool_counts
from mrt.float_ops.select import SELECT
from mrt.float_ops.shapes import BATCH, is_batched
from mrt.float_ops.unary import UNARY
from mrt.float_ops.text import TEXT
from mrt.float_ops.vision import VISION
from mrt.float_ops.trees import TREES
from mrt.float_ops.integer import INTEGER
from mrt.float_ops.tail import TAIL

__all__ = ["OPS", "OpDef", "BATCH", "is_batched", "avg_pool_counts"]


@dataclass(frozen=True)
class OpDef:
    name: str
    run: Callable          # run(*inputs: np.ndarray, **attrs) -> np.ndarray (float32)
    shape: Callable        # shape(*full_shapes, **attrs) -> full output shape
    attrs: tuple           # the exact attribute names a node of this op carries
    arity: tuple           # (min inputs, max inputs)


OPS = MappingProxyType({
    name: OpDef(name, *entry)
    for table in (ELEMENTWISE, UNARY, SELECT, LINEAR, POOL, LAYOUT, VISION, TREES, TEXT, AUDIO, INTEGER, TAIL)
    for name, entry in table.items()
})
