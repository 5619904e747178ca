"""Lowering of every op other than conv2d and dense: compiled kernels for the elementwise ops that
keep a layout (requant, relu, clip, lut) and for max pooling and matmul; numpy, on views in the
spec's layout, for the ops that only move values or are cheap (add, sub, mul, div, sum, max, layout ops)."""
from __future__ import annotations

from math import prod

import numpy as np

from ...arith import div_round_into
from . import elementwise, lower_fused, matmul, matmul_vnni, pool, reduce_rows
from .calls import Ufunc, call
from .kargs import WINDOW, pack
from .layout import C, FLAT, NHWC, canonical, flat_permutation, to_nhwc_const
from .plan import OPEN_HI, Planner

_NHWC_AXIS = {0: 2, 1: 0, 2: 1}  # spec axis of a [C, H, W] sample -> stored axis of (H, W, C)


def _flat(a):
    return a.reshape(-1)


def _widest(*dtypes) -> np.dtype:
    return max((np.dtype(d) for d in dtypes), key=lambda d: d.itemsize)


def _batch_view(arr, value, rank):
    """Canonical view of a stored activation with unit axes inserted after the batch axis, so that
    numpy broadcasts the per-sample shapes right-aligned."""
    v = canonical(arr, value)
    return v.reshape((v.shape[0],) + (1,) * (rank - v.ndim + 1) + v.shape[1:])


def _div_by_one_constant(p: Planner, node) -> int | None:
    """The divisor when a div node divides an activation by a one-element constant into the same
    shape (then layout does not matter: one flat kernel over the stored buffer)."""
    x, d = node.inputs
    divisor = p.const(d)
    tensors = p.analysis.tensors
    if p.const(x) is None and divisor is not None and divisor.size == 1 and tensors[node.output].shape == tensors[x].shape:
        return int(divisor.reshape(-1)[0])
    return None


def lower_binary(p: Planner, index, node, attrs):
    if node.op == "mul" and lower_fused.lower_mul(p, index, node):
        return
    if node.op == "div" and (d := _div_by_one_constant(p, node)) is not None:
        x = p.values[node.inputs[0]]
        p.add("div", node.inputs[:1], node.output, p.spec_value(node.output).with_layout(x.layout, x.chw),
              lambda ins, out: [call(elementwise.div_const, _flat(ins[0]), d, _flat(out))])
        return
    out_value = p.spec_value(node.output)
    shape, rank = out_value.shape, len(out_value.shape)
    acts = [n for n in node.inputs if p.const(n) is None]
    nhwc = rank == 3 and all(p.values[n].layout == NHWC and p.values[n].shape == shape for n in acts)
    names = [n if p.const(n) is not None or nhwc else p.viewable(n) for n in node.inputs]
    dtypes = [p.const(n).dtype if p.const(n) is not None else p.values[n].dtype for n in names]
    if node.op == "div":
        calc = np.dtype(np.int64)
    else:
        calc = _widest(out_value.dtype, *dtypes)
    if nhwc:
        out_value = out_value.with_layout(NHWC)
    consts = {n: (to_nhwc_const(p.const(n)) if nhwc else p.const(n)).astype(calc)
              for n in names if p.const(n) is not None}
    act_names = [n for n in names if n not in consts]

    def operands(ins):
        got = dict(zip(act_names, ins))
        return [consts[n] if n in consts else (got[n] if nhwc else _batch_view(got[n], p.values[n], rank))
                for n in names]

    if node.op == "div":
        twice = {n: 2 * v for n, v in consts.items()}  # a constant divisor's 2d, once

        def bind(ins, out):
            x, d = operands(ins)
            o = out if nhwc else canonical(out, out_value)
            return [call(div_round_into, x, d, o, twice.get(names[1]))]
    else:
        ufunc = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[node.op]
        fn = Ufunc(ufunc, calc)

        def bind(ins, out):
            return [call(fn, *operands(ins), out)]
    p.add(node.op, act_names, node.output, out_value, bind)


def lower_clamp(p: Planner, index, node, attrs):
    if lower_fused.lower_chain(p, index, node):
        return
    lo, hi = (0, OPEN_HI) if node.op == "relu" else (attrs["lo"], attrs["hi"])  # int32, verified
    x = p.values[node.inputs[0]]
    p.add(node.op, node.inputs, node.output, p.spec_value(node.output).with_layout(x.layout, x.chw),
          lambda ins, out: [call(elementwise.clamp, _flat(ins[0]), lo, hi, _flat(out))])


def lower_lut(p: Planner, index, node, attrs):
    if lower_fused.lower_chain(p, index, node):
        return
    x = p.values[node.inputs[0]]
    table, offset = p.const(node.inputs[1]), attrs["offset"]
    out_value = p.spec_value(node.output).with_layout(x.layout, x.chw)
    if p.isa == "vnni" and x.dtype == np.int8 and out_value.dtype == np.int8 and _has_vbmi():
        from . import lut_vbmi
        tab, min_blocks = elementwise.byte_table(table, offset, x.lo, x.hi), p.tuning.lut_par_min_blocks

        def bind(ins, out):
            xf, of = _flat(ins[0]), _flat(out)
            return [p.pool.call(lut_vbmi.lut_i8, (xf, tab, of), -(-xf.shape[0] // lut_vbmi.BLOCK), min_blocks)]
        p.add("lut[vbmi]", node.inputs[:1], node.output, out_value, bind)
        return
    p.add("lut", node.inputs[:1], node.output, out_value,
          lambda ins, out: [call(elementwise.lut, _flat(ins[0]), table, offset, _flat(out))])


def _has_vbmi() -> bool:
    from .simd import host_has_vbmi
    return host_has_vbmi()


def lower_requant(p: Planner, index, node, attrs):
    if lower_fused.defer_requant(p, index, node, attrs) or lower_fused.lower_chain(p, index, node):
        return
    x = p.values[node.inputs[0]]
    m = p.const(node.inputs[1]).astype(np.int64)
    inner = 1
    if m.shape[0] != 1:
        if x.layout == FLAT:
            m = np.ascontiguousarray(m[flat_permutation(x.chw)])
        else:
            axis = _NHWC_AXIS[attrs["axis"]] if x.layout == NHWC else attrs["axis"]
            inner = prod(x.stored[axis + 1:])
    shift, lim = attrs["shift"], (1 << (attrs["bits"] - 1)) - 1
    args = (m, inner, (1 << shift) >> 1, shift, -lim, lim)
    p.add("requant", node.inputs[:1], node.output, p.spec_value(node.output).with_layout(x.layout, x.chw),
          lambda ins, out: [call(elementwise.requant, _flat(ins[0]), *args, _flat(out))])


def lower_max_pool(p: Planner, index, node, attrs):
    x_name = p.in_layout(node.inputs[0], NHWC)
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, _, _) = attrs["kernel"], attrs["strides"], attrs["dilations"], attrs["pads"]
    geo = pack(WINDOW, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl)
    out_value = p.unsigned_storage(node.output, p.spec_value(node.output, NHWC))
    c, oh, ow = out_value.shape
    min_rows = -(-p.tuning.par_min_taps // (ow * c * kh * kw))

    kern, label = pool.max_pool_nhwc, "max_pool2d"
    if p.isa == "vnni":
        from . import pool_simd
        if pool_simd.eligible(p.values[x_name].dtype, c) and p.values[x_name].dtype == out_value.dtype:
            kern, label = pool_simd.max_pool_nhwc_simd, "max_pool2d[simd]"

    def bind(ins, out):
        return [p.pool.call(kern, (ins[0], out, geo), out.shape[0] * oh, min_rows)]
    p.add(label, [x_name], node.output, out_value, bind)


def lower_reduce(p: Planner, index, node, attrs):
    """sum/max. On a channels-last tensor it reduces the stored array, keeping that layout when the
    remaining axes allow it (global pooling needs no transpose); reduced axes that are adjacent in
    the stored array go to a compiled kernel, any others to numpy."""
    x_name = p.viewable(node.inputs[0])
    x = p.values[x_name]
    axes, keep = attrs["axes"], bool(attrs["keepdims"])
    out_value = p.spec_value(node.output)
    shape, stored = x.shape, x.layout != NHWC
    if x.layout == NHWC:
        rest = [_NHWC_AXIS[a] for a in range(3) if a not in axes]
        if keep or rest == sorted(rest):
            axes, shape, stored = [_NHWC_AXIS[a] for a in axes], x.stored, True
            out_value = out_value.with_layout(NHWC) if keep else out_value
    axes = sorted(axes)
    is_max = node.op == "max"
    if stored and axes[-1] - axes[0] + 1 == len(axes):
        outer = prod(shape[:axes[0]])
        mid = prod(shape[axes[0]:axes[-1] + 1])

        last = prod(shape[axes[-1] + 1:]) == 1  # the rows are contiguous

        def bind(ins, out):
            n = ins[0].shape[0] * outer
            if last:
                return [call(reduce_rows.reduce_rows, ins[0].reshape(n, mid), is_max, out.reshape(n))]
            return [call(elementwise.reduce_mid, ins[0].reshape(n, mid, -1), is_max, out.reshape(n, -1))]
    else:
        method, extra = (np.max, {}) if is_max else (np.sum, {"dtype": np.int64})
        kwargs = dict(axis=tuple(a + 1 for a in axes), keepdims=keep, **extra)

        def run(src, out):
            np.copyto(out, method(src, **kwargs))

        def bind(ins, out):
            return [call(run, ins[0] if stored else canonical(ins[0], x), out)]
    p.add(node.op, [x_name], node.output, out_value, bind)


def lower_reshape(p: Planner, index, node, attrs):
    shape = tuple(attrs["shape"]) if node.op == "reshape" else (prod(p.values[node.inputs[0]].shape),)
    x_name = node.inputs[0]
    x = p.values[x_name]
    out_value = p.spec_value(node.output)
    if x.layout == NHWC and len(shape) == 1:
        return p.add(node.op, [x_name], node.output, out_value.with_layout(FLAT, x.shape), None,
                     view=lambda a: a.reshape(a.shape[0], -1))
    x_name = p.in_layout(x_name, C)
    p.add(node.op, [x_name], node.output, out_value, None, view=lambda a: a.reshape((a.shape[0],) + shape))


def _copy_step(p: Planner, node, make_source):
    """Output in layout "c" = make_source(canonical view of the single input)."""
    x_name = p.viewable(node.inputs[0])
    x = p.values[x_name]
    p.add(node.op, [x_name], node.output, p.spec_value(node.output),
          lambda ins, out: [call(np.copyto, out, make_source(canonical(ins[0], x)))])


def lower_transpose(p: Planner, index, node, attrs):
    perm = (0,) + tuple(a + 1 for a in attrs["perm"])
    _copy_step(p, node, lambda v: v.transpose(perm))


def _one_axis_slice(shape, attrs) -> tuple[int, int, int] | None:
    """(axis, start, step) when the slice keeps every axis whole but one, and that one non-empty."""
    cut = [(a, range(d)[slice(s, e, k)]) for a, (d, s, e, k) in
           enumerate(zip(shape, attrs["starts"], attrs["ends"], attrs["steps"])) if range(d)[slice(s, e, k)] != range(d)]
    if len(cut) != 1 or len(cut[0][1]) == 0:
        return None
    a, r = cut[0]
    return a, r.start, r.step


def lower_slice(p: Planner, index, node, attrs):
    x_name = p.viewable(node.inputs[0])
    x = p.values[x_name]
    one = _one_axis_slice(x.shape, attrs) if x.layout == C else None
    if one is not None:
        a, start, step = one
        n, inner = x.shape[a], prod(x.shape[a + 1:])
        out_value = p.spec_value(node.output)
        m = out_value.shape[a]

        def bind(ins, out):
            src = ins[0].reshape(-1, n, inner)
            return [call(elementwise.take_axis, src, start, step, out.reshape(src.shape[0], m, inner))]
        view = None
        if step > 0 and out_value.dtype == x.dtype:  # (a narrower output is stored narrower: copied)
            index_ = (slice(None),) * (a + 1) + (slice(start, start + step * (m - 1) + 1, step),)
            view = lambda arr: arr[index_]  # noqa: E731
        p.add("slice", [x_name], node.output, out_value, bind, view=view, view_if_contiguous=True)
        return
    index_ = (slice(None),) + tuple(map(slice, attrs["starts"], attrs["ends"], attrs["steps"]))
    _copy_step(p, node, lambda v: v[index_])


def lower_pad(p: Planner, index, node, attrs):
    x_name = p.viewable(node.inputs[0])
    x = p.values[x_name]
    pads, value = attrs["pads"], attrs["value"]
    inner = (slice(None),) + tuple(slice(pads[i], pads[i] + d) for i, d in enumerate(x.shape))

    def bind(ins, out):
        return [call(np.copyto, out, value), call(np.copyto, out[inner], canonical(ins[0], x))]
    p.add("pad", [x_name], node.output, p.spec_value(node.output), bind)


def lower_concat(p: Planner, index, node, attrs):
    """np.concatenate into the output; when inputs repeat (one tensor listed 10^5 times costs one gas
    per output element), each distinct input is copied once and one take() gathers the output, along
    an index made here with per listing only C-level work (a node of opsets 1-3 may list 10^6 inputs)."""
    distinct = list(dict.fromkeys(node.inputs))
    repeats = len(distinct) != len(node.inputs)
    # with repeated inputs the NHWC path never applies, and no input was deferred to it (lower_fused)
    if not repeats and lower_fused.lower_concat(p, index, node, attrs):
        return
    view = {n: n if p.const(n) is not None else p.viewable(n) for n in distinct}
    acts = [v for n, v in view.items() if p.const(n) is None]
    axis = attrs["axis"] + 1
    gather = _gather_index(p, node, distinct, attrs["axis"]) if repeats else None
    sum_sizes = int(sum(p.analysis.tensors[n].shape[axis - 1] for n in distinct))

    def bind(ins, out):
        got = dict(zip(acts, ins))
        parts = [np.broadcast_to(p.const(n), (out.shape[0],) + p.const(n).shape) if p.const(n) is not None
                 else canonical(got[view[n]], p.values[view[n]]) for n in distinct]
        if gather is None:
            return [call(_concat, parts, axis, out)]
        stacked = np.empty(out.shape[:axis] + (sum_sizes,) + out.shape[axis + 1:], out.dtype)
        return [call(_concat, parts, axis, stacked), call(_take, stacked, gather, axis, out)]
    p.add("concat", acts, node.output, p.spec_value(node.output), bind)


def _gather_index(p: Planner, node, distinct: list, axis: int) -> np.ndarray:
    """Where each output position along `axis` (per sample) lies in the distinct inputs laid out
    one after another."""
    position = {n: k for k, n in enumerate(distinct)}
    which = np.fromiter(map(position.__getitem__, node.inputs), np.intp, len(node.inputs))
    sizes = np.array([p.analysis.tensors[n].shape[axis] for n in distinct], np.intp)
    lengths, starts = sizes[which], (np.cumsum(sizes) - sizes)[which]
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))


def _concat(parts, axis, out):
    np.concatenate(parts, axis=axis, out=out, casting="unsafe")


def _take(stacked, index, axis, out):
    np.take(stacked, index, axis=axis, out=out)


def lower_matmul(p: Planner, index, node, attrs):
    a_name, b_name = (p.in_layout(n, C) for n in node.inputs)
    (m, k), n = p.values[a_name].shape[-2:], p.values[b_name].shape[-1]
    kern, label = matmul.matmul_i32, "matmul"
    int32_out = p.spec_value(node.output).dtype == np.int32
    if p.isa == "vnni" and matmul_vnni.eligible(p.values[a_name].dtype, p.values[b_name].dtype, k):
        p.add("matmul[vnni]", [a_name, b_name], node.output, p.spec_value(node.output), lambda ins, out: [
            call(matmul_vnni.matmul_vnni, *matmul_vnni.left_operand(ins[0].reshape(-1, m, k)),
                 ins[1].reshape(-1, k, n), out.reshape(-1, m, n))])
        return  # two int8 activations: vpdpbusd (an 8-bit transformer's attention)
    if p.isa == "vnni" and k >= 2 and all(p.values[x].dtype == np.int16 for x in (a_name, b_name)) and int32_out:
        from . import dense16  # two int16 activations: vpdpwssd (a wide transformer's attention)
        kern, label = dense16.matmul_vnni16, "matmul[vnni16]"
    p.add(label, [a_name, b_name], node.output, p.spec_value(node.output), lambda ins, out: [
        call(kern, ins[0].reshape(-1, m, k), ins[1].reshape(-1, k, n), out.reshape(-1, m, n))])
