"""Ops that only move or copy values: flatten, reshape, transpose, concat, pad, identity, dropout.

`reshape` and `flatten` keep the batch axis by construction: their shapes are per sample.
"""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import is_batched, norm_axis, numel

F32 = np.float32


def flatten(x):
    return x.reshape(x.shape[0], -1)


def flatten_shape(x):
    return (x[0], numel(x))


def reshape(x, *, shape):
    return x.reshape(x.shape[0], *shape)


def reshape_shape(x, *, shape):
    if not all(isinstance(d, int) and d >= 1 for d in shape):
        raise GraphError(f"reshape: target {shape} must be concrete per-sample dims (>= 1)")
    if numel(x) != int(np.prod(shape)):
        raise GraphError(f"reshape: cannot reshape {x} to per-sample {shape}")
    return (x[0], *shape)


def transpose(x, *, perm):
    return np.transpose(x, perm)


def transpose_shape(x, *, perm):
    if sorted(perm) != list(range(len(x))):
        raise GraphError(f"transpose: perm {perm} is not a permutation of {len(x)} axes")
    if perm[0] != 0:
        raise GraphError(f"transpose: perm {perm} moves the batch axis")
    return tuple(x[p] for p in perm)


def concat(*xs, axis):
    return np.concatenate(xs, axis=axis)


def concat_shape(*xs, axis):
    if not all(is_batched(x) for x in xs):
        raise GraphError("concat: every input must be batched (a constant has no batch axis "
                         "to concatenate along)")
    if norm_axis(axis, len(xs[0]), "concat") != axis:
        raise GraphError(f"concat: axis {axis} must be given as a non-negative axis")
    if any(len(x) != len(xs[0]) or x[:axis] + x[axis + 1:] != xs[0][:axis] + xs[0][axis + 1:]
           for x in xs):
        raise GraphError(f"concat: shapes {xs} differ outside axis {axis}")
    return (*xs[0][:axis], sum(x[axis] for x in xs), *xs[0][axis + 1:])


def pad(x, *, pads, value):
    r = x.ndim
    return np.pad(x, [(pads[i], pads[r + i]) for i in range(r)], mode="constant",
                  constant_values=F32(value))


def pad_shape(x, *, pads, value):
    r = len(x)
    if len(pads) != 2 * r or min(pads) < 0:
        raise GraphError(f"pad: pads {pads} must be {2 * r} non-negative values")
    if pads[0] or pads[r]:
        raise GraphError(f"pad: pads {pads} pad the batch axis")
    return (x[0], *(x[i] + pads[i] + pads[r + i] for i in range(1, r)))


def identity(x):
    return x


LAYOUT = {
    "flatten": (flatten, flatten_shape, (), (1, 1)),
    "reshape": (reshape, reshape_shape, ("shape",), (1, 1)),
    "transpose": (transpose, transpose_shape, ("perm",), (1, 1)),
    "concat": (concat, concat_shape, ("axis",), (1, 64)),
    "pad": (pad, pad_shape, ("pads", "value"), (1, 1)),
    "identity": (identity, lambda x: x, (), (1, 1)),
    "dropout": (identity, lambda x: x, (), (1, 1)),
}
