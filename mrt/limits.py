"""The format's size limits, checked on the float graph right after import: a model the format
cannot hold in any opset (cvm.limits.NEWEST, the largest limits) fails at once, naming the tensor and
the limit, instead of after calibration. Per-sample node outputs are checked by the float IR's shape
inference (mrt.graph); this adds the graph inputs and the constants."""
from __future__ import annotations

from math import prod

from cvm import limits
from mrt.errors import GraphError


def check_import(graph) -> None:
    """Raise GraphError (one line: tensor, size, limit, rule id) for the first size no opset admits."""
    lim = limits.NEWEST
    for spec in graph.inputs:
        n = prod(spec.shape)
        if n > lim.tensor_elements:
            raise GraphError(f"input {spec.name!r} has {n} elements per sample > CVM's limit "
                             f"{lim.tensor_elements} [limits.elements]")
    total = 0
    for name, value in graph.initializers.items():
        if value.size > lim.constant_elements:
            raise GraphError(f"constant {name!r} has {value.size} elements > CVM's limit "
                             f"{lim.constant_elements} [limits.elements]")
        total += value.size
    if total > lim.total_constant_elements:
        raise GraphError(f"the constants hold {total} elements > CVM's limit {lim.total_constant_elements} "
                         "[limits.constants]")
