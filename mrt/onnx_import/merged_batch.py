"""ONNX tensors whose batch is merged with another dimension into one axis, stored per sample in the IR.

torch's MultiheadAttention (ViT, sequence-first [L, N, E] inside) reshapes q/k/v to [L, N*heads, head_dim]
and transposes them to [N*heads, L, head_dim] for its batched matmuls, then splits N*heads back into
[N, heads, L, head_dim]; its output projection runs on [L*N, E] rows. The batch size reaches those Reshape
targets as `BATCH_SENTINEL * f` (importer._fold multiplies the sentinel by a positive constant).

Such a tensor is stored with its batch first and the merged axis split around it: ONNX axis k of size
outer * N * inner (row-major, N between) is stored as [N, dims before k..., outer, inner, dims after k...],
leaving out an outer or inner of 1. `merged(ctx)[name] = (k, outer, inner)` records it. Reshape,
Transpose, Shape, Gemm and MatMul by a constant read such tensors (each is the same computation on the
stored tensor, per sample); any other op is refused by name. A Reshape that splits the batch back out
(outer == inner == 1) returns to batch_major's layouts.
"""
from __future__ import annotations

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import import batch_major
from mrt.onnx_import.attrs import where
from mrt.onnx_import.context import BATCH_SENTINEL


def merged(ctx) -> dict:
    """ONNX name -> (k, outer, inner) of the tensors whose ONNX axis k holds outer * N * inner."""
    if not hasattr(ctx, "merged_batch"):
        ctx.merged_batch = {}
    return ctx.merged_batch


def batch_factor(value) -> int:
    """f where an integer shape entry is BATCH_SENTINEL * f (f >= 1), else 0."""
    value = int(value)
    return value // BATCH_SENTINEL if value > 0 and value % BATCH_SENTINEL == 0 else 0


def carries_batch(v) -> bool:
    """Whether a folded constant holds the batch size (the sentinel or a multiple of it)."""
    v = np.asarray(v)
    if v.dtype.kind not in "iuf" or not v.size:
        return False
    a = np.abs(v.astype(np.float64))
    return bool(((a >= BATCH_SENTINEL) & (np.mod(a, BATCH_SENTINEL) == 0)).any())


def _target_has_product(ctx, node) -> bool:
    if len(node.input) < 2 or not ctx.is_const(node.input[1]):
        return False
    return any(batch_factor(d) > 1 for d in np.asarray(ctx.consts[node.input[1]]).reshape(-1))


def reads(ctx, node) -> bool:
    """Whether the node reads a merged tensor, or reshapes a batched tensor to a target merging the batch."""
    if any(i in merged(ctx) for i in node.input if i):
        return True
    return node.op_type == "Reshape" and not ctx.is_const(node.input[0]) and _target_has_product(ctx, node)


def _layout(ctx, name, node):
    """(ONNX dims with None at the batch's axis, k, outer, inner) of a batched tensor."""
    full = list(ctx.shape(name, node))
    if name in merged(ctx):
        k, outer, inner = merged(ctx)[name]
        rest = full[1:]
        before, after = rest[:k], rest[k + (outer > 1) + (inner > 1):]
        return before + [None] + after, k, outer, inner
    k = batch_major.batch_axis(ctx, name)
    rest = full[1:]
    return rest[:k] + [None] + rest[k:], k, 1, 1


def _readable(target) -> str:
    """A Reshape target with its batch entries written N, N*f."""
    f = [batch_factor(d) for d in target]
    return "[" + ", ".join(("N" if k == 1 else f"N*{k}") if k else str(d) for d, k in zip(target, f)) + "]"


def _stored_positions(rank, k, outer, inner):
    """For each ONNX axis, the stored axes it covers (the batch's own axis 0 is not listed)."""
    out, s = [], 1
    for a in range(rank):
        n = (outer > 1) + (inner > 1) if a == k else 1
        out.append(list(range(s, s + n)))
        s += n
    return out


def _record(ctx, name, k, outer, inner):
    if outer == 1 and inner == 1:
        batch_major.set_batch_axis(ctx, name, k)
    else:
        merged(ctx)[name] = (k, outer, inner)


def _reshape(ctx, node, attrs):
    dims, k, outer, inner = _layout(ctx, node.input[0], node)
    before = int(np.prod([d for d in dims[:k]], dtype=np.int64)) * outer   # elements per sample before N
    after = inner * int(np.prod([d for d in dims[k + 1:]], dtype=np.int64))  # ... and after it
    target = [int(d) for d in np.asarray(ctx.const(node.input[1], node, "Reshape shape")).reshape(-1)]
    if not attrs.get("allowzero", 0):
        target = [(BATCH_SENTINEL * outer * inner if dims[i] is None else dims[i]) if d == 0 and i < len(dims)
                  else d for i, d in enumerate(target)]
    heads = [j for j, d in enumerate(target) if batch_factor(d)]
    if len(heads) != 1:
        raise UnsupportedOp(f"{where(node)}: Reshape target {_readable(target)} must hold the batch size on exactly "
                            "one axis")
    j = heads[0]
    f = batch_factor(target[j])
    sizes = [f if i == j else d for i, d in enumerate(target)]
    if sizes.count(-1) == 1:
        known = int(np.prod([d for d in sizes if d != -1], dtype=np.int64))
        sizes[sizes.index(-1)] = before * after // known
    pre = int(np.prod(sizes[:j], dtype=np.int64))
    if -1 in sizes or pre == 0 or before % pre or f % (before // pre):
        raise UnsupportedOp(f"{where(node)}: Reshape to {_readable(target)} does not keep the batch size apart from "
                            "the other dimensions (it would mix samples)")
    new_outer = before // pre
    new_inner = f // new_outer
    if new_inner * int(np.prod(sizes[j + 1:], dtype=np.int64)) != after:
        raise UnsupportedOp(f"{where(node)}: Reshape to {_readable(target)} does not keep the batch size apart from "
                            "the other dimensions (it would mix samples)")
    stored = [BATCH_SENTINEL] + sizes[:j] + [d for d in (new_outer, new_inner) if d > 1] + sizes[j + 1:]
    translated = batch_major._ints_input(ctx, node, 1, stored)
    return translated, (j, new_outer, new_inner)


def _transpose(ctx, node, attrs):
    dims, k, outer, inner = _layout(ctx, node.input[0], node)
    rank = len(dims)
    perm = [int(p) + rank if int(p) < 0 else int(p) for p in attrs.get("perm", list(range(rank))[::-1])]
    pos = _stored_positions(rank, k, outer, inner)
    stored = [0] + [s for p in perm for s in pos[p]]
    return batch_major._with(node, perm=stored), (perm.index(k), outer, inner)


def _shape(ctx, node, attrs):
    dims, k, outer, inner = _layout(ctx, node.input[0], node)
    values = [BATCH_SENTINEL * outer * inner if d is None else d for d in dims]
    ctx.consts[node.output[0]] = np.asarray(values, np.int64)[attrs.get("start", 0):attrs.get("end", None)]
    return None, None


def _by_constant(ctx, node, attrs):
    """Gemm / MatMul by a constant matrix act on the last axis: the same on the stored tensor, unless the batch is
    merged into that last axis."""
    dims, k, outer, inner = _layout(ctx, node.input[0], node)
    if k == len(dims) - 1 or not all(ctx.is_const(i) for i in node.input[1:] if i):
        raise UnsupportedOp(f"{where(node)}: {node.op_type} of a tensor with its batch merged into axis {k} "
                            "needs a constant matrix and the batch off the last axis")
    if node.op_type == "Gemm" and attrs.get("transA", 0):
        raise UnsupportedOp(f"{where(node)}: Gemm transA=1 would transpose the batch axis")
    return node, (k, outer, inner)


TRANSLATE = {"Reshape": _reshape, "Transpose": _transpose, "Shape": _shape, "Gemm": _by_constant,
             "MatMul": _by_constant}


def handle(ctx, node, attrs, handlers):
    """Import a node reading a merged tensor (or a Reshape merging the batch) on the stored layout."""
    translate = TRANSLATE.get(node.op_type)
    names = [i for i in node.input if i and i in merged(ctx)]
    if translate is None or (names and names[0] != node.input[0]):
        raise UnsupportedOp(f"{where(node)}: reads {(names or node.input)[0]!r}, whose batch is merged with "
                            f"another dimension (torch attention's N*heads), which {node.op_type} cannot take")
    translated, layout = translate(ctx, node, attrs)
    if translated is None:
        attrs.ignore(*[a.name for a in node.attribute])
        return
    if translated is node:
        handlers[("", node.op_type)][0](ctx, node, attrs)
    else:
        attrs.ignore(*[a.name for a in node.attribute])
        handlers[("", translated.op_type)][0](ctx, translated, batch_major._Plain(translated))
    _record(ctx, node.output[0], *layout)
