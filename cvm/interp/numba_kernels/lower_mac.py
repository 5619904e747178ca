"""conv2d and dense -> one GEMM kernel call with the fused output step.

Path per node, from the proven input interval and the actual weights and bias:
  "vnni": int8 input, int8 weights, and bias' + any partial sum of (a + 128) * w fits int32, and the
          padded input copy and packed weights are paid for (vnni_buffers_paid);
  "i32":  every partial sum (bias first, or not at all) fits int32: int16 or int32 operands;
  "i64":  direct convolution with int64 accumulation (any order is then exact);
  "depthwise": groups = channels with one output each, int32 proven as for "i32".
"""
from __future__ import annotations

import numpy as np

from . import conv
from .layout import FLAT, NHWC, Value
from .plan import Planner

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
PAR_MIN_MACS = 1 << 24  # per thread: below this, handing work to a thread costs more than it saves
PAR_MIN_BYTES = 1 << 20  # the same for the uint8 conversion of a VNNI input
VNNI_PAD_FACTOR = 4  # VNNI padded uint8 input: bytes per sample per paid element (vnni_buffers_paid)
VNNI_PACK_FACTOR = 32  # VNNI packed weights: bytes per paid element of one sample (vnni_buffers_paid)
NO_RESIDUAL = np.zeros((1, 1), np.int16)  # passed when the output step has no residual add


def partial_sums_fit_int32(rows: np.ndarray, xlo: int, xhi: int, start: np.ndarray) -> bool:
    """Every start-or-0 + sum over any subset of k of rows[o, k] * x_k, x_k in [xlo, xhi] (which
    contains 0), fits int32. Exact Python integers."""
    pos = np.where(rows > 0, rows, 0).sum(axis=1)
    neg = np.where(rows < 0, rows, 0).sum(axis=1)
    for p, n, s in zip(pos.tolist(), neg.tolist(), start.tolist()):
        if min(s, 0) + p * xlo + n * xhi < INT32_MIN or max(s, 0) + p * xhi + n * xlo > INT32_MAX:
            return False
    return True


def vnni_buffers_paid(geom: dict, g: int, og: int, cg: int) -> bool:
    """Whether the VNNI path's own buffers are paid for. Per sample the node pays (gas) for
    P = E(in) + E(out) + MACs: every output element and every multiply-accumulate (taps in the
    padding included), the input having been paid by the node that wrote it. The VNNI path needs two
    buffers that the other paths do not:
      - the input copied as uint8 with its padding, (H + pt + pb) * (W + pl + pr) * C bytes per
        sample, for every sample of the batch; pads go up to 2^20 a side, so a 1x1 conv with a
        one-pixel output would copy GiBs per sample for ~100 gas. At most VNNI_PAD_FACTOR * P.
      - the weights packed in 32-channel panels of runs rounded up to 4 bytes, zero-filled (up to
        128 bytes per weight: one output channel, runs of one byte), held as long as the plan.
        At most VNNI_PACK_FACTOR * P (an int8 dense layer with one output needs 16 to 32).
    Otherwise the node takes the i32 / i64 / depthwise kernels, which read the input in place and
    skip the taps in the padding: their buffers are proportional to the output rows times k."""
    from . import vnni
    kh, kw, c = geom["kh"], geom["kw"], geom["c"]
    padded = (geom["h"] + geom["pt"] + geom["pb"]) * (geom["w"] + geom["pl"] + geom["pr"]) * c
    paid = geom["h"] * geom["w"] * c + geom["oh"] * geom["ow"] * g * og * (1 + kh * kw * cg)
    packed = vnni.packed_weight_bytes(g, og, kh, kw, geom["dw"], cg)
    return padded <= VNNI_PAD_FACTOR * paid and packed <= VNNI_PACK_FACTOR * paid


def choose_path(rows: np.ndarray, bias: np.ndarray, x: Value, isa: str, vnni_paid: bool = True) -> str:
    if (isa == "vnni" and vnni_paid and x.dtype == np.int8 and rows.min() >= -128 and rows.max() <= 127
            and partial_sums_fit_int32(rows, 0, 255, bias - 128 * rows.sum(axis=1))):
        return "vnni"
    if partial_sums_fit_int32(rows, min(x.lo, 0), max(x.hi, 0), bias):
        return "i32"
    return "i64"


def _gemm_step(p: Planner, index: int, x_name: str, w: np.ndarray, bias, geom: dict, channel_axis: int,
               out_layout: str, label: str):
    """w: (groups, og, kh, kw, cg) in the kernels' K order (u, v, c); geom: the stored input seen as
    (N, h, w, c), and kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow."""
    gm = geom
    g, og, kh, kw, cg = w.shape
    k = kh * kw * cg
    x = p.values[x_name]
    rows = w.reshape(g * og, k).astype(np.int64)
    bias = np.zeros(g * og, np.int64) if bias is None else bias.astype(np.int64)
    path = choose_path(rows, bias, x, p.isa, p.isa == "vnni" and vnni_buffers_paid(gm, g, og, cg))
    if g > 1 and cg == 1 and og == 1 and partial_sums_fit_int32(rows, min(x.lo, 0), max(x.hi, 0), bias):
        path = "depthwise"
    ostep = p.output_step(index, channel_axis)
    out_value = p.spec_value(ostep.output, out_layout)
    tail = (ostep.mult.reshape(g, og), ostep.mult2.reshape(g, og), ostep.params())
    x4shape = (gm["h"], gm["w"], gm["c"])
    if path == "vnni":
        from . import vnni
        hp, wp = gm["h"] + gm["pt"] + gm["pb"], gm["w"] + gm["pl"] + gm["pr"]
        geo = vnni.geometry(kh, kw, gm["sh"], gm["sw"], gm["dh"], gm["dw"], g, cg, og, gm["oh"], gm["ow"], hp, wp)
        c = g * cg
        nv = vnni.panels(og)
        b = np.zeros((g, nv * 16), np.int64)
        b[:, :og] = (bias - 128 * rows.sum(axis=1)).reshape(g, og)
        args = (vnni.pack_weights(w, geo), b.astype(np.int32), *tail)
        block_rows, kern = vnni.BLOCK_ROWS, vnni.conv_vnni
        min_pad_rows = -(-PAR_MIN_BYTES // (wp * c))

        scratch = hp * wp * c

        def first(x4):
            n = x4.shape[0]
            buf = np.empty(n * hp * wp * c + vnni.SLACK, np.uint8)
            xp = buf[:n * hp * wp * c].reshape(n, hp, wp * c)
            return xp.reshape(n, hp, wp, c), [p.pool.call(vnni.to_padded_u8, (x4.reshape(n, gm["h"], -1), xp, gm["pt"],
                                                                             gm["pl"] * c), n * hp, min_pad_rows)]
    else:
        geo = np.array([kh, kw, gm["sh"], gm["sw"], gm["dh"], gm["dw"], gm["pt"], gm["pl"], g, cg, og, k,
                        gm["oh"], gm["ow"]], np.int64)
        if path == "depthwise":
            args = (np.ascontiguousarray(w.reshape(g, kh, kw).transpose(1, 2, 0)).astype(np.int32),
                    bias.astype(np.int32), tail[0].reshape(1, g), tail[1].reshape(1, g), tail[2])
            kern = conv.conv_depthwise
        elif path == "i32":
            wide = x.dtype.itemsize > 2 or rows.min() < -32768 or rows.max() > 32767
            weights = w.reshape(g, og, k).astype(np.int32 if wide else np.int16)
            args = (weights, bias.reshape(g, og).astype(np.int32), *tail)
            kern = conv.conv_i32
        else:
            args = (w.astype(np.int64), bias.reshape(g, og), *tail)
            kern = conv.conv_i64
        block_rows, scratch = conv.BLOCK_ROWS, 0

        def first(x4):
            return x4, []
    min_blocks = -(-PAR_MIN_MACS // (block_rows * g * og * k))
    fused = "+".join(p.graph.nodes[j].op for j in ostep.nodes)
    label = f"{label}[{path}]" + ("+" + fused if fused else "")

    def emit():
        inputs = [x_name]
        if ostep.residual is not None:
            inputs.append(p.in_layout(ostep.residual, out_layout))

        def bind(ins, out):
            src, calls = first(ins[0].reshape((-1,) + x4shape))
            out2 = out.reshape(-1, g * og)
            res = ins[1].reshape(out2.shape) if len(ins) > 1 else NO_RESIDUAL
            blocks = -(-out2.shape[0] // block_rows)
            return calls + [p.pool.call(kern, (src, *args, res, out2, geo), blocks, min_blocks)]
        p.add(label, inputs, ostep.output, out_value, bind, scratch=scratch)
    p.at(max((index,) + ostep.nodes), emit)
    return ostep.nodes


def lower_conv(p: Planner, index, node, attrs):
    x_name = p.in_layout(node.inputs[0], NHWC)
    w = p.const(node.inputs[1]).astype(np.int64)
    bias = p.const(node.inputs[2]) if len(node.inputs) == 3 else None
    o, cg, kh, kw = w.shape
    g = attrs["groups"]
    wk = np.ascontiguousarray(w.reshape(g, o // g, cg, kh, kw).transpose(0, 1, 3, 4, 2))
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs["strides"], attrs["dilations"], attrs["pads"]
    c, h, wd = p.values[x_name].shape
    _, oh, ow = p.analysis.tensors[node.output].shape
    geom = dict(h=h, w=wd, c=c, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, pb=pb, pr=pr, oh=oh, ow=ow)
    return _gemm_step(p, index, x_name, wk, bias, geom, 0, NHWC, "conv2d")


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
    geom = dict(h=1, w=1, c=k, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pt=0, pl=0, pb=0, pr=0, oh=1, ow=1)
    return _gemm_step(p, index, x_name, w.reshape(1, o, 1, 1, k), bias, geom, len(x.shape) - 1, "c", "dense")
