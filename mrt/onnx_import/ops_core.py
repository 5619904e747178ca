"""Importers for ONNX element-wise, activation and layout ops (default domain).

A handler runs only when at least one input is batched (all-constant nodes are folded before);
it reads attributes through `Attrs` and emits MRT IR nodes through the `ImportContext`.
"""
import math

import numpy as np
from onnx import TensorProto, helper

from mrt.errors import UnsupportedOp
from mrt.float_ops import BATCH
from mrt.onnx_import.context import MASK_INFINITY
from mrt.onnx_import.attrs import optional_input, where
from mrt.onnx_import.ops_reduce import pad_by_copies


def _scalar(ctx, node, k, what, default):
    name = optional_input(node, k)
    if name is None:
        return default
    value = ctx.const(name, node, what)
    if value.size != 1:
        raise UnsupportedOp(f"{where(node)}: {what} must be a scalar, got shape {value.shape}")
    return float(value.reshape(()))


def _axis(node, axis, rank):
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise UnsupportedOp(f"{where(node)}: axis {axis} out of range for rank {rank}")
    return a


def unary(op):
    def handler(ctx, node, attrs):
        ctx.emit(op, [ctx.tensor(node.input[0], node)], {}, node, out=node.output[0])
    return handler


def binary(op):
    def handler(ctx, node, attrs):
        a, b = node.input
        if op == "div" and not ctx.is_const(b):
            raise UnsupportedOp(f"{where(node)}: division by a non-constant divisor {b!r} is "
                                "not supported (only division by a constant)")
        ctx.emit(op, [ctx.tensor(a, node), ctx.tensor(b, node)], {}, node, out=node.output[0])
    return handler


def leaky_relu(ctx, node, attrs):
    ctx.emit("leaky_relu", [ctx.tensor(node.input[0], node)],
             {"alpha": float(attrs.get("alpha", 0.01))}, node, out=node.output[0])


def hard_sigmoid(ctx, node, attrs):
    ctx.emit("hard_sigmoid", [ctx.tensor(node.input[0], node)],
             {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))},
             node, out=node.output[0])


def clip(ctx, node, attrs):
    lo = _scalar(ctx, node, 1, "Clip min", -math.inf)
    hi = _scalar(ctx, node, 2, "Clip max", math.inf)
    ctx.emit("clip", [ctx.tensor(node.input[0], node)], {"min": lo, "max": hi}, node,
             out=node.output[0])


def softmax(ctx, node, attrs):
    x = node.input[0]
    axis = _axis(node, attrs.get("axis", -1), len(ctx.shape(x, node)))
    ctx.emit("softmax", [ctx.tensor(x, node)], {"axis": axis}, node, out=node.output[0])


def log_softmax(ctx, node, attrs):
    """LogSoftmax = d - log(sum(exp(d))) with d = x - max(x) <= 0: exp of d is in (0, 1] and the sum in
    [1, n], so every table is well conditioned (log of a softmax's probabilities would not be)."""
    x = node.input[0]
    axis = _axis(node, attrs.get("axis", -1), len(ctx.shape(x, node)))
    top = ctx.emit("reduce_max", [ctx.tensor(x, node)], {"axes": (axis,), "keepdims": 1}, node)
    d = ctx.emit("sub", [ctx.tensor(x, node), top], {}, node)
    total = ctx.emit("sum", [ctx.emit("exp", [d], {}, node)], {"axes": (axis,), "keepdims": 1}, node)
    ctx.emit("sub", [d, ctx.emit("log", [total], {}, node)], {}, node, out=node.output[0])


def flatten(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.shape(x, node))
    axis = attrs.get("axis", 1)
    axis = axis + rank if axis < 0 else axis  # Flatten's axis ranges over [-rank, rank]
    if axis != 1:
        raise UnsupportedOp(f"{where(node)}: Flatten axis={axis} merges the batch axis with "
                            "others; only axis=1 keeps samples apart")
    ctx.emit("flatten", [ctx.tensor(x, node)], {}, node, out=node.output[0])


def resolve_reshape(node, in_shape, target, allowzero):
    """The per-sample target of an ONNX Reshape of a tensor whose ONNX axis 0 is its unit axis (one_sample.py),
    or an error if the reshape does not keep that axis apart. Accepted heads: 1, 0 (copy, without allowzero),
    or -1 with concrete dims after it (torch's x.view(-1, K)). A Reshape that merges the unit axis with
    others is imported on the whole tensor instead (one_sample.py)."""
    t = [int(d) for d in target]
    per_sample = math.prod(in_shape[1:])
    if not t:
        raise UnsupportedOp(f"{where(node)}: Reshape to a scalar drops the batch axis")
    if not allowzero:
        t = [in_shape[i] if d == 0 and i < len(in_shape) else d for i, d in enumerate(t)]
    head, rest = t[0], t[1:]
    if BATCH in rest:
        raise UnsupportedOp(f"{where(node)}: Reshape moves the unit axis off axis 0: {target}")
    keeps_batch = head in (BATCH, 1)
    if head == -1 and -1 not in rest and all(d > 0 for d in rest) and \
            math.prod(rest) == per_sample:
        keeps_batch = True
    if not keeps_batch:
        raise UnsupportedOp(f"{where(node)}: Reshape of {in_shape} to {list(target)} would not "
                            "keep axis 0 as the batch axis")
    if rest.count(-1) > 1 or any(d < -1 or d == 0 for d in rest):
        raise UnsupportedOp(f"{where(node)}: Reshape target {list(target)} is not supported")
    if -1 in rest:
        known = math.prod(d for d in rest if d != -1)
        if known == 0 or per_sample % known:
            raise UnsupportedOp(f"{where(node)}: cannot reshape {in_shape} to {list(target)}")
        rest[rest.index(-1)] = per_sample // known
    return tuple(rest)


def reshape(ctx, node, attrs):
    x, target = node.input
    shape = resolve_reshape(node, ctx.shape(x, node), ctx.const(target, node, "Reshape shape"),
                            attrs.get("allowzero", 0))
    ctx.emit("reshape", [ctx.tensor(x, node)], {"shape": shape}, node, out=node.output[0])


def transpose(ctx, node, attrs):
    x = node.input[0]
    rank = len(ctx.shape(x, node))
    perm = [_axis(node, p, rank) for p in attrs.get("perm", list(range(rank))[::-1])]
    ctx.emit("transpose", [ctx.tensor(x, node)], {"perm": perm}, node, out=node.output[0])


def pad(ctx, node, attrs):
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise UnsupportedOp(f"{where(node)}: Pad mode {mode!r} is not supported (constant, reflect, edge)")
    x = node.input[0]
    rank = len(ctx.shape(x, node))
    pads = [int(p) for p in ctx.const(node.input[1], node, "Pad pads")]
    value = _scalar(ctx, node, 2, "Pad constant_value", 0.0)
    value = float(np.clip(value, -MASK_INFINITY, MASK_INFINITY))  # an infinite pad (a mask's) as constants become
    axes_name = optional_input(node, 3)
    axes = list(range(rank)) if axes_name is None else [
        _axis(node, int(a), rank) for a in ctx.const(axes_name, node, "Pad axes")]
    if len(pads) != 2 * len(axes):
        raise UnsupportedOp(f"{where(node)}: {len(pads)} pads for {len(axes)} axes")
    if min(pads, default=0) < 0:
        raise UnsupportedOp(f"{where(node)}: negative pads (cropping) are not supported")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a], full[rank + a] = pads[k], pads[len(axes) + k]
    if mode != "constant":
        pad_by_copies(ctx, node, ctx.tensor(x, node), ctx.shape(x, node), full, mode)
        return
    ctx.emit("pad", [ctx.tensor(x, node)], {"pads": full, "value": value}, node,
             out=node.output[0])


def _forward_dropped(ctx, node) -> bool:
    """Identity / Cast of a dropped optional output (a classifier's label on its way to a graph output, as
    onnxmltools writes it) is dropped the same way."""
    if node.input[0] not in ctx.optional_outputs:
        return False
    ctx.drop(node.output[0], ctx.dropped[node.input[0]], optional_output=True)
    return True


def identity(ctx, node, attrs):
    if _forward_dropped(ctx, node):
        return
    ctx.emit("identity", [ctx.tensor(node.input[0], node)], {}, node, out=node.output[0])


def dropout(ctx, node, attrs):
    attrs.ignore("seed", "ratio")  # inference: dropout is the identity whatever its ratio
    training = optional_input(node, 2)
    if training is not None and ctx.const(training, node, "Dropout training_mode").any():
        raise UnsupportedOp(f"{where(node)}: Dropout in training mode is not supported")
    if len(node.output) > 1 and node.output[1]:
        ctx.drop(node.output[1], "the Dropout mask output is not supported")
    ctx.emit("dropout", [ctx.tensor(node.input[0], node)], {}, node, out=node.output[0])


FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
INTEGER_TYPES = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT32,
                 TensorProto.UINT16, TensorProto.UINT8, TensorProto.UINT64}


def cast_like(ctx, node, attrs):
    """CastLike(x, like): Cast to like's element type (a constant's dtype, or an activation's ONNX type)."""
    like = node.input[1]
    if ctx.is_const(node.input[0]):  # a constant cast like an activation (a function body's alpha): a constant
        attrs.ignore("saturate", "round_mode")
        ctx.consts[node.output[0]] = np.asarray(ctx.consts[node.input[0]], np.float32)
        return
    if ctx.is_const(like):
        to = helper.np_dtype_to_tensor_dtype(np.asarray(ctx.consts[like]).dtype)
    else:
        to = TensorProto.INT64 if like in ctx.integer_tensors else TensorProto.FLOAT
    _cast_to(ctx, node, attrs, to)


def cast(ctx, node, attrs):
    _cast_to(ctx, node, attrs, attrs.get("to"))


# ONNX's 8- and 4-bit floats MRT rounds to (ml_dtypes' names), and its 2- and 4-bit integers (bits, signed)
NARROW_FLOATS = {TensorProto.FLOAT8E4M3FN: "float8_e4m3fn", TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
                 TensorProto.FLOAT8E5M2: "float8_e5m2", TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
                 TensorProto.FLOAT4E2M1: "float4_e2m1fn"}
NARROW_INTS = {TensorProto.INT4: (4, 1), TensorProto.UINT4: (4, 0), TensorProto.INT2: (2, 1), TensorProto.UINT2: (2, 0)}


def _cast_to(ctx, node, attrs, to):
    """Cast between floats is the identity (MRT computes in float32 and quantizes); to an integer type it is the
    identity on an integer tensor and truncation toward zero on a float one (ONNX's float -> int); to an 8- or 4-bit
    float it rounds to that float's grid (saturating; without saturation overflow is inf/NaN: refused), to a 2- or
    4-bit integer it truncates and wraps."""
    attrs.ignore("round_mode")  # only meaningful for float8 targets
    if _forward_dropped(ctx, node):
        return
    x = ctx.tensor(node.input[0], node)
    if to in FLOAT_TYPES or (to in INTEGER_TYPES and node.input[0] in ctx.integer_tensors):
        ctx.emit("identity", [x], {}, node, out=node.output[0])
    elif to in INTEGER_TYPES:
        ctx.emit("trunc", [x], {}, node, out=node.output[0])
    elif to in NARROW_FLOATS and attrs.get("saturate", 1):
        ctx.emit("narrow_float", [x], {"format": NARROW_FLOATS[to], "saturate": 1}, node, out=node.output[0])
    elif to in NARROW_INTS:
        bits, signed = NARROW_INTS[to]
        ctx.emit("wrap_int", [x], {"bits": bits, "signed": signed}, node, out=node.output[0])
    elif to in NARROW_FLOATS:
        raise UnsupportedOp(f"{where(node)}: Cast to {TensorProto.DataType.Name(to)} with saturate=0 (an overflow "
                            "becomes inf or NaN, which no integer holds) is not supported")
    else:
        raise UnsupportedOp(f"{where(node)}: Cast to {TensorProto.DataType.Name(to)} is not supported (floats, "
                            "integers, bool)")
