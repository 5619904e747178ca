"""Float ops of transformer text models: embed (rows of a constant table by a batched integer index:
token embeddings, CVM's gather), layer_norm over the last axis (ONNX LayerNormalization, or the written-out
form mrt.passes.fuse_layer_norm finds) and masked_softmax (softmax over the last axis of scores plus an
additive bias computed from a mask tensor by a univariate program: mrt.passes.fuse_masked_softmax) and
div_tensor (a division by a batched divisor: mean pooling's token count, an L2 norm).
Each is quantized by mrt.quantize.rules_text."""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import broadcast, is_batched
from mrt.float_ops.unary import run_program

F32 = np.float32


def embed(ids, table):
    """table[ids]: ids are integer-valued floats (a graph input of integers)."""
    idx = ids.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(table)):
        raise GraphError(f"embed: index {int(idx.min() if idx.min() < 0 else idx.max())} is outside the table's "
                         f"{len(table)} rows")
    return table[idx].astype(F32)


def embed_shape(ids, table):
    if not is_batched(ids) or is_batched(table) or len(table) < 1:
        raise GraphError(f"embed: needs a batched index {ids} and a constant table {table}")
    return (*ids, *table[1:])


def layer_norm(x, gamma=None, beta=None, *, epsilon):
    """(x - mean) / sqrt(var + epsilon) over the last axis (float64), then * gamma + beta."""
    v = x.astype(np.float64)
    d = v - v.mean(axis=-1, keepdims=True)
    y = d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + epsilon)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y.astype(F32)


def layer_norm_shape(x, gamma=None, beta=None, *, epsilon):
    if not is_batched(x) or len(x) < 2:
        raise GraphError(f"layer_norm: input {x} is not batched with a feature axis")
    for p in (gamma, beta):
        if p is not None and (is_batched(p) or tuple(p) not in ((x[-1],), (1, x[-1]))):
            raise GraphError(f"layer_norm: gamma/beta of shape {p} do not match the last axis of {x}")
    if not epsilon >= 0:
        raise GraphError(f"layer_norm: epsilon {epsilon} must be >= 0")
    return x


def masked_softmax(x, mask, constant=None, *, program):
    """softmax(x + program(mask) [+ constant]) over the last axis, as the float model computes it (float64)."""
    bias = run_program(mask.astype(F32), program) if program else mask  # the empty program: a constant bias
    z = x.astype(np.float64) + bias.astype(np.float64)
    if constant is not None:  # a constant mask besides the computed one
        z = z + constant.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=-1, keepdims=True)).astype(F32)


def masked_softmax_shape(x, mask, constant=None, *, program):
    if not is_batched(x) or not (is_batched(mask) or not program):
        raise GraphError(f"masked_softmax: scores {x} and mask {mask} must both be batched (or the mask a "
                         "constant read by the empty program)")
    out = broadcast(x, mask, *(() if constant is None else (constant,)), op="masked_softmax")
    if tuple(out) != tuple(x):
        raise GraphError(f"masked_softmax: the mask {mask} must broadcast to the scores {x}")
    return x


def div_tensor(a, b):
    """a / b with a batched divisor (IR div takes constant divisors only)."""
    return np.divide(a, b, dtype=F32)


def div_tensor_shape(a, b):
    if not is_batched(b):
        raise GraphError("div_tensor: the divisor is a constant; use div")
    return broadcast(a, b, op="div_tensor")


# name: (run, shape rule, attribute names, (min inputs, max inputs))
TEXT = {
    "div_tensor": (div_tensor, div_tensor_shape, (), (2, 2)),
    "embed": (embed, embed_shape, (), (2, 2)),
    "layer_norm": (layer_norm, layer_norm_shape, ("epsilon",), (1, 3)),
    "masked_softmax": (masked_softmax, masked_softmax_shape, ("program",), (2, 3)),
}
