"""Importers for ONNX ops written with IR ops MRT already quantizes (no float op or rule of their own).

Hardmax is [argmax == k] along its axis; ReduceProd a halving tree of products of slices; LpNormalization the
IR normalize (L1, L2) on its axis moved last; LpPool (sum of |x|^p over each window)^(1/p), two tables around a
window sum; CumProd a prefix-doubling scan of products of slices. A pool over 3 spatial axes is the 2-D pool over
(H, W) with D folded into the channels, then the 2-D pool over (D, 1) with H*W as the width: each window is a
box, so its maximum, sum and count (every count_include_pad and ceil_mode case) factor per axis. MaxPool and
AveragePool are registered here for that case only and hand every other one to ops_nn. Einsum is diagonals,
sums, transposes and matmuls. Einsum and CumProd on whole tensors are this module's WHOLE_FORMS (registered beside
whole_form's in one_sample). The ops that are constant linear maps of their input are in ops_linear_maps (Resize
beyond nearest and linear too); HANDLERS also gathers ops_sequences' and ops_grid_sample's (a computed grid).
"""
from __future__ import annotations

import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import batch_major, ops_grid_sample, ops_linear_maps, ops_nn, ops_sequences, whole_form
from mrt.onnx_import.attrs import where
from mrt.onnx_import.forms import WHOLE, stored
from mrt.onnx_import.ops_reduce import _reduce_axes
from mrt.onnx_import.ops_shape import _axes, _const_ints
from mrt.onnx_import.ops_unary import TRIG


def _slice(ctx, node, x, axis, start, end):
    return ctx.emit("slice", [x], {"axes": (axis,), "starts": (start,), "ends": (end,), "steps": (1,)}, node)


# -- Hardmax, ReduceProd, LpNormalization --------------------------------------------------------------------

def hardmax(ctx, node, attrs):
    """1 at the first maximum along the axis, 0 elsewhere: [argmax(x) == k], k the position on that axis."""
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, [attrs.get("axis", -1)], len(full))[0]
    index = ctx.emit("argmax", [ctx.tensor(node.input[0], node)],
                     {"axis": axis, "keepdims": 1, "select_last_index": 0}, node)
    positions = np.arange(full[axis], dtype=np.float32).reshape((full[axis],) + (1,) * (len(full) - axis - 1))
    ctx.emit("equal", [index, ctx.add_const(f"{node.output[0]}/positions", positions)], {}, node,
             out=node.output[0])


def _product_along(ctx, node, x, axis):
    """The product over `axis` (kept, size 1): halves multiplied until one is left (an odd last one joins the
    products), so a product of n factors is log2(n) levels of multiplications."""
    n = ctx.full[x][axis]
    while n > 1:
        half = n // 2
        value = ctx.emit("mul", [_slice(ctx, node, x, axis, 0, half), _slice(ctx, node, x, axis, half, 2 * half)],
                         {}, node)
        if n % 2:
            value = ctx.emit("concat", [value, _slice(ctx, node, x, axis, n - 1, n)], {"axis": axis}, node)
        x, n = value, half + n % 2
    return x


def reduce_prod(ctx, node, attrs):
    full = ctx.shape(node.input[0], node)
    axes, keep = _reduce_axes(ctx, node, attrs, full), int(attrs.get("keepdims", 1))
    x = ctx.tensor(node.input[0], node)
    for axis in axes or ():
        x = _product_along(ctx, node, x, axis)
    shape = [1 if a in (axes or ()) else d for a, d in enumerate(full) if a and (keep or a not in (axes or ()))]
    if not shape:
        raise UnsupportedOp(f"{where(node)}: the product is one number per sample, which CVM has no form for")
    ctx.emit("reshape", [x], {"shape": tuple(shape)}, node, out=node.output[0])


def lp_normalization(ctx, node, attrs):
    """x / ||x||_p along the axis (p 1 or 2): IR normalize over the last axis, the axis moved there and back."""
    full = ctx.shape(node.input[0], node)
    axis, p = _axes(node, [attrs.get("axis", -1)], len(full))[0], attrs.get("p", 2)
    if p not in (1, 2):
        raise UnsupportedOp(f"{where(node)}: p={p}; only the L1 and L2 norms (p 1, 2) are supported")
    perm = [a for a in range(len(full)) if a != axis] + [axis]
    x = ctx.tensor(node.input[0], node)
    last = axis == len(full) - 1
    if not last:
        x = ctx.emit("transpose", [x], {"perm": tuple(perm)}, node)
    y = ctx.emit("normalize", [x], {"norm": f"l{p}"}, node, out=node.output[0] if last else None)
    if not last:
        ctx.emit("transpose", [y], {"perm": tuple(int(i) for i in np.argsort(perm))}, node, out=node.output[0])


# -- pools: LpPool, and 1-D and 3-D windows as 2-D ones -------------------------------------------------------

def _split_2d(a, nd, first):
    """The 2-D pool attributes of axes `first` (a list of spatial positions, 1 or 2 of them; a missing second is a
    window of 1) from the nd-axis attributes `a`."""
    def pick(values, default):
        return [values[i] for i in first] + [default] * (2 - len(first))
    out = {"kernel": pick(a["kernel"], 1), "strides": pick(a["strides"], 1), "dilations": pick(a["dilations"], 1),
           "pads": pick(a["pads"][:nd], 0) + pick(a["pads"][nd:], 0)}
    if "ceil_pads" in a:
        out["ceil_pads"] = pick(a["ceil_pads"], 0)
    if "count_include_pad" in a:
        out["count_include_pad"] = a["count_include_pad"]
    return out


def pool_2d(ctx, node, op, x, a, out):
    """IR pool `op` (max_pool, avg_pool, sum_pool) with nd-axis attributes `a` over x [N, C, *spatial] as 2-D
    pools: 1-D over (1, L); 3-D over (H, W) with C*D channels, then over (D, 1) with width H'*W'."""
    full = ctx.full[x]
    nd = len(full) - 2
    if nd == 2:
        return ctx.emit(op, [x], a, node, out=out)
    if nd == 1:
        x2 = ctx.emit("reshape", [x], {"shape": (full[1], 1, full[2])}, node)
        y2 = ctx.emit(op, [x2], _unit_first(a), node)
        return ctx.emit("reshape", [y2], {"shape": (full[1], ctx.full[y2][3])}, node, out=out)
    if nd != 3:
        raise UnsupportedOp(f"{where(node)}: a pool over {nd} spatial axes; 1, 2 and 3 are supported")
    c, d, h, w = full[1:]
    hw = ctx.emit(op, [ctx.emit("reshape", [x], {"shape": (c * d, h, w)}, node)], _split_2d(a, 3, [1, 2]), node)
    h2, w2 = ctx.full[hw][2:]
    dz = ctx.emit(op, [ctx.emit("reshape", [hw], {"shape": (c, d, h2 * w2)}, node)], _split_2d(a, 3, [0]), node)
    return ctx.emit("reshape", [dz], {"shape": (c, ctx.full[dz][2], h2, w2)}, node, out=out)


def _unit_first(a):
    """A 1-D pool's attributes as a 2-D window of height 1."""
    out = _split_2d(a, 1, [0])
    for k in ("kernel", "strides", "dilations"):
        out[k] = out[k][::-1]
    out["pads"] = [0, out["pads"][0], 0, out["pads"][2]]
    if "ceil_pads" in out:
        out["ceil_pads"] = out["ceil_pads"][::-1]
    return out


def max_pool(ctx, node, attrs):
    """MaxPool over 1 or 3 spatial axes as 2-D pools (pool_2d); 2-D ones as ops_nn has them."""
    if len(attrs.get("kernel_shape") or ()) != 3:
        return ops_nn.max_pool(ctx, node, attrs)
    if len(node.output) > 1 and node.output[1]:
        raise UnsupportedOp(f"{where(node)}: the MaxPool Indices output is not supported")
    attrs.ignore("storage_order")
    a, ceil_pads = ops_nn._pool_attrs(ctx, node, attrs)
    a["pads"] = a["pads"][:3] + [p + e for p, e in zip(a["pads"][3:], ceil_pads)]
    pool_2d(ctx, node, "max_pool", ctx.tensor(node.input[0], node), a, node.output[0])


def average_pool(ctx, node, attrs):
    """AveragePool over 3 spatial axes: the average over (H, W), then over D (every window's count factors)."""
    if len(attrs.get("kernel_shape") or ()) != 3:
        return ops_nn.average_pool(ctx, node, attrs)
    a, ceil_pads = ops_nn._pool_attrs(ctx, node, attrs)
    a.update(count_include_pad=bool(attrs.get("count_include_pad", 0)), ceil_pads=ceil_pads)
    pool_2d(ctx, node, "avg_pool", ctx.tensor(node.input[0], node), a, node.output[0])


def lp_pool(ctx, node, attrs):
    """(sum of |x|^p over each window, zero padding)^(1/p): a table, a window sum, a table."""
    p = float(attrs.get("p", 2))
    if p <= 0:
        raise UnsupportedOp(f"{where(node)}: p={p} is not positive")
    a, ceil_pads = ops_nn._pool_attrs(ctx, node, attrs)
    nd = len(ceil_pads)
    a["pads"] = a["pads"][:nd] + [q + e for q, e in zip(a["pads"][nd:], ceil_pads)]
    x = ctx.tensor(node.input[0], node)
    powered = ctx.emit("mul", [x, x], {}, node) if p == 2 else \
        ctx.emit("univariate", [x], {"program": (("abs", ("x",), ()), ("pow", (0, p), ()))}, node)
    total = pool_2d(ctx, node, "sum_pool", powered, a, None)
    ctx.emit("univariate", [total], {"program": (("relu", ("x",), ()), ("pow", (0, 1.0 / p), ()))}, node,
             out=node.output[0])


# -- CumProd --------------------------------------------------------------------------------------------------

def cum_prod(ctx, node, attrs):
    """Running products along the axis by prefix doubling: after the step of shift k, y[i] holds the product of
    x[i-2k+1..i]; reverse runs from the end; exclusive shifts the result by one, a 1 (a table of x) first."""
    full = ctx.shape(node.input[0], node)
    axis = _axes(node, _const_ints(ctx, node, 1, "CumProd axis"), len(full))[0]
    reverse, exclusive = int(attrs.get("reverse", 0)), int(attrs.get("exclusive", 0))
    y, n, k = ctx.tensor(node.input[0], node), full[axis], 1
    while k < n:
        if reverse:
            parts = [ctx.emit("mul", [_slice(ctx, node, y, axis, 0, n - k), _slice(ctx, node, y, axis, k, n)], {},
                              node), _slice(ctx, node, y, axis, n - k, n)]
        else:
            parts = [_slice(ctx, node, y, axis, 0, k),
                     ctx.emit("mul", [_slice(ctx, node, y, axis, k, n), _slice(ctx, node, y, axis, 0, n - k)], {},
                              node)]
        y, k = ctx.emit("concat", parts, {"axis": axis}, node), 2 * k
    if exclusive:
        one = ctx.emit("univariate", [_slice(ctx, node, y, axis, 0, 1)],
                       {"program": (("mul", ("x", 0.0), ()), ("add", (0, 1.0), ()))}, node)
        rest = _slice(ctx, node, y, axis, 1, n) if reverse else _slice(ctx, node, y, axis, 0, n - 1)
        y = ctx.emit("concat", [rest, one] if reverse else [one, rest], {"axis": axis}, node) if n > 1 else one
    ctx.emit("identity", [y], {}, node, out=node.output[0])




# -- EyeLike --------------------------------------------------------------------------------------------------

def eye_like(ctx, node, attrs):
    """Ones on diagonal k of a matrix of the input's shape: a constant, added to 0 * x (a table of zeros) so that
    the output is still computed from the input."""
    attrs.ignore("dtype")
    shape = ctx.onnx_shape(node.input[0], node)
    if len(shape) != 2:
        raise UnsupportedOp(f"{where(node)}: EyeLike of a {len(shape)}-axis input (it takes a matrix)")
    eye = np.eye(*shape, k=int(attrs.get("k", 0)), dtype=np.float32).reshape(ctx.shape(node.input[0], node)[1:])
    zero = ctx.emit("univariate", [ctx.tensor(node.input[0], node)], {"program": (("mul", ("x", 0.0), ()),)}, node)
    ctx.emit("add", [zero, ctx.add_const(f"{node.output[0]}/eye", eye)], {}, node, out=node.output[0])


# -- Einsum ---------------------------------------------------------------------------------------------------

def _subscripts(equation, ranks):
    """([labels of each operand], output labels) of an equation, "..." spelled as digit labels (aligned from the
    right, as numpy broadcasts) and an implicit output made explicit (the ellipsis, then the labels used once)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"{len(terms)} operands in the equation, {len(ranks)} given")
    widths = [r - len(t.replace("...", "")) for t, r in zip(terms, ranks)]
    ell = "".join(str(d) for d in range(max(widths, default=0)))
    ops = [t.replace("...", ell[len(ell) - w:]) if "..." in t else t for t, w in zip(terms, widths)]
    if not arrow:
        once = sorted(c for c in set("".join(ops)) if c.isalpha() and "".join(ops).count(c) == 1)
        return ops, ell + "".join(once)
    return ops, rhs.replace("...", ell)


def _diagonal(ctx, node, x, labels):
    """Repeated labels of one operand (a diagonal): the two axes moved last, merged, every (n+1)-th taken."""
    for c in dict.fromkeys(labels):
        while labels.count(c) > 1:
            p = labels.index(c)
            q = labels.index(c, p + 1)
            rest = [a for a in range(len(labels)) if a not in (p, q)]
            n, full = ctx.full[x][p], ctx.full[x]
            x = ctx.emit("transpose", [x], {"perm": (*rest, p, q)}, node)
            x = ctx.emit("reshape", [x], {"shape": (*[full[a] for a in rest[1:]], n * n)}, node)
            x = ctx.emit("slice", [x], {"axes": (len(rest),), "starts": (0,), "ends": (n * n,), "steps": (n + 1,)},
                         node)
            labels = "".join(labels[a] for a in rest) + c
    return x, labels


def _arrange(ctx, node, x, labels, order):
    """x with its axes in `order` (a string of its labels)."""
    if labels == order:
        return x
    return ctx.emit("transpose", [x], {"perm": tuple(labels.index(c) for c in order)}, node)


def _sizes(ctx, x, labels):
    return {c: ctx.full[x][k] for k, c in enumerate(labels) if k}


def _pair(ctx, node, a, b, keep):
    """The contraction of two operands (tensor, labels) over the labels they share outside `keep`: a matmul of
    (batch, free of a, shared) by (batch, shared, free of b); a constant second operand is a dense layer."""
    (x, la), (y, lb) = a, b
    batch = "".join(c for c in la if c in lb and c in keep)
    shared = "".join(c for c in la if c in lb and c not in keep)
    fa, fb = "".join(c for c in la if c not in lb), "".join(c for c in lb if c not in la)
    sa = _sizes(ctx, x, la)
    if isinstance(y, np.ndarray):
        if batch:
            raise UnsupportedOp(f"{where(node)}: a constant operand shares the batch labels {batch!r}")
        w = np.transpose(y, [lb.index(c) for c in shared + fb]).reshape(-1, math.prod(y.shape[lb.index(c)] for c in fb))
        flat = _arrange(ctx, node, x, la, fa + shared)
        flat = ctx.emit("reshape", [flat], {"shape": (*[sa[c] for c in fa[1:]], w.shape[0])}, node)
        out = ctx.emit("dense", [flat, ctx.add_const(f"{node.output[0]}/w", w.T)], {}, node)
        sizes = {**sa, **{c: y.shape[lb.index(c)] for c in fb}}
        return ctx.emit("reshape", [out], {"shape": tuple(sizes[c] for c in (fa + fb)[1:])}, node), fa + fb
    sb = _sizes(ctx, y, lb)
    if any(sa[c] != sb[c] for c in (batch + shared)[1:]):
        raise UnsupportedOp(f"{where(node)}: operands broadcast along labels {batch + shared!r}")
    if not (batch + fa + fb)[1:]:  # one number per sample: a product summed (no reshape to a sample of no axis)
        prod = ctx.emit("mul", [x, _arrange(ctx, node, y, lb, la)], {}, node)
        return ctx.emit("sum", [prod], {"axes": tuple(range(1, len(la))), "keepdims": 0}, node), batch
    bt, m, k = (math.prod(sa[c] for c in s) for s in (batch[1:], fa, shared))
    n = math.prod(sb[c] for c in fb)
    x = ctx.emit("reshape", [_arrange(ctx, node, x, la, batch + fa + shared)], {"shape": (bt, m, k)}, node)
    y = ctx.emit("reshape", [_arrange(ctx, node, y, lb, batch + shared + fb)], {"shape": (bt, k, n)}, node)
    out = ctx.emit("matmul", [x, y], {}, node)
    sizes = {**sa, **sb}
    return ctx.emit("reshape", [out], {"shape": tuple(sizes[c] for c in (batch + fa + fb)[1:])}, node), \
        batch + fa + fb


def einsum(ctx, node, attrs):
    """Einsum as diagonals, sums, transposes and matmuls. Axis 0 of every activation is the batch: it must have one
    label, first in every activation and in the output (whole tensors get one: einsum_whole)."""
    equation = attrs.get("equation")
    try:
        terms, out = _subscripts(equation, [len(ctx.shape(i, node)) for i in node.input])
    except ValueError as e:
        raise UnsupportedOp(f"{where(node)}: equation {equation!r}: {e}") from None
    acts = [t for i, t in zip(node.input, terms) if not ctx.is_const(i)]
    first = acts[0][:1]
    if any(t[:1] != first or t[1:].count(first) for t in acts) or out[:1] != first or any(
            first in t for i, t in zip(node.input, terms) if ctx.is_const(i)):
        raise UnsupportedOp(f"{where(node)}: equation {equation!r} moves or mixes the batch axis")
    ops = []
    for name, labels in zip(node.input, terms):
        if ctx.is_const(name):
            unique = "".join(dict.fromkeys(labels))
            x, labels = np.einsum(f"{labels}->{unique}", ctx.consts[name].astype(np.float64)), unique
        else:
            x, labels = _diagonal(ctx, node, ctx.tensor(name, node), labels)
        ops.append((x, labels))
    ops.sort(key=lambda t: isinstance(t[0], np.ndarray))  # the activations first: a constant is only ever a second operand
    value = ops[0]
    for k in range(len(ops)):
        later = out + "".join(t[1] for t in ops[k + 1:])
        x, labels = value if k == 0 else _pair(ctx, node, value, ops[k], later)
        alone = [a for a, c in enumerate(labels) if c not in later]
        if alone:
            x = ctx.emit("sum", [x], {"axes": tuple(alone), "keepdims": 0}, node)
            labels = "".join(c for c in labels if c in later)
        value = (x, labels)
    ctx.emit("identity", [_arrange(ctx, node, *value, out)], {}, node, out=node.output[0])


def einsum_whole(ctx, node, a):
    """Einsum on whole tensors (for mrt.onnx_import.whole_form): a new first label on every activation and on the
    output, the batch every sample's einsum runs over."""
    terms, out = _subscripts(a.get("equation"), [len(ctx.onnx_shape(i, node)) for i in node.input])
    label = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in "".join(terms) + out)
    inputs = [i if ctx.is_const(i) else stored(ctx, i, node, WHOLE) for i in node.input]
    terms = [t if ctx.is_const(i) else label + t for i, t in zip(node.input, terms)]
    return batch_major._with(node, inputs=inputs, equation=f"{','.join(terms)}->{label}{out}")


def cum_prod_whole(ctx, node, a):
    """CumProd on whole tensors (for mrt.onnx_import.whole_form): the axis input moved past the batch axis."""
    rank = len(ctx.onnx_shape(node.input[0], node))
    axis = batch_major._norm(_const_ints(ctx, node, 1, "CumProd axis")[0], rank)
    lifted = batch_major._with(node, inputs=[stored(ctx, node.input[0], node, WHOLE), *node.input[1:]])
    return batch_major._ints_input(ctx, lifted, 1, axis + 1)


# the whole-tensor translations of these ops (mrt.onnx_import.whole_form.WHOLE_FORMS's form)
WHOLE_FORMS = {"Einsum": einsum_whole, "CumProd": cum_prod_whole, **{op: whole_form._same for op in (*TRIG, "EyeLike")},
               **ops_sequences.WHOLE_FORMS}

HANDLERS = {
    "Hardmax": (hardmax, {13}),
    "ReduceProd": (reduce_prod, {1, 11, 13, 18}),
    "LpNormalization": (lp_normalization, {1, 22}),
    "LpPool": (lp_pool, {11, 18, 22}),
    "MaxPool": (max_pool, {12, 22}),
    "AveragePool": (average_pool, {11, 19, 22}),
    "CumProd": (cum_prod, {26}),
    "Einsum": (einsum, {12, 28}),
    "EyeLike": (eye_like, {9, 22}),
    **ops_linear_maps.HANDLERS,
    **ops_sequences.HANDLERS,
    **ops_grid_sample.HANDLERS,  # a computed grid (a constant one: ops_linear_maps)
}
