"""Multiply-accumulate ops: conv, dense, matmul, and batch_norm (an affine map per channel).

Products and sums are in float64 (ACC) and rounded to float32 once, at the end: summation order
then almost never shows in the float32 result, so the float reference (and the calibration
thresholds taken from it) do not depend on the BLAS kernel or the batch size. The work is BLAS
GEMMs over blocks of samples (conv: im2col, at most BLOCK elements at a time), never a Python loop
per element.
"""
from math import prod

import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import BATCH, broadcast, is_batched, window_out
from mrt.float_ops.window import out_shape, pad_spatial, shifted, windows_last

F32 = np.float32
ACC = np.float64
BLOCK = 1 << 22  # elements of one conv work block (32 MiB in float64): bounds a conv's temporaries


def _constant(shape, what, op):
    if is_batched(shape):
        raise GraphError(f"{op}: the {what} must be a constant, not a batched tensor")


def _blocks(n, per_sample):
    """Sample ranges of at most BLOCK elements of work each (at least one sample)."""
    step = max(1, BLOCK // max(per_sample, 1))
    return [(s, min(n, s + step)) for s in range(0, n, step)]


def conv(x, w, b=None, *, strides, pads, dilations, groups):
    """im2col + GEMM, channels last: per block of samples, the windows (kernel positions x input
    channels of a group) become rows of a matrix that one GEMM per group multiplies by the weights."""
    (o, cg), kernel = w.shape[:2], w.shape[2:]
    og = o // groups
    xp = pad_spatial(x, pads, 0)
    out = out_shape(xp.shape[2:], kernel, strides, dilations)
    if cg == 1 and og == 1:
        return _depthwise(xp, w, b, out, strides, dilations)
    wm = np.moveaxis(w.reshape(groups, og, cg, *kernel), 2, -1).reshape(groups, og, -1).astype(ACC)
    bias = None if b is None else b.reshape(groups, 1, og).astype(ACC)
    y = np.empty((x.shape[0], o, *out), F32)
    for s, e in _blocks(x.shape[0], prod(out) * prod(kernel) * x.shape[1]):
        xl = np.moveaxis(xp[s:e], 1, -1).astype(ACC)  # (n, *spatial, C), contiguous
        v = windows_last(xl, kernel, strides, dilations)  # (n, *out, *kernel, C)
        v = np.moveaxis(v.reshape(*v.shape[:-1], groups, cg), -2, 0)  # (G, n, *out, *kernel, cg)
        acc = np.matmul(np.ascontiguousarray(v).reshape(groups, -1, wm.shape[-1]), wm.transpose(0, 2, 1))
        if bias is not None:
            acc += bias
        acc = acc.reshape(groups, e - s, prod(out), og).transpose(1, 0, 3, 2)  # (n, G, og, P)
        y[s:e] = acc.reshape(e - s, o, *out)
    return y


def _depthwise(xp, w, b, out, strides, dilations):
    """One input channel per output channel: a multiply-add per kernel position over whole blocks
    (a GEMM per channel would be a GEMM of one column)."""
    nd, (n, c) = w.ndim - 2, xp.shape[:2]
    wk = w.reshape(c, -1).astype(ACC)
    cshape = (c,) + (1,) * nd
    y = np.empty((n, c, *out), F32)
    for s, e in _blocks(n, c * prod(out)):
        acc = np.zeros((e - s, c, *out), ACC)
        for k, pos in enumerate(np.ndindex(*w.shape[2:])):
            acc += shifted(xp[s:e], pos, out, strides, dilations) * wk[:, k].reshape(cshape)
        if b is not None:
            acc += b.astype(ACC).reshape(cshape)
        y[s:e] = acc
    return y


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
    """x[..., K] @ w[O, K]^T + b[O]: a fully connected layer (ONNX Gemm, normalised). The weight
    goes to float64 BLOCK elements at a time (VGG's 103M-element fc6 would double otherwise)."""
    x64 = x.astype(ACC)
    y = np.empty((*x.shape[:-1], w.shape[0]), F32)
    step = max(1, BLOCK // max(w.shape[1], 1))
    for s in range(0, w.shape[0], step):
        acc = x64 @ w[s:s + step].astype(ACC).T
        if b is not None:
            acc += b[s:s + step]
        y[..., s:s + step] = acc
    return y


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
