"""Lowering of the opset-2 vision ops (cvm.ops.vision) to the kernels of numba_kernels/vision.py.

resize2d keeps its input's layout (channels-last after a conv, planar otherwise); conv_transpose2d
reads and writes channels-last, like conv2d, and absorbs the requant -> relu/clip (-> residual add)
chain after it into its output step (plan.Planner.output_step)."""
from __future__ import annotations

import numpy as np

from ...ops import transposed
from ...ops.vision import LINEAR, axis_map, output_rows
from . import vision
from .layout import NHWC
from .lower_mac import NO_RESIDUAL
from .plan import Planner


def lower_resize(p: Planner, index, node, attrs):
    x_name = node.inputs[0]
    if p.values[x_name].layout not in ("c", NHWC):
        x_name = p.in_layout(x_name, NHWC)
    x = p.values[x_name]
    c, h, w = x.shape
    (oh, ow), mode, k = attrs["size"], attrs["mode"], attrs["frac_bits"]
    hmap = np.stack(axis_map(oh, h, attrs["coord_h"], mode, k))
    wmap = np.stack(axis_map(ow, w, attrs["coord_w"], mode, k))
    linear, shift = mode == LINEAR, 2 * k if mode == LINEAR else 0
    taps = 4 if linear else 1
    if x.layout == NHWC:
        out_value = p.spec_value(node.output, NHWC)
        min_rows = -(-p.tuning.resize_par_min_elements // (ow * c * taps))

        def bind(ins, out):
            return [p.pool.call(vision.resize_nhwc, (ins[0], out, hmap, wmap, shift, linear), out.shape[0] * oh,
                                min_rows)]
    else:
        out_value = p.spec_value(node.output)
        min_rows = -(-p.tuning.resize_par_min_elements // (ow * taps))

        def bind(ins, out):
            src, dst = ins[0].reshape(-1, h, w), out.reshape(-1, oh, ow)
            return [p.pool.call(vision.resize_planar, (src, dst, hmap, wmap, shift, linear), dst.shape[0] * oh,
                                min_rows)]
    p.add("resize2d", [x_name], node.output, out_value, bind)


def tap_lists(size: int, n_out: int, k: int, s: int, d: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output position p of one axis, the (tap, input) pairs landing on it, as CSR arrays:
    ptr (n_out + 1,) and pairs (count, 2) int64; built from transposed.axis_pieces (no more pairs
    than the MACs the node pays for)."""
    outs, taps, srcs = [], [], []
    for pc in transposed.axis_pieces(size, n_out, k, s, d, pad):
        run = np.arange(pc.out.start, pc.out.stop, pc.out.step, dtype=np.int64)
        outs.append(run)
        if pc.tap_major:
            taps.append(np.full(len(run), pc.tap, np.int64))
            srcs.append(np.arange(pc.src.start, pc.src.stop, dtype=np.int64))
        else:
            taps.append(np.arange(pc.tap.start, pc.tap.stop, dtype=np.int64))
            srcs.append(np.full(len(run), pc.src, np.int64))
    if not outs:
        return np.zeros(n_out + 1, np.int64), np.zeros((0, 2), np.int64)
    out, tap, src = np.concatenate(outs), np.concatenate(taps), np.concatenate(srcs)
    order = np.argsort(out, kind="stable")
    ptr = np.zeros(n_out + 1, np.int64)
    np.cumsum(np.bincount(out, minlength=n_out), out=ptr[1:])
    return ptr, np.ascontiguousarray(np.stack([tap[order], src[order]], axis=1))


def lower_conv_transpose(p: Planner, index, node, attrs):
    x_name = p.in_layout(node.inputs[0], NHWC)
    c, h, wd = p.values[x_name].shape
    w = p.const(node.inputs[1]).astype(np.int64)
    _, og, kh, kw = w.shape
    g = attrs["groups"]
    (sh, sw), (dh, dw), (pt, pl, _, _) = attrs["strides"], attrs["dilations"], attrs["pads"]
    _, oh, ow = p.analysis.tensors[node.output].shape
    hptr, hpair = tap_lists(h, oh, kh, sh, dh, pt)
    wptr, wpair = tap_lists(wd, ow, kw, sw, dw, pl)
    wk = np.ascontiguousarray(w.reshape(g, c // g, og, kh, kw).transpose(3, 4, 0, 1, 2))  # (kh, kw, g, cg, og)
    bias = np.zeros(g * og, np.int64) if len(node.inputs) < 3 else p.const(node.inputs[2]).astype(np.int64)
    ostep = p.output_step(index, 0)
    tail = (ostep.mult.reshape(g, og), ostep.mult2.reshape(g, og), ostep.params())
    fused = "+".join(p.graph.nodes[j].op for j in ostep.nodes)
    label = "conv_transpose2d" + ("+" + fused if fused else "")
    macs_per_row = max(1, output_rows(w, g).size * ow)  # a bound per output row (pairs vary by row)
    min_rows = -(-p.tuning.transpose_par_min_macs // macs_per_row)
    out_value = p.spec_value(ostep.output, NHWC)

    def bind(ins, out):
        out2 = out.reshape(-1, g * og)
        res = ins[1].reshape(out2.shape) if len(ins) > 1 else NO_RESIDUAL
        args = (ins[0], wk, bias.reshape(g, og), *tail, res, out2, hptr, hpair, wptr, wpair, oh, ow)
        return [p.pool.call(vision.conv_transpose_nhwc, args, out.shape[0] * oh, min_rows)]

    def emit():
        inputs = [x_name] + ([p.in_layout(ostep.residual, NHWC)] if ostep.residual is not None else [])
        p.add(label, inputs, ostep.output, out_value, bind)
    p.fuse(index, ostep.nodes, emit)
