"""Multiply-accumulate ops: conv, dense, matmul, and batch_norm (an affine map per channel).

Accumulation is in float64 so that the float reference does not depend on summation order.
"""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import BATCH, broadcast, is_batched, window_out
from mrt.float_ops.window import pad_spatial

F32 = np.float32


def _constant(shape, what, op):
    if is_batched(shape):
        raise GraphError(f"{op}: the {what} must be a constant, not a batched tensor")


def conv(x, w, b=None, *, strides, pads, dilations, groups):
    """Sum over kernel positions of (shifted input) @ (weight slice), channels last: one GEMM
    per position and group, and memory stays at the size of the input (no im2col copy)."""
    nd = w.ndim - 2
    xp = np.ascontiguousarray(np.moveaxis(pad_spatial(x, pads, 0), 1, -1), dtype=np.float64)
    out = tuple(window_out(xp.shape[1 + i], w.shape[2 + i], strides[i], dilations[i], 0, 0) for i in range(nd))
    og, cg = w.shape[0] // groups, w.shape[1]
    y = np.zeros((x.shape[0], *out, w.shape[0]))
    for g in range(groups):
        wg = w[g * og:(g + 1) * og].astype(np.float64)
        for pos in np.ndindex(*w.shape[2:]):
            window = tuple(slice(pos[i] * dilations[i],
                                 pos[i] * dilations[i] + (out[i] - 1) * strides[i] + 1,
                                 strides[i]) for i in range(nd))
            xs = xp[(slice(None), *window, slice(g * cg, (g + 1) * cg))].reshape(-1, cg)
            y[..., g * og:(g + 1) * og] += (xs @ wg[(slice(None), slice(None), *pos)].T
                                            ).reshape(*y.shape[:-1], og)
    if b is not None:
        y += b
    return np.moveaxis(y, -1, 1).astype(F32)


def conv_shape(x, w, b=None, *, strides, pads, dilations, groups):
    _constant(w, "weight", "conv")
    nd = len(w) - 2
    if len(x) != nd + 2 or nd < 1:
        raise GraphError(f"conv: input {x} and weight {w} ranks do not match")
    if not (len(strides) == len(dilations) == nd and len(pads) == 2 * nd):
        raise GraphError(f"conv: strides/dilations need {nd} values and pads {2 * nd}")
    if groups < 1 or x[1] != w[1] * groups or w[0] % groups:
        raise GraphError(f"conv: {x[1]} input channels, weight {w} and groups={groups} mismatch")
    if b is not None:
        _constant(b, "bias", "conv")
        if tuple(b) != (w[0],):
            raise GraphError(f"conv: bias shape {b} is not ({w[0]},)")
    out = tuple(window_out(x[2 + i], w[2 + i], strides[i], dilations[i], pads[i], pads[nd + i])
                for i in range(nd))
    return (x[0], w[0], *out)


def dense(x, w, b=None):
    """x[..., K] @ w[O, K]^T + b[O]: a fully connected layer (ONNX Gemm, normalised)."""
    y = x.astype(np.float64) @ w.T.astype(np.float64)
    if b is not None:
        y += b
    return y.astype(F32)


def dense_shape(x, w, b=None):
    _constant(w, "weight", "dense")
    if len(w) != 2 or len(x) < 2 or x[-1] != w[1]:
        raise GraphError(f"dense: input {x} does not fit weight {w} (want x[..., K], w[O, K])")
    if b is not None:
        _constant(b, "bias", "dense")
        if tuple(b) != (w[0],):
            raise GraphError(f"dense: bias shape {b} is not ({w[0]},)")
    return (*x[:-1], w[0])


def matmul(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(F32)


def matmul_shape(a, b):
    """numpy matmul shapes. The batch axis may be a broadcast axis, or the row axis of `a` when
    `b` is a constant; it must never be contracted or become a column axis."""
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if len(a2) < 2 or len(b2) < 2 or BATCH in (a2[-1], b2[-2], b2[-1]):
        raise GraphError(f"matmul: {a} @ {b} would multiply along the batch axis")
    if a2[-2] is BATCH and is_batched(b):
        raise GraphError(f"matmul: {a} @ {b} would multiply along the batch axis")
    if a2[-1] != b2[-2]:
        raise GraphError(f"matmul: {a} @ {b}: inner dims differ")
    out = (*broadcast(a2[:-2], b2[:-2], op="matmul"), a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def batch_norm(x, scale, bias, mean, var, *, eps):
    shape = (-1,) + (1,) * (x.ndim - 2)
    k = (scale / np.sqrt(var.astype(np.float64) + eps)).reshape(shape)
    return ((x - mean.reshape(shape)) * k + bias.reshape(shape)).astype(F32)


def batch_norm_shape(x, scale, bias, mean, var, *, eps):
    if len(x) < 2:
        raise GraphError(f"batch_norm: input {x} has no channel axis")
    for what, s in zip(("scale", "bias", "mean", "var"), (scale, bias, mean, var)):
        _constant(s, what, "batch_norm")
        if tuple(s) != (x[1],):
            raise GraphError(f"batch_norm: {what} shape {s} is not ({x[1]},)")
    return x


LINEAR = {
    "conv": (conv, conv_shape, ("strides", "pads", "dilations", "groups"), (2, 3)),
    "dense": (dense, dense_shape, (), (2, 3)),
    "matmul": (matmul, matmul_shape, (), (2, 2)),
    "batch_norm": (batch_norm, batch_norm_shape, ("eps",), (5, 5)),
}
