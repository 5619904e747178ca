"""Whole-tensor imports (mrt.onnx_import.one_sample): a node whose tensors are stored whole is translated as if
its tensors had one more leading axis, the batch axis every handler expects: axis attributes and axes operands
shifted by one, a permutation extended, a Reshape or Flatten target made one sample's concrete output shape, a
constant of the operands' full rank given a leading 1. An op missing here has no whole form."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from mrt.errors import UnsupportedOp
from mrt.graph import fresh_name
from mrt.onnx_import import batch_major
from mrt.onnx_import.attrs import where
from mrt.onnx_import.forms import WHOLE, stored


def _rank(ctx, name, node):
    return len(ctx.onnx_shape(name, node))


def _ints(ctx, node, values):
    name = fresh_name(f"{node.output[0]}/whole_axes", ctx.consts)
    ctx.consts[name] = np.asarray(values, np.int64)
    return name


def _lifted(ctx, node, rank=None):
    """Every activation input stored whole (with at least `rank` axes); a constant of that full rank gets a
    leading axis of 1 (it is one sample's, and broadcasts over the batch)."""
    inputs = []
    for i in node.input:
        if i and ctx.is_const(i):
            c = np.asarray(ctx.consts[i])
            if rank is not None and c.ndim == rank:
                name = fresh_name(f"{i}/one_sample", ctx.consts)
                ctx.consts[name] = c.reshape(1, *c.shape)
                i = name
        elif i:
            i = stored(ctx, i, node, WHOLE, rank)
        inputs.append(i)
    return batch_major._with(node, inputs=inputs)


def _broadcast(ctx, node, a):
    return _lifted(ctx, node, max(len(ctx.onnx_shape(i, node)) for i in node.input if i))


def _same(ctx, node, a):
    return _lifted(ctx, node)


def _axis(default, data_input=0):
    """An `axis` attribute on the data input (unchanged where that input is a constant: Gather's table)."""
    def translate(ctx, node, a):
        axis = a.get("axis", default)
        lifted = _lifted(ctx, node)
        if ctx.is_const(node.input[data_input]) or axis < 0:
            return lifted
        return batch_major._with(lifted, axis=axis + 1)
    return translate


def _concat(ctx, node, a):
    rank = max(_rank(ctx, i, node) for i in node.input if i)
    axis = batch_major._norm(a.get("axis"), rank)
    return batch_major._with(_lifted(ctx, node, rank), axis=axis + 1)


def _axes_of(ctx, node, a):
    if len(node.input) > 1 and node.input[1]:
        return [int(v) for v in np.asarray(ctx.const(node.input[1], node, f"{node.op_type} axes")).reshape(-1)]
    return a.get("axes")


def _with_axes(ctx, node, axes, as_input):
    """The node with `axes` as its axes input or attribute, whichever its op version takes."""
    if as_input:
        return batch_major._ints_input(ctx, node, 1, axes)
    return batch_major._with(node, axes=axes)


def _takes_axes_input(ctx, node, a):
    """Whether the op version reads its axes from input 1 (Squeeze, Unsqueeze, ReduceSum since 13, the other
    reductions since 18) rather than from the `axes` attribute."""
    if len(node.input) > 1 and node.input[1]:
        return True
    if a.get("axes") is not None:
        return False
    schema = onnx.defs.get_schema(node.op_type, ctx.opsets.get("", 1), "")
    return any(i.name == "axes" for i in schema.inputs)


def _reduce(ctx, node, a):
    s = ctx.onnx_shape(node.input[0], node)
    axes = _axes_of(ctx, node, a)
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return _lifted(ctx, node)
        axes = range(len(s))
    shifted = [batch_major._norm(x, len(s)) + 1 for x in axes]
    return _with_axes(ctx, _lifted(ctx, node), shifted, _takes_axes_input(ctx, node, a))


def _squeeze(ctx, node, a):
    s = ctx.onnx_shape(node.input[0], node)
    axes = _axes_of(ctx, node, a)
    axes = [a for a, d in enumerate(s) if d == 1] if axes is None else [batch_major._norm(x, len(s)) for x in axes]
    return _with_axes(ctx, _lifted(ctx, node), [x + 1 for x in axes], _takes_axes_input(ctx, node, a))


def _unsqueeze(ctx, node, a):
    axes = _axes_of(ctx, node, a)
    rank = _rank(ctx, node.input[0], node) + len(axes)
    return _with_axes(ctx, _lifted(ctx, node), [batch_major._norm(x, rank) + 1 for x in axes], _takes_axes_input(ctx, node, a))


def _transpose(ctx, node, a):
    rank = _rank(ctx, node.input[0], node)
    perm = [batch_major._norm(p, rank) for p in a.get("perm", list(range(rank))[::-1])]
    return batch_major._with(_lifted(ctx, node), perm=[0] + [p + 1 for p in perm])


def _reshape_to(ctx, node, out_shape):
    """A Reshape of the whole input to one sample's output shape (the handler's target [-1, *out_shape])."""
    x = stored(ctx, node.input[0], node, WHOLE)
    reshape = helper.make_node("Reshape", [x, _ints(ctx, node, [-1, *out_shape])], [node.output[0]], name=node.name)
    return reshape


def _reshape(ctx, node, a):
    s = ctx.onnx_shape(node.input[0], node)
    target = [int(d) for d in np.asarray(ctx.const(node.input[1], node, "Reshape shape")).reshape(-1)]
    if not a.get("allowzero", 0):
        target = [s[i] if d == 0 and i < len(s) else d for i, d in enumerate(target)]
    if target.count(-1) == 1:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(s) // known if known else 0
    if math.prod(target) != math.prod(s) or min(target, default=1) < 1:
        raise UnsupportedOp(f"{where(node)}: cannot reshape {list(s)} to {target}")
    return _reshape_to(ctx, node, target)


def _flatten(ctx, node, a):
    s = ctx.onnx_shape(node.input[0], node)
    axis = batch_major._norm(a.get("axis", 1), len(s))
    return _reshape_to(ctx, node, [math.prod(s[:axis]), math.prod(s[axis:])])


def _slice(ctx, node, a):
    rank = _rank(ctx, node.input[0], node)
    starts = np.asarray(ctx.const(node.input[1], node, "Slice starts")).reshape(-1)
    axes = (range(len(starts)) if len(node.input) < 4 or not node.input[3] else
            np.asarray(ctx.const(node.input[3], node, "Slice axes")).reshape(-1))
    return batch_major._ints_input(ctx, _lifted(ctx, node), 3, [batch_major._norm(x, rank) + 1 for x in axes])


def _pad(ctx, node, a):
    rank = _rank(ctx, node.input[0], node)
    lifted = _lifted(ctx, node)
    if len(node.input) > 3 and node.input[3]:
        axes = np.asarray(ctx.const(node.input[3], node, "Pad axes")).reshape(-1)
        return batch_major._ints_input(ctx, lifted, 3, [batch_major._norm(x, rank) + 1 for x in axes])
    pads = [int(p) for p in np.asarray(ctx.const(node.input[1], node, "Pad pads")).reshape(-1)]
    return batch_major._ints_input(ctx, lifted, 1, [0, *pads[:rank], 0, *pads[rank:]])


def _tile(ctx, node, a):
    repeats = [int(r) for r in np.asarray(ctx.const(node.input[1], node, "Tile repeats")).reshape(-1)]
    return batch_major._ints_input(ctx, _lifted(ctx, node), 1, [1, *repeats])


def _expand(ctx, node, a):
    target = np.asarray(ctx.const(node.input[1], node, "Expand shape")).reshape(-1)
    rank = max(_rank(ctx, node.input[0], node), target.size)
    x = stored(ctx, node.input[0], node, WHOLE, rank)
    return batch_major._with(node, inputs=[x, *node.input[1:]])


def _matmul(ctx, node, a):
    """A vector activation operand (promoted to a matrix and back, as numpy's matmul does) makes an Einsum whose
    label z is the batch: a [..., M, K] or [K], b [..., K, N] or [K]."""
    ranks = [_rank(ctx, i, node) for i in node.input]
    if min(ranks) >= 2 or all(ctx.is_const(i) for i, r in zip(node.input, ranks) if r < 2):
        rank = max(ranks)
        return _lifted(ctx, node, rank if rank >= 3 else None)
    batch = "abcdefgh"[:max(max(ranks) - 2, 0)]
    ra, rb = ranks
    terms = ["k" if ra == 1 else batch[len(batch) - (ra - 2):] + "mk",
             "k" if rb == 1 else batch[len(batch) - (rb - 2):] + "kn"]
    out = batch + "m" * (ra > 1) + "n" * (rb > 1)
    inputs = [i if ctx.is_const(i) else stored(ctx, i, node, WHOLE) for i in node.input]
    terms = [t if ctx.is_const(i) else "z" + t for i, t in zip(node.input, terms)]
    return helper.make_node("Einsum", inputs, list(node.output), name=node.name, equation=f"{','.join(terms)}->z{out}")


WHOLE_FORMS = {
    **{op: _same for op in ("Relu", "Sigmoid", "Tanh", "Identity", "Dropout", "Cast", "LeakyRelu", "Clip", "Neg",
                            "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Softsign", "Softplus", "HardSigmoid", "Elu",
                            "Celu", "Selu", "Erf", "Gelu", "HardSwish", "Mish", "ThresholdedRelu", "Sin", "Cos",
                            "Floor", "Ceil", "Round", "Sign", "Not", "Gemm", "CastLike", "Trilu", "BitwiseNot")},
    **{op: _broadcast for op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "PRelu",
                                 "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                                 "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    **{op: _axis(-1) for op in ("Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "TopK",
                                "LpNormalization")},
    **{op: _axis(0) for op in ("Split", "Gather", "GatherElements", "ArgMax", "ArgMin", "ScatterElements")},
    **{op: _reduce for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                              "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp")},
    "Concat": _concat, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Transpose": _transpose,
    "Reshape": _reshape, "Flatten": _flatten, "Slice": _slice, "Pad": _pad, "Tile": _tile, "Expand": _expand,
    "MatMul": _matmul, "ScatterND": _same,
}
