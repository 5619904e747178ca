"""Element-wise fast paths in channels-last layout that end in the fused output step (plan.FUSION:
requant, relu/clip, lut, residual add), so intermediate tensors are never stored and no layout
conversion is needed before the next conv:

- mul of an NHWC activation x[C, H, W] by s: squeeze-excite's channel scale s[C, 1, 1] (an
  activation), a same-shape activation (gates), or a constant that is one value per channel (a
  batch norm's scale, whose shift add the output step then absorbs as a constant residual);
- concat along channels of activations stored NHWC, each input written into its channel slice by
  the output step, with the requant in front of an input fused when the concat is its only reader
  (DenseNet requantizes every earlier feature map into each layer's concat).
"""
from __future__ import annotations

import numpy as np

from . import fused
from .layout import C, NHWC
from .lower_mac import NO_RESIDUAL as residual_none, residual
from .plan import OPEN_HI, OPEN_LO, OutputStep, Planner, channel_vector


def rows_of(p: Planner, name: str) -> tuple[int, int] | None:
    """(C, channel axis): a stored activation seen as rows of C values, C its channel axis (NHWC:
    spec axis 0, stored last; layout "c": the last axis); None for "flat" values and scalars."""
    v = p.values[name]
    if v.layout == NHWC:
        return v.shape[0], 0
    if v.layout == C and len(v.shape) >= 1:
        return v.shape[-1], len(v.shape) - 1
    return None


def _same_operands(p: Planner, node):
    """mul of two activations of the output's shape in the same layout ("c" or NHWC), any rank."""
    x, s = node.inputs
    shape = tuple(p.analysis.tensors[node.output].shape)
    if x == s or p.const(x) is not None or p.const(s) is not None or p.analysis.tensors[node.output].bits > 32:
        return None
    vx, vs = p.values[x], p.values[s]
    if vx.shape != shape or vs.shape != shape or vx.layout != vs.layout or rows_of(p, x) is None:
        return None
    return x, s


def _mul_operands(p: Planner, node):
    """(x, s, kind): x an NHWC activation of the output's shape [C, H, W]; s an activation of the
    same layout and shape ("same"), an activation [C, 1, 1] in any layout ("channel"), or a
    constant one value per channel (returned as int64[1, C], "const")."""
    shape = tuple(p.analysis.tensors[node.output].shape)
    if len(shape) != 3 or p.analysis.tensors[node.output].bits > 32 or node.inputs[0] == node.inputs[1]:
        return None
    for x, s in (node.inputs, node.inputs[::-1]):
        if p.const(x) is not None or p.values[x].layout != NHWC or p.values[x].shape != shape:
            continue
        if (c := p.const(s)) is not None:
            vec = channel_vector(c, shape, 0)
            return None if vec is None else (x, vec.reshape(1, -1), "const")
        vs = p.values[s]
        if vs.layout == NHWC and vs.shape == shape:
            return x, s, "same"
        if vs.shape == (shape[0], 1, 1) and vs.layout in (C, NHWC):
            return x, s, "channel"
    return None


def _emit(p: Planner, index: int, label: str, reads: list[str], channels: int, make_args, layout: str = NHWC,
          axis: int = 0, include_head: bool = False):
    """Fuse the output step after node `index` (or from it, include_head) and add the step:
    make_args(ins, out2) -> (kernel, args before the output step's, args after it, rows)."""
    ostep = p.output_step(index, axis, const_residual=True, include_head=include_head, luts=True)
    tail = (ostep.mult, ostep.mult2, ostep.params())
    fused_ops = "+".join(p.graph.nodes[j].op for j in ostep.nodes)
    out_value = p.spec_value(ostep.output, layout)
    min_blocks = -(-p.tuning.par_min_elements // (fused.BLOCK_ROWS * channels))

    def bind(ins, out):
        out2 = out.reshape(-1, channels)
        kern, head, after, rows = make_args(ins, out2)
        args = (*head, *tail, residual(ostep, ins, len(reads), out2), out2, *after)
        return [p.pool.call(kern, args, -(-rows // fused.BLOCK_ROWS), min_blocks)]

    def emit():
        extra = [p.in_layout(ostep.residual, layout)] if ostep.residual is not None else []
        p.add(label + ("+" + fused_ops if fused_ops else ""), reads + extra, ostep.output, out_value, bind)
    p.fuse(index, ostep.nodes, emit)


def lower_mul(p: Planner, index: int, node) -> bool:
    """Lower a mul node (and the chain its output step absorbs) when _mul_operands (channels-last,
    rank 3) or _same_operands (same layout and shape, any rank) applies."""
    ops = _mul_operands(p, node)
    if ops is None:
        same = _same_operands(p, node)
        if same is None:
            return False
        c, axis = rows_of(p, same[0])

        def make_same(ins, out2):
            x2 = ins[0].reshape(-1, c)
            return fused.mul_rows, (x2, ins[1].reshape(-1, c)), (np.int64(1),), x2.shape[0]
        _emit(p, index, "mul[same]", list(same), c, make_same, p.values[same[0]].layout, axis)
        return True
    x_name, s, kind = ops
    c, h, w = p.values[x_name].shape

    def make_args(ins, out2):
        x2 = ins[0].reshape(-1, c)
        if kind == "const":
            return fused.mul_rows, (x2, s), (np.int64(x2.shape[0]),), x2.shape[0]
        hw = 1 if kind == "same" else h * w
        return fused.mul_rows, (x2, ins[1].reshape(-1, c)), (np.int64(hw),), x2.shape[0]
    _emit(p, index, f"mul[{kind}]", [x_name] + ([s] if kind != "const" else []), c, make_args)
    return True


def _concat_nhwc(p: Planner, node, attrs) -> bool:
    """A concat along channels of rank-3 activations, each listed once: the NHWC path (graph facts
    only, so that a requant deferred to it is sure to be consumed)."""
    shape = p.analysis.tensors[node.output].shape
    return (attrs["axis"] == 0 and len(shape) == 3 and len(set(node.inputs)) == len(node.inputs)
            and all(p.const(n) is None and p.analysis.tensors[n].bits <= 32 for n in node.inputs))


def defer_requant(p: Planner, index: int, node, attrs) -> bool:
    """A requant of an NHWC activation read only by a concat that takes the NHWC path: no step now;
    the concat applies it while copying (Planner.deferred)."""
    out, graph = node.output, p.graph
    if p.uses[out] != 1 or out in graph.outputs or p.values[node.inputs[0]].layout != NHWC:
        return False
    j = p.consumers[out][0]
    m = p.const(node.inputs[1]).astype(np.int64).reshape(-1)
    if graph.nodes[j].op != "concat" or not _concat_nhwc(p, graph.nodes[j], p.analysis.attrs[j]) or (
            m.size > 1 and attrs["axis"] != 0) or p.analysis.tensors[node.inputs[0]].bits > 32:
        return False
    c = p.analysis.tensors[out].shape[0]
    lim = (1 << (attrs["bits"] - 1)) - 1
    p.deferred[out] = (node.inputs[0], np.broadcast_to(m, (c,)).copy(), attrs["shift"], -lim, lim)
    return True


def _materialize(p: Planner, name: str) -> None:
    """A deferred requant whose concat does not take the NHWC path after all: its own step now."""
    src, mult, shift, lo, hi = p.deferred.pop(name)
    c = len(mult)
    ost = OutputStep(mult, shift, lo, hi, None, np.ones(c, np.int64), 0, OPEN_LO, OPEN_HI, name, ()).params()
    mb = -(-p.tuning.par_min_elements // (fused.BLOCK_ROWS * c))

    def bind(ins, out):
        x2, out2 = ins[0].reshape(-1, c), out.reshape(-1, c)
        args = (x2, mult, mult, ost, residual_none, out2, np.int64(0))
        return [p.pool.call(fused.copy_rows, args, -(-x2.shape[0] // fused.BLOCK_ROWS), mb)]
    p.add("requant", [src], name, p.spec_value(name, NHWC), bind)


def lower_concat(p: Planner, index: int, node, attrs) -> bool:
    """Concat along channels into an NHWC output, one kernel call per input (fused requant or copy),
    when every input is stored NHWC (or is a deferred requant of one); otherwise the deferred
    requants get their own steps and the concat takes the general path (a channel shuffle's concat
    of "c" tensors stays in "c": no conversions added)."""
    if not _concat_nhwc(p, node, attrs) or any(n not in p.deferred and p.values[n].layout != NHWC
                                               for n in node.inputs):
        for n in node.inputs:
            if n in p.deferred:
                _materialize(p, n)
        return False
    srcs, parts = [], []
    for n in node.inputs:
        c = p.analysis.tensors[n].shape[0]
        src, mult, shift, lo, hi = p.deferred.pop(n, None) or (p.in_layout(n, NHWC), np.ones(c, np.int64), 0,
                                                               OPEN_LO, OPEN_HI)
        ost = OutputStep(mult, shift, lo, hi, None, np.ones(c, np.int64), 0, OPEN_LO, OPEN_HI, n, ())
        srcs.append(src)
        parts.append((c, mult, ost.params()))
    total = p.analysis.tensors[node.output].shape[0]
    min_blocks = [-(-p.tuning.par_min_elements // (fused.BLOCK_ROWS * c)) for c, _, _ in parts]

    def bind(ins, out):
        out2, calls, c0 = out.reshape(-1, total), [], 0
        for x, (c, mult, ost), mb in zip(ins, parts, min_blocks):
            args = (x.reshape(-1, c), mult, mult, ost, residual_none, out2, np.int64(c0))
            calls.append(p.pool.call(fused.copy_rows, args, -(-out2.shape[0] // fused.BLOCK_ROWS), mb))
            c0 += c
        return calls
    fused_n = sum(1 for n in node.inputs if n not in srcs)
    p.add("concat[nhwc]" + (f"+{fused_n} requant" if fused_n else ""), srcs, node.output,
          p.spec_value(node.output, NHWC), bind)
    return True



CHAIN_OPS = ("requant", "lut", "relu", "clip")


def lower_chain(p: Planner, index: int, node) -> bool:
    """An element-wise node (requant, lut, relu, clip) that heads a chain of at least two the output
    step absorbs (requant -> lut, lut -> requant -> add, ...): one kernel (copy_rows) instead of one
    call per node; a lone node keeps its own vectorized kernel."""
    x = node.inputs[0]
    rows = rows_of(p, x)
    if rows is None or p.analysis.tensors[x].bits > 32 or p.const(x) is not None:
        return False
    c, axis = rows
    ostep = p.output_step(index, axis, const_residual=True, include_head=True, luts=True)
    if len(ostep.nodes) < 2 or ostep.nodes[0] != index:
        return False

    def make_args(ins, out2):
        x2 = ins[0].reshape(-1, c)
        return fused.copy_rows, (x2,), (np.int64(0),), x2.shape[0]
    _emit(p, index, "chain", [x], c, make_args, p.values[x].layout, axis, include_head=True)
    return True
