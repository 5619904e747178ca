"""conv2d and dense -> one GEMM kernel call with the fused output step.

Path per node, from the proven input interval and the actual weights and bias:
  "vnni": int8 input, int8 weights, and bias' + any partial sum of (a + 128) * w fits int32;
  "i32":  every partial sum (bias first, or not at all) fits int32: int16 or int32 operands;
  "i64":  direct convolution with int64 accumulation (any order is then exact).
"""
from __future__ import annotations

import numpy as np

from . import conv
from .layout import FLAT, NHWC, Value
from .plan import Planner

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
PAR_MIN_MACS = 1 << 22  # per thread: below this, handing work to a thread costs more than it saves


def partial_sums_fit_int32(rows: np.ndarray, xlo: int, xhi: int, start: np.ndarray) -> bool:
    """Every start-or-0 + sum over any subset of k of rows[o, k] * x_k, x_k in [xlo, xhi] (which
    contains 0), fits int32. Exact Python integers."""
    pos = np.where(rows > 0, rows, 0).sum(axis=1)
    neg = np.where(rows < 0, rows, 0).sum(axis=1)
    for p, n, s in zip(pos.tolist(), neg.tolist(), start.tolist()):
        if min(s, 0) + p * xlo + n * xhi < INT32_MIN or max(s, 0) + p * xhi + n * xlo > INT32_MAX:
            return False
    return True


def choose_path(rows: np.ndarray, bias: np.ndarray, x: Value, isa: str) -> str:
    if (isa == "vnni" and x.dtype == np.int8 and rows.min() >= -128 and rows.max() <= 127
            and partial_sums_fit_int32(rows, 0, 255, bias - 128 * rows.sum(axis=1))):
        return "vnni"
    if partial_sums_fit_int32(rows, min(x.lo, 0), max(x.hi, 0), bias):
        return "i32"
    return "i64"


def _gemm_step(p: Planner, index: int, x_name: str, x4shape, w: np.ndarray, bias, geo: list, channel_axis: int,
               out_layout: str, label: str):
    """w: (groups, og, kh, kw, cg) in the kernels' K order (u, v, c); x4shape(batch) is the stored
    input seen as (N, H, W, C); geo: kh, kw, sh, sw, dh, dw, pt, pl (conv.py adds the rest)."""
    node = p.graph.nodes[index]
    g, og, kh, kw, cg = w.shape
    k = kh * kw * cg
    x = p.values[x_name]
    rows = w.reshape(g * og, k).astype(np.int64)
    bias = np.zeros(g * og, np.int64) if bias is None else bias.astype(np.int64)
    path = choose_path(rows, bias, x, p.isa)
    ostep = p.output_step(index, channel_axis)
    out_value = p.spec_value(ostep.output, out_layout)
    info = p.analysis.tensors[ostep.output]
    lo, hi = max(ostep.lo, info.lo), min(ostep.hi, info.hi)  # proven anyway: keeps the bounds in int64
    mult = ostep.mult.reshape(g, og)
    if path == "vnni":
        from . import vnni
        kp = (k + 3) // 4 * 4
        nv = (og + 15) // 16
        weights = vnni.pack_weights(w.reshape(g, og, k), kp)
        b = np.zeros((g, nv * 16), np.int64)
        b[:, :og] = (bias - 128 * rows.sum(axis=1)).reshape(g, og)
        args = (weights, b.astype(np.int32), mult)
        kern = vnni.conv_vnni
    elif path == "i32":
        wide = x.dtype.itemsize > 2 or rows.min() < -32768 or rows.max() > 32767
        weights = w.reshape(g, og, k).astype(np.int32 if wide else np.int16)
        args = (weights, bias.reshape(g, og).astype(np.int32), mult)
        kern = conv.conv_i32
    else:
        args = (w.astype(np.int64), bias.reshape(g, og), mult)
        kern = conv.conv_i64
    out_shape = p.analysis.tensors[node.output].shape
    oh, ow = (out_shape[1], out_shape[2]) if node.op == "conv2d" else (1, 1)
    geo = np.array(geo + [g, cg, og, k, oh, ow], np.int64)
    tail = (ostep.rnd, ostep.shift, lo, hi)
    min_blocks = -(-PAR_MIN_MACS // (conv.BLOCK_ROWS * g * og * k))

    def bind(ins, out):
        x4 = ins[0].reshape(x4shape(ins[0].shape[0]))
        out2 = out.reshape(-1, g * og)
        blocks = (out2.shape[0] + conv.BLOCK_ROWS - 1) // conv.BLOCK_ROWS
        return [p.pool.call(kern, (x4, *args, *tail, out2, geo), blocks, min_blocks)]

    p.add(f"{label}[{path}]" + ("+" + "+".join(p.graph.nodes[j].op for j in ostep.nodes) if ostep.nodes else ""),
          [x_name], ostep.output, out_value, bind)
    return ostep.nodes


def lower_conv(p: Planner, index, node, attrs):
    x_name = p.in_layout(node.inputs[0], NHWC)
    w = p.const(node.inputs[1]).astype(np.int64)
    bias = p.const(node.inputs[2]) if len(node.inputs) == 3 else None
    o, cg, kh, kw = w.shape
    g = attrs["groups"]
    wk = w.reshape(g, o // g, cg, kh, kw).transpose(0, 1, 3, 4, 2)
    (sh, sw), (dh, dw), (pt, pl, _, _) = attrs["strides"], attrs["dilations"], attrs["pads"]
    c, h, wd = p.values[x_name].shape
    return _gemm_step(p, index, x_name, lambda n: (n, h, wd, c), np.ascontiguousarray(wk), bias,
                      [kh, kw, sh, sw, dh, dw, pt, pl], 0, NHWC, "conv2d")


def lower_dense(p: Planner, index, node, attrs):
    x_name = node.inputs[0]
    x = p.values[x_name]
    if x.layout == NHWC:
        x_name = p.in_layout(x_name, "c")
        x = p.values[x_name]
    w = p.const(node.inputs[1]).astype(np.int64)
    bias = p.const(node.inputs[2]) if len(node.inputs) == 3 else None
    o, k = w.shape
    if x.layout == FLAT:
        c, h, wd = x.chw
        w = w.reshape(o, c, h, wd).transpose(0, 2, 3, 1).reshape(o, k)
    return _gemm_step(p, index, x_name, lambda n: (-1, 1, 1, k), w.reshape(1, o, 1, 1, k), bias,
                      [1, 1, 1, 1, 1, 1, 0, 0], len(x.shape) - 1, "c", "dense")
