"""A model moved to an opset that only reprices its semantics (cvm.ops.REPRICES: opset 3 is gas schedule
v2, opset 4 schedule v3, both over opset 2's ops): the same graph, outputs and meta, another hash and gas.

It sits above the model (it makes one) and the op tables; the schedules it moves a model to sit below
them (cvm.gas_v2, cvm.gas_v3), so it is not one of theirs: before issue 29 it was cvm.gas_v2.repriced,
which imported the model and the op tables inside the function (an import loop).
"""
from __future__ import annotations

import dataclasses

from .model import Model
from .ops import OPSETS, REPRICES


def repriced(model, opset: int = 3):
    """`model` written in `opset`, an opset that only reprices (cvm.ops.REPRICES) the semantics of the
    model's own opset or a newer one (a model of a repricing opset moves by its semantics: 3 -> 4): the
    same graph, outputs and meta, another hash and gas (verified again: opset 4 also bounds a node's
    inputs). What `mrt convert --opset 3|4` writes; an opset-1 or opset-2 model keeps its own gas until
    repriced so."""
    if opset == model.graph.opset:
        return model
    base, semantics = REPRICES.get(opset), REPRICES.get(model.graph.opset, model.graph.opset)
    if base is None or semantics > base:
        raise ValueError(f"opset {opset} does not reprice opset {model.graph.opset}: a model moves only to an opset "
                         f"in {sorted(o for o, b in REPRICES.items() if b >= semantics)} (known: {sorted(OPSETS)})")
    return Model(dataclasses.replace(model.graph, opset=opset), model.meta)
