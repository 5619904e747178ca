"""Fast path for mul of two activations in channels-last layout: squeeze-excite's channel scale
(x[C, H, W] * s[C, 1, 1]) and gate products (x * y, same shape). One kernel computes the product
and the output step that follows it (requant, relu/clip, lut, residual add: plan.FUSION), so the
int16/int32 product is never stored and no layout conversion is needed before the next conv."""
from __future__ import annotations

import numpy as np

from . import fused
from .layout import C, NHWC
from .lower_mac import NO_RESIDUAL
from .plan import Planner

PAR_MIN_ELEMENTS = 1 << 18  # per thread


def _operands(p: Planner, node) -> tuple[str, str] | None:
    """(x, s): x an NHWC activation of the output's shape [C, H, W]; s an activation of the same
    layout and shape, or of shape [C, 1, 1] in any layout (C values per sample, in channel order)."""
    if any(p.const(n) is not None for n in node.inputs) or node.inputs[0] == node.inputs[1]:
        return None
    shape = p.analysis.tensors[node.output].shape
    if len(shape) != 3 or p.analysis.tensors[node.output].bits > 32:
        return None
    for x, s in (node.inputs, node.inputs[::-1]):
        vx, vs = p.values[x], p.values[s]
        if vx.layout != NHWC or vx.shape != tuple(shape):
            continue
        if (vs.layout == NHWC and vs.shape == vx.shape) or (vs.shape == (shape[0], 1, 1) and vs.layout in (C, NHWC)):
            return x, s
    return None


def lower_mul(p: Planner, index: int, node) -> bool:
    """Lower a mul node (and the chain its output step absorbs) when _operands applies."""
    ops = _operands(p, node)
    if ops is None:
        return False
    x_name, s_name = ops
    c, h, w = p.values[x_name].shape
    hw = 1 if p.values[s_name].shape == (c, h, w) else h * w
    ostep = p.output_step(index, 0)
    tail = (ostep.mult, ostep.mult2, ostep.params())
    fused_ops = "+".join(p.graph.nodes[j].op for j in ostep.nodes)
    label = "mul[nhwc]" + ("+" + fused_ops if fused_ops else "")
    out_value = p.spec_value(ostep.output, NHWC)
    min_blocks = -(-PAR_MIN_ELEMENTS // (fused.BLOCK_ROWS * c))

    def bind(ins, out):
        x2 = ins[0].reshape(-1, c)
        out2 = out.reshape(-1, c)
        res = ins[2].reshape(out2.shape) if len(ins) > 2 else NO_RESIDUAL
        blocks = -(-x2.shape[0] // fused.BLOCK_ROWS)
        args = (x2, ins[1].reshape(-1, c), *tail, res, out2, np.int64(hw))
        return [p.pool.call(fused.mul_rows, args, blocks, min_blocks)]

    def emit():
        inputs = [x_name, s_name] + ([p.in_layout(ostep.residual, NHWC)] if ostep.residual is not None else [])
        p.add(label, inputs, ostep.output, out_value, bind)
    p.fuse(index, ostep.nodes, emit)
    return True
