"""Lowering of the opset-2 text ops (cvm.ops.text) to the kernels of numba_kernels/text.py.

gather reads its indices in the spec's layout and writes a row-major output (index shape + row shape);
isqrt is elementwise and keeps its input's layout."""
from __future__ import annotations

from . import text
from .calls import call
from .layout import C
from .plan import Planner


def lower_gather(p: Planner, index, node, attrs):
    x_name = p.in_layout(node.inputs[0], C)  # row-major: the flat index array is a view of the buffer
    table = p.const(node.inputs[1])
    out_value = p.spec_value(node.output)
    rows = table.reshape(table.shape[0], -1).astype(out_value.dtype)

    def bind(ins, out):
        return [call(text.gather_rows, ins[0].reshape(-1), rows, out.reshape(-1, rows.shape[1]))]
    p.add("gather", [x_name], node.output, out_value, bind)


def lower_isqrt(p: Planner, index, node, attrs):
    x = p.values[node.inputs[0]]
    p.add("isqrt", node.inputs[:1], node.output, p.spec_value(node.output).with_layout(x.layout, x.chw),
          lambda ins, out: [call(text.isqrt, ins[0].reshape(-1), out.reshape(-1))])
