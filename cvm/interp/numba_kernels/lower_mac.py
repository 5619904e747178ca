"""conv2d and dense -> one GEMM kernel call with the fused output step.

Path per node, from the proven input interval and the actual weights and bias:
  "vnni": int8 input (or one proven in 0..255), int8 weights, and bias' + any partial sum of (a + z) * w
          fits int32 (z = vnni_offset), and the
          padded input copy and packed weights are paid for (vnni_buffers_paid);
  "i32":  every partial sum (bias first, or not at all) fits int32: int16 or int32 operands;
  "i64":  direct convolution with int64 accumulation (any order is then exact);
  "depthwise": groups = channels with one output each, int32 proven as for "i32";
  "dwvnni": the same on AVX-512 VNNI (dw_vnni.py), int8 weights, when the int32 bound holds for
          x + z in 0..255 (as "vnni") and its buffers are paid (dw_vnni_paid);
  "vnni16": an "i32" dense layer of int16 activations and int16-range weights on AVX-512 VNNI
          (dense16.py: vpdpwssd, the same int32 proof; a wide recurrent cell's dense layers).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from . import conv, pad_fuse, variants
from .calls import call
from ...arith import bias_sides, channel_bounds, fits_int32, row_sums
from .kargs import GEO, pack
from .layout import FLAT, NHWC, Value
from .pad_fuse import vnni_offset
from .plan import Planner
from .tuning import DEFAULT_TUNING, Tuning

NO_RESIDUAL = np.zeros((1, 1), np.int16)  # passed when the output step has no residual add


def residual(ostep, ins: list, first: int, out2: np.ndarray) -> np.ndarray:
    """The output step's residual argument: the residual tensor (ins[first]) shaped like out2 (rows,
    channels), or its constant per channel as a single row (step.out_rows adds it to every row), or
    a dummy."""
    if ostep.residual_const is not None:
        return ostep.residual_const.reshape(1, -1)
    return ins[first].reshape(out2.shape) if len(ins) > first else NO_RESIDUAL


def partial_sums_fit_int32(rows: np.ndarray, xlo: int, xhi: int, start: np.ndarray) -> bool:
    """Every start-or-0 + sum over any subset of k of rows[o, k] * x_k, x_k in [xlo, xhi] (which
    contains 0), fits int32: the verifier's MAC bound (cvm.arith) with `start` as the bias."""
    lo, hi = channel_bounds(row_sums(rows), (xlo, xhi), bias_sides(start))
    return fits_int32(int(lo.min()), int(hi.max()))


def vnni_buffers_paid(geom: dict, g: int, og: int, cg: int, tuning: Tuning = DEFAULT_TUNING) -> bool:
    """Whether the VNNI path's own buffers are paid for. Per sample the node pays (gas) for
    P = E(in) + E(out) + MACs: every output element and every multiply-accumulate (taps in the
    padding included), the input having been paid by the node that wrote it. The VNNI path needs two
    buffers that the other paths do not:
      - the input copied as uint8 with its padding, (H + pt + pb) * (W + pl + pr) * C bytes per
        sample, for every sample of the batch; pads go up to 2^20 a side, so a 1x1 conv with a
        one-pixel output would copy GiBs per sample for ~100 gas. At most tuning.vnni_pad_factor * P.
      - the weights packed in 32-channel panels of runs rounded up to 4 bytes, zero-filled (up to
        128 bytes per weight: one output channel, runs of one byte), held as long as the plan.
        At most tuning.vnni_pack_factor * P (an int8 dense layer with one output needs 16 to 32).
    Otherwise the node takes the i32 / i64 / depthwise kernels, which read the input in place and
    skip the taps in the padding: their buffers are proportional to the output rows times k."""
    from . import vnni
    kh, kw, c = geom["kh"], geom["kw"], geom["c"]
    padded = (geom["h"] + geom["pt"] + geom["pb"]) * (geom["w"] + geom["pl"] + geom["pr"]) * c
    paid = geom["h"] * geom["w"] * c + geom["oh"] * geom["ow"] * g * og * (1 + kh * kw * cg)
    packed = vnni.packed_weight_bytes(g, og, kh, kw, geom["dw"], cg)
    return padded <= tuning.vnni_pad_factor * paid and packed <= tuning.vnni_pack_factor * paid


def choose_path(rows: np.ndarray, bias: np.ndarray, x: Value, isa: str, vnni_paid: bool = True) -> str:
    z = vnni_offset(x)
    if (isa == "vnni" and vnni_paid and z is not None and rows.min() >= -128 and rows.max() <= 127
            and partial_sums_fit_int32(rows, 0, 255, bias - z * rows.sum(axis=1))):
        return "vnni"
    if partial_sums_fit_int32(rows, min(x.lo, 0), max(x.hi, 0), bias):
        return "i32"
    return "i64"


@dataclass(frozen=True)
class Gemm:
    """What one MAC node's path needs at planning time: w (groups, og, kh, kw, cg) in the kernels' K
    order (u, v, c), its rows (groups * og, k) and bias as int64, the geometry `gm` (the stored input
    seen as (N, h, w, c), and kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow), the input's proven
    Value, and `tail`: the output step's (mult, mult2, params); `res`: the residual tensor's proven
    Value where the step adds one (vnni_direct's residual stage is narrowed on its range)."""
    w: np.ndarray
    rows: np.ndarray
    bias: np.ndarray
    gm: dict
    x: Value
    tail: tuple
    res: Value | None = None
    x_name: str = ""  # the input tensor (pad_fuse asks its producer to write it padded)

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return self.w.shape

    def portable_geo(self) -> np.ndarray:
        g, og, kh, kw, cg = self.shape
        gm = self.gm
        return pack(GEO, kh=kh, kw=kw, sh=gm["sh"], sw=gm["sw"], dh=gm["dh"], dw=gm["dw"], pt=gm["pt"], pl=gm["pl"],
                    groups=g, cg=cg, og=og, k=kh * kw * cg, oh=gm["oh"], ow=gm["ow"])


def _in_place(x4):
    """The portable kernels read the stored input as it is (no copy, no calls before)."""
    return x4, []


@dataclass(frozen=True)
class KernelCall:
    """A path's kernel with its prepared arguments by name (`args`: the kernel's parameters between its
    input and its residual): the kernel runs over blocks of `block_rows` output rows as kern(src,
    **args, res, out, geo, b0, b1); `first(x4)` gives src from the stored input and the calls that must
    run before (VNNI: the padded uint8 copy); pixels: the output rows it runs over where not its output
    buffer's (a padded output). variants.VARIANTS' "prepare" and "bind" rows replace one by another."""
    kern: Callable
    args: dict
    geo: np.ndarray
    block_rows: int
    scratch: int = 0
    first: Callable = _in_place
    pixels: int = 0


def _prepare_vnni(p: Planner, m: Gemm) -> KernelCall:
    from . import vnni
    g, og, kh, kw, cg = m.shape
    gm, c = m.gm, g * cg
    hp, wp = gm["h"] + gm["pt"] + gm["pb"], gm["w"] + gm["pl"] + gm["pr"]
    geo = vnni.geometry(kh, kw, gm["sh"], gm["sw"], gm["dh"], gm["dw"], g, cg, og, gm["oh"], gm["ow"], hp, wp)
    b = np.zeros((g, vnni.panels(og) * 16), np.int64)
    z = vnni_offset(m.x)
    b[:, :og] = (m.bias - z * m.rows.sum(axis=1)).reshape(g, og)
    args = dict(wp=vnni.pack_weights(m.w, geo), bias=b.astype(np.int32), **_tail(m))
    unpadded, gemv_rows = dict(gm, pt=0, pl=0, pb=0, pr=0), p.tuning.gemv_max_rows
    if pad_fuse.reads_in_place(m.x.dtype, gm, geo, gemv_rows) or pad_fuse.request(
            p, m.x_name, gm, pad_fuse.reads_in_place(m.x.dtype, unpadded, geo, gemv_rows)):
        return KernelCall(vnni.conv_vnni, args, geo, vnni.BLOCK_ROWS)
    first = _padded_copy(p, gm, c, z, vnni.SLACK, lambda buf, xp: xp.reshape(xp.shape[0], hp, wp, c))
    return KernelCall(vnni.conv_vnni, args, geo, vnni.BLOCK_ROWS, hp * wp * c, first)


def _padded_copy(p: Planner, gm: dict, c: int, z: int, slack: int, src: Callable) -> Callable:
    """first(x4) of the VNNI kernels that read a padded uint8 copy of the input (vnni.to_padded_u8, x + z):
    the copy into a buffer of `slack` bytes more, split between threads when worth it; src(buffer, its
    (N, HP, WP*C) view) gives what the kernel reads."""
    from . import vnni
    hp, wp = gm["h"] + gm["pt"] + gm["pb"], gm["w"] + gm["pl"] + gm["pr"]
    min_pad_rows = -(-p.tuning.par_min_pad_bytes // (wp * c))

    def first(x4):
        n = x4.shape[0]
        buf = np.empty(n * hp * wp * c + slack, np.uint8)
        xp = buf[:n * hp * wp * c].reshape(n, hp, wp * c)
        pad = p.pool.call(vnni.to_padded_u8, (x4.reshape(n, gm["h"], -1), xp, gm["pt"], gm["pl"] * c, z), n * hp,
                          min_pad_rows)
        return src(buf, xp), [pad]
    return first


def _prepare_depthwise(p: Planner, m: Gemm) -> KernelCall:
    g, _, kh, kw, _ = m.shape
    mult, mult2, params = m.tail
    w = np.ascontiguousarray(m.w.reshape(g, kh, kw).transpose(1, 2, 0)).astype(np.int32)
    ow = m.gm["ow"]
    if m.gm["sw"] == 1 and g <= p.tuning.dw_rows_max_channels and kh * kw * ow * g <= p.tuning.dw_rows_max_values:
        # weights and bias repeated along one output row: at most dw_rows_max_values (2^16: 256 KiB), and
        # never more than one output row's multiply-accumulates per sample, which the node pays
        wt = np.ascontiguousarray(np.tile(w[:, :, None, :], (1, 1, ow, 1)).reshape(kh, kw, ow * g))
        args = dict(wt=wt, bias=np.tile(m.bias.astype(np.int32), ow), mult=mult.reshape(1, g),
                    mult2=mult2.reshape(1, g), ost=params)
        return KernelCall(conv.conv_depthwise_rows, args, m.portable_geo(), ow)
    args = dict(w=w, bias=m.bias.astype(np.int32), mult=mult.reshape(1, g), mult2=mult2.reshape(1, g), ost=params)
    return KernelCall(conv.conv_depthwise, args, m.portable_geo(), conv.BLOCK_ROWS)


def dw_vnni_paid(geom: dict, c: int, tuning: Tuning = DEFAULT_TUNING) -> bool:
    """The "dwvnni" path's buffers are paid for as the VNNI path's are (vnni_buffers_paid): the padded
    uint8 input (the same copy, at most tuning.vnni_pad_factor bytes per paid element); one output row's
    tap quads (4 * ceil(kh/4) bytes per padded column and channel rounded up to 16, per thread) and the
    weights (4 * ceil(kh/4) * kw per channel rounded up to 16), each at most tuning.vnni_pack_factor."""
    kh, kw, nq, cp = geom["kh"], geom["kw"], (geom["kh"] + 3) // 4, (c + 15) // 16 * 16
    wp = geom["w"] + geom["pl"] + geom["pr"]
    padded = (geom["h"] + geom["pt"] + geom["pb"]) * wp * c
    paid = geom["h"] * geom["w"] * c + geom["oh"] * geom["ow"] * c * (1 + kh * kw)
    quads = 4 * (nq * wp + 4 * geom["sw"]) * cp
    return padded <= tuning.vnni_pad_factor * paid and max(quads, 4 * nq * kw * cp) <= tuning.vnni_pack_factor * paid


def _prepare_dw_vnni(p: Planner, m: Gemm) -> KernelCall:
    from . import dw_vnni
    from .kargs import DGEO
    g, _, kh, kw, _ = m.shape
    gm = m.gm
    hp, wp, nq = gm["h"] + gm["pt"] + gm["pb"], gm["w"] + gm["pl"] + gm["pr"], (kh + 3) // 4
    cp = (g + 15) // 16 * 16
    z = vnni_offset(m.x)
    taps = np.zeros((4 * nq, kw, cp), np.int8)  # (u, v, channel)
    taps[:kh, :, :g] = m.w.reshape(g, kh, kw).transpose(1, 2, 0)
    wq = np.ascontiguousarray(taps.reshape(nq, 4, kw, cp).transpose(0, 2, 3, 1)).view(np.int32).reshape(nq * kw, cp)
    bias = np.zeros(cp, np.int32)
    bias[:g] = m.bias - z * m.rows.sum(axis=1)
    mult, mult2, params = m.tail
    geo = pack(DGEO, kh=kh, kw=kw, sh=gm["sh"], sw=gm["sw"], dh=gm["dh"], dw=gm["dw"], oh=gm["oh"], ow=gm["ow"],
               hp=hp, wp=wp, c=g, nq=nq)
    args = dict(wq=wq, bias=bias, mult=mult.reshape(1, g), mult2=mult2.reshape(1, g), ost=params)
    first = _padded_copy(p, gm, g, z, dw_vnni.SLACK, lambda buf, xp: buf)
    return KernelCall(dw_vnni.conv_dw_vnni, args, geo, gm["ow"], hp * wp * g + dw_vnni.SLACK, first)


def _prepare_i32(p: Planner, m: Gemm) -> KernelCall:
    g, og, kh, kw, cg = m.shape
    wide = m.x.dtype.itemsize > 2 or m.rows.min() < -32768 or m.rows.max() > 32767
    weights = m.w.reshape(g, og, kh * kw * cg).astype(np.int32 if wide else np.int16)
    args = dict(w=weights, bias=m.bias.reshape(g, og).astype(np.int32), **_tail(m))
    return KernelCall(conv.conv_i32, args, m.portable_geo(), conv.BLOCK_ROWS)


def _prepare_i64(p: Planner, m: Gemm) -> KernelCall:
    g, og = m.shape[:2]
    return KernelCall(conv.conv_i64, dict(w=m.w.astype(np.int64), bias=m.bias.reshape(g, og), **_tail(m)),
                      m.portable_geo(), conv.BLOCK_ROWS)


def _prepare_vnni16(p: Planner, m: Gemm) -> KernelCall:
    from . import dense16
    og, k = m.rows.shape
    wp, last = dense16.pack_weights(m.rows)
    bias = np.zeros(len(last), np.int32)
    bias[:og] = m.bias
    mult, mult2, params = m.tail
    args = dict(wp=wp, last=last, bias=bias, mult=mult[0], mult2=mult2[0], ost=params)
    if m.x.dtype == np.int16:
        return KernelCall(dense16.dense_vnni16, args, m.portable_geo(), dense16.BLOCK_ROWS,
                          first=lambda x4: (x4.reshape(-1, k), []))

    def widened(x4):  # an int8 input: copied to int16 before each run
        x2 = x4.reshape(-1, k)
        buf = np.empty(x2.shape, np.int16)
        return buf, [call(dense16.widen_rows, x2, buf)]
    return KernelCall(dense16.dense_vnni16, args, m.portable_geo(), dense16.BLOCK_ROWS, 2 * int(np.prod(m.x.shape)),
                      widened)


def _tail(m: Gemm) -> dict:
    """The output step's arguments of the kernels that take them as they are."""
    mult, mult2, params = m.tail
    return dict(mult=mult, mult2=mult2, ost=params)


PREPARE = {"vnni": _prepare_vnni, "depthwise": _prepare_depthwise, "dwvnni": _prepare_dw_vnni, "i32": _prepare_i32,
           "i64": _prepare_i64, "vnni16": _prepare_vnni16}


def _path(p: Planner, m: Gemm) -> str:
    g, og, _, _, cg = m.shape
    x = m.x
    path = choose_path(m.rows, m.bias, x, p.isa, p.isa == "vnni" and vnni_buffers_paid(m.gm, g, og, cg, p.tuning))
    if path == "i32" and p.isa == "vnni":
        from . import dense16
        path = "vnni16" if dense16.eligible(m.rows, x.dtype, g, m.gm) else path
    if g > 1 and cg == 1 and og == 1 and partial_sums_fit_int32(m.rows, min(x.lo, 0), max(x.hi, 0), m.bias):
        path = "depthwise"
        z = vnni_offset(x)
        if (p.isa == "vnni" and z is not None and m.rows.min() >= -128 and m.rows.max() <= 127
                and dw_vnni_paid(m.gm, g, p.tuning) and partial_sums_fit_int32(m.rows, 0, 255, m.bias - z * m.rows.sum(axis=1))):
            path = "dwvnni"
    return path


def merge_unsplit(calls: list) -> list:
    """The VNNI path's two calls (padded copy, GEMM) as one when neither is split between threads."""
    from . import vnni
    if len(calls) == 2 and calls[0].fn is vnni.to_padded_u8 and calls[1].fn is vnni.conv_vnni:
        a = calls[0].args
        return [call(vnni.padded_conv_vnni, x=a.x, xp3=a.xp, pt=a.pt, pl=a.pl, z=a.z, r0=a.r0, r1=a.r1,
                     **calls[1].args._asdict())]
    return calls


def requant_residual(path: str, geom: dict, gemv_max_rows: int) -> bool:
    """Whether the output step may requantize its residual itself (plan.Planner.residual_requant):
    on the "vnni" path (conv_vnni's out_rows reads OST's rmul..rhi), not for a conv of at most
    Tuning.gemv_max_rows pixels a sample (the whole-plan runner's one-pixel twin), and not on the
    portable paths (the gas schedule's reference timing keeps its steps)."""
    return path == "vnni" and geom["oh"] * geom["ow"] > gemv_max_rows


def _gemm_step(p: Planner, index: int, x_name: str, w: np.ndarray, bias, geom: dict, channel_axis: int,
               out_layout: str, label: str):
    """One MAC node and the output step fused after it: choose the path, prepare its kernel call
    (PREPARE), and emit it once the last fused node is reached."""
    g, og, kh, kw, cg = w.shape
    rows = w.reshape(g * og, kh * kw * cg).astype(np.int64)
    bias = np.zeros(g * og, np.int64) if bias is None else bias.astype(np.int64)
    m = Gemm(w, rows, bias, geom, p.values[x_name], (), x_name=x_name)
    path = _path(p, m)
    ostep = p.output_step(index, channel_axis, const_residual=True,
                          residual_requant=requant_residual(path, geom, p.tuning.gemv_max_rows))
    res = p.spec_value(ostep.residual) if ostep.residual is not None and ostep.residual_const is None else None
    m = replace(m, tail=(ostep.mult.reshape(g, og), ostep.mult2.reshape(g, og), ostep.params()), res=res)
    kc = variants.choose("prepare", PREPARE[path](p, m), p.tuning, p, m)
    if getattr(kc.kern, "__name__", "") == "conv_vnni_direct":  # pad_fuse may have it write its output padded
        p.paddable.add(ostep.output)
    min_blocks = -(-p.tuning.par_min_macs // (kc.block_rows * g * og * kh * kw * cg))
    fused = "+".join(p.graph.nodes[j].op for j in ostep.nodes)
    label = f"{label}[{path}]" + ("+" + fused if fused else "")
    x4shape = (geom["h"], geom["w"], geom["c"])
    out_value = p.unsigned_storage(ostep.output, p.spec_value(ostep.output, out_layout))

    def bind(ins, out):
        return _bind_gemm(p, kc, ostep, ins, out, x4shape, x_name, g * og, min_blocks)

    def emit():
        inputs = [x_name] + ([p.in_layout(ostep.residual, out_layout)] if ostep.residual is not None else [])
        p.add(label, inputs, ostep.output, out_value, bind, scratch=kc.scratch)
    p.fuse(index, ostep.nodes, emit)


def _bind_gemm(p: Planner, kc: KernelCall, ostep, ins, out, x4shape, x_name: str, channels: int, min_blocks: int):
    """A MAC step's calls for one set of buffers: the input read as stored (padded where pad_fuse made its
    producer write it so), the output written padded where its reader asked (pad_fuse.request)."""
    kc = variants.choose("bind", kc, p.tuning, p, ostep.output, out)
    src, calls = kc.first(ins[0].reshape((-1,) + pad_fuse.stored_input(p, x_name, x4shape)))
    out2 = out.reshape(-1, channels)
    res = residual(ostep, ins, 1, out2)
    blocks = -(-(kc.pixels or out.reshape(-1, out.shape[-1]).shape[0]) // kc.block_rows)
    head = call(kc.kern, src, **kc.args, res=res, out=out2, geo=kc.geo).args
    return merge_unsplit(calls + [p.pool.call(kc.kern, head, blocks, min_blocks)])


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
    _gemm_step(p, index, x_name, wk, bias, geom, 0, NHWC, "conv2d")


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
    _gemm_step(p, index, x_name, w.reshape(1, o, 1, 1, k), bias, geom, len(x.shape) - 1, "c", "dense")
