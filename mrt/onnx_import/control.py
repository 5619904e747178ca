"""ONNX control flow that a conversion fixes: an `If` whose condition is a constant is the branch it takes.

Exported models branch on settings that are constant once the model is converted (torch's
`if sample_rate == 16000`, a shape check folded from the fixed input shape). The branch's nodes are
imported in place of the If and its outputs renamed to the If's; an If on a value computed from the
input cannot be written as a fixed integer graph and is refused.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where


def inline_if(ctx, node):
    """The nodes of the branch the If's constant condition selects, then Identity nodes defining the If's outputs."""
    cond = np.asarray(ctx.const(node.input[0], node, "If condition"))
    if cond.size != 1:
        raise UnsupportedOp(f"{where(node)}: the condition has {cond.size} elements, not one")
    branches = {a.name: a.g for a in node.attribute}
    branch = branches["then_branch" if bool(cond.reshape(())) else "else_branch"]
    if len(branch.output) != len(node.output):
        raise UnsupportedOp(f"{where(node)}: the branch has {len(branch.output)} outputs for {len(node.output)}")
    for init in branch.initializer:
        ctx.consts[init.name] = numpy_helper.to_array(init)
    return [*branch.node, *(helper.make_node("Identity", [o.name], [out], name=f"{where(node)}/{out}")
                            for o, out in zip(branch.output, node.output) if out)]
