"""ONNX tensors whose unit axis is not axis 0, stored with it first in the IR.

A sequence-first recurrent layer reads X as [seq, 1, input] for one sample and writes Y as [seq, dirs, 1, hidden];
its states are [dirs, 1, hidden]. Such a tensor is stored with that size-1 axis where the CVM batch axis is (its
unit axis, one_sample.py), and `ctx.batch_axes` records k, the ONNX axis it came from. A node reading such a
tensor is imported here: its attributes are translated to the stored layout (a Transpose's permutation, a
Squeeze's axes, a Reshape's target, ...), the usual handler emits the IR, and the output's unit axis is recorded
in turn. Where a tensor's unit axis comes back to 0 (a torch export's Transpose back to batch-first), nothing is
left of the detour. An op that cannot keep the unit axis apart raises UnsupportedOp, and one_sample imports it
on the whole tensor instead.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where

RECURRENT = ("LSTM", "GRU", "RNN")
# ops that work element by element on one tensor: the batch axis stays where it is
ELEMENTWISE = {"Relu", "Sigmoid", "Tanh", "Identity", "Dropout", "Cast", "LeakyRelu", "Clip", "Neg", "Abs",
               "Exp", "Sqrt", "Softsign", "Softplus", "HardSigmoid", "Elu", "Erf"}
BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}


def batch_axis(ctx, name) -> int:
    return ctx.batch_axes.get(name, 0)


def set_batch_axis(ctx, name, axis: int):
    if axis:
        ctx.batch_axes[name] = axis


def reads_moved(ctx, node, attrs) -> bool:
    """Whether the node reads a tensor whose batch axis is not ONNX axis 0, or is a Transpose that moves the batch
    axis (then `handle` imports it)."""
    if node.op_type == "Transpose" and not ctx.is_const(node.input[0]):
        rank = _rank(ctx, node.input[0], node)
        perm = attrs.get("perm", list(range(rank))[::-1])
        if _norm(perm[0], rank) != batch_axis(ctx, node.input[0]):
            return True
    if node.op_type == "Unsqueeze" and not ctx.is_const(node.input[0]) and not batch_axis(ctx, node.input[0]):
        axes = _axes_operand(ctx, node, attrs)
        rank = _rank(ctx, node.input[0], node) + len(axes)
        return 0 in [_norm(a, rank) for a in axes]  # a new axis before the batch: [N, H] -> [1, N, H]
    return any(batch_axis(ctx, i) for i in node.input if i)


def stored_axis(a: int, k: int) -> int:
    """Where ONNX axis a of a tensor with its batch on axis k sits in the batch-first stored tensor."""
    return 0 if a == k else a + 1 if a < k else a


def _rank(ctx, name, node):
    return len(ctx.shape(name, node))


def _norm(a, rank):
    return int(a) + rank if int(a) < 0 else int(a)


def _ints_input(ctx, node, k, values):
    """A copy of the node with input k replaced by a new int64 constant."""
    name = f"{node.output[0]}/batch_major/{k}"
    while name in ctx.consts:
        name += "_"
    ctx.consts[name] = np.asarray(values, np.int64)
    inputs = list(node.input) + [""] * (k + 1 - len(node.input))
    inputs[k] = name
    return _with(node, inputs=inputs)


def _with(node, inputs=None, outputs=None, **attrs):
    """A copy of the node with other inputs, outputs or attributes."""
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    values.update(attrs)
    return helper.make_node(node.op_type, list(node.input if inputs is None else inputs),
                            list(node.output if outputs is None else outputs), name=node.name, domain=node.domain,
                            **values)


def _transpose(ctx, node, attrs, k):
    rank = _rank(ctx, node.input[0], node)
    perm = [_norm(p, rank) for p in attrs.get("perm", list(range(rank))[::-1])]
    j = perm.index(k)
    new = [0] + [stored_axis(p, k) for i, p in enumerate(perm) if i != j]
    if new == sorted(new):  # only moved the batch axis: nothing to do on the stored tensor
        return helper.make_node("Identity", node.input[:1], node.output, name=node.name), [j]
    return _with(node, perm=new), [j]


def _squeeze(ctx, node, attrs, k):
    rank = _rank(ctx, node.input[0], node)
    axes = _axes_operand(ctx, node, attrs)
    if axes is None:  # every size-1 axis: the stored shape says which
        full = ctx.shape(node.input[0], node)
        axes = [a for a in range(rank) if a != k and full[stored_axis(a, k)] == 1]
    axes = [_norm(a, rank) for a in axes]
    if k in axes:
        raise UnsupportedOp(f"{where(node)}: squeezes the batch axis (ONNX axis {k})")
    return _ints_input(ctx, node, 1, [stored_axis(a, k) for a in axes]), [k - sum(a < k for a in axes)]


def _unsqueeze(ctx, node, attrs, k):
    axes = _axes_operand(ctx, node, attrs)
    rank = _rank(ctx, node.input[0], node) + len(axes)
    axes = sorted(_norm(a, rank) for a in axes)
    kept = [p for p in range(rank) if p not in axes]
    j = kept[k]
    return _ints_input(ctx, node, 1, [stored_axis(a, j) for a in axes]), [j]


def _axes_operand(ctx, node, attrs):
    if len(node.input) > 1 and node.input[1]:
        return [int(a) for a in np.asarray(ctx.const(node.input[1], node, f"{node.op_type} axes")).reshape(-1)]
    return attrs.get("axes")


def _reshape(ctx, node, attrs, k):
    """[pre..., 1, post...] -> [pre'..., 1, post'...] with prod(pre') == prod(pre): the same reshape of the
    stored [pre..., post...] is [pre'..., post'...]."""
    full = ctx.shape(node.input[0], node)
    onnx_dims = [1 if a == k else full[stored_axis(a, k)] for a in range(len(full))]
    target = [int(d) for d in ctx.const(node.input[1], node, "Reshape shape")]
    if not attrs.get("allowzero", 0):
        target = [onnx_dims[i] if d == 0 and i < len(onnx_dims) else d for i, d in enumerate(target)]
    pre = int(np.prod([d for a, d in enumerate(onnx_dims) if a < k]))
    for j in (j for j, d in enumerate(target) if d == 1):
        if -1 not in target[:j] and int(np.prod(target[:j])) == pre:
            return _ints_input(ctx, node, 1, [1] + target[:j] + target[j + 1:]), [j]
    raise UnsupportedOp(f"{where(node)}: Reshape of a tensor with its unit axis on ONNX axis {k} to {target} does "
                        "not keep the unit axis apart from the others")


def _slice(ctx, node, attrs, k):
    rank = _rank(ctx, node.input[0], node)
    starts = np.asarray(ctx.const(node.input[1], node, "Slice starts")).reshape(-1)
    axes = (list(range(len(starts))) if len(node.input) < 4 or not node.input[3] else
            [_norm(a, rank) for a in np.asarray(ctx.const(node.input[3], node, "Slice axes")).reshape(-1)])
    return _ints_input(ctx, node, 3, [stored_axis(_norm(a, rank), k) for a in axes]), [k]


def _gather(ctx, node, attrs, k):
    rank = _rank(ctx, node.input[0], node)
    a = _norm(attrs.get("axis", 0), rank)
    if a == k:
        raise UnsupportedOp(f"{where(node)}: gathers along the batch axis (ONNX axis {k})")
    ind = np.asarray(ctx.const(node.input[1], node, "Gather indices"))
    return _with(node, axis=stored_axis(a, k)), [k if a > k else k - 1 + ind.ndim]


def _along_axis(ctx, node, attrs, k):
    """Split and Concat: one axis attribute, every batched operand with its batch on the same axis."""
    rank = _rank(ctx, node.input[0], node)
    a = _norm(attrs.get("axis", 0), rank)
    if a == k or any(batch_axis(ctx, i) != k for i in node.input[:None if node.op_type == "Concat" else 1] if i):
        raise UnsupportedOp(f"{where(node)}: works along the batch axis or mixes batch layouts")
    return _with(node, axis=stored_axis(a, k)), [k] * len(node.output)


def _binary(ctx, node, attrs, k):
    """Both operands with the batch on axis k, or a constant: the constant's axes are moved the same way."""
    rank = max(_rank(ctx, i, node) for i in node.input)
    inputs = list(node.input)
    for n, name in enumerate(inputs):
        if ctx.is_const(name):
            c = np.asarray(ctx.consts[name])
            c = c.reshape((1,) * (rank - c.ndim) + c.shape)
            moved = f"{name}/batch_major/{node.output[0]}"
            ctx.consts[moved] = np.ascontiguousarray(np.moveaxis(c, k, 0))
            inputs[n] = moved
        elif batch_axis(ctx, name) != k or _rank(ctx, name, node) != rank:
            raise UnsupportedOp(f"{where(node)}: operands with their batch on different axes")
    return _with(node, inputs=inputs), [k]


def _matmul(ctx, node, attrs, k):
    """MatMul by a constant matrix contracts the last axis: the same on the stored tensor while the batch is on
    another axis (torch's sequence-first attention projects [L, N, E] by its in_proj weight)."""
    rank = _rank(ctx, node.input[0], node)
    b = node.input[1]
    if batch_axis(ctx, node.input[0]) != k or not ctx.is_const(b) or np.asarray(ctx.consts[b]).ndim != 2 \
            or k == rank - 1:
        raise UnsupportedOp(f"{where(node)}: MatMul of a tensor with its batch on ONNX axis {k} needs a constant "
                            "matrix and the batch off the last axis")
    return node, [k]


TRANSLATE = {
    "Transpose": _transpose, "MatMul": _matmul, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Reshape": _reshape,
    "Slice": _slice, "Gather": _gather, "Split": _along_axis, "Concat": _along_axis,
    **{op: _binary for op in BINARY},
    **{op: (lambda ctx, node, attrs, k: (node, [k])) for op in ELEMENTWISE},
}


def handle(ctx, node, attrs, handlers):
    """Import a node reading a batch-moved tensor: recurrent ops read it themselves; other ops are translated to
    the batch-first layout and imported with `handlers` ((domain, op) -> (handler, versions))."""
    if node.op_type in RECURRENT:
        handlers[("", node.op_type)][0](ctx, node, attrs)
        return
    k = next((batch_axis(ctx, i) for i in node.input if i and batch_axis(ctx, i)), 0)
    translate = TRANSLATE.get(node.op_type)
    if translate is None:
        names = [i for i in node.input if i and batch_axis(ctx, i)]
        raise UnsupportedOp(f"{where(node)}: reads {names[0]!r}, whose batch is on ONNX axis {k} (a sequence- or "
                            f"direction-first layout), which {node.op_type} cannot take")
    translated, out_axes = translate(ctx, node, attrs, k)
    attrs.ignore(*[a.name for a in node.attribute])
    if translated is None:
        return
    handlers[("", translated.op_type)][0](ctx, translated, _Plain(translated))
    for name, axis in zip(translated.output, out_axes):
        if name:
            set_batch_axis(ctx, name, axis)


class _Plain:
    """Attrs for a translated node (its attributes were checked on the original)."""

    def __init__(self, node):
        self._values = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def get(self, name, default=None):
        value = self._values.get(name, default)
        value = value.decode() if isinstance(value, bytes) else value
        return list(value) if isinstance(value, (list, tuple)) else value

    def ignore(self, *names):
        pass
