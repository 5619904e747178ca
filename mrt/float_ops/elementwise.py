"""Element-wise float ops: arithmetic with numpy broadcasting, activations, softmax.

Each op is a plain function on full arrays (batch axis 0 included) with its shape rule beside it.
"""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import broadcast, is_batched, norm_axis

F32 = np.float32


def same_shape(x):
    return x


def _binary_shape(name):
    def rule(a, b):
        return broadcast(a, b, op=name)
    return rule


def add(a, b):
    return np.add(a, b, dtype=F32)


def sub(a, b):
    return np.subtract(a, b, dtype=F32)


def mul(a, b):
    return np.multiply(a, b, dtype=F32)


def div(a, b):
    return np.divide(a, b, dtype=F32)


def div_shape(a, b):
    if is_batched(b):
        raise GraphError("div: the divisor must be a constant, not a batched tensor")
    return broadcast(a, b, op="div")


def relu(x):
    return np.maximum(x, F32(0))


def leaky_relu(x, *, alpha):
    return np.where(x >= 0, x, x * F32(alpha)).astype(F32)


def clip(x, *, min, max):  # noqa: A002 - the IR attribute names
    return np.clip(x, F32(min), F32(max)).astype(F32)


def sigmoid(x):
    e = np.exp(-np.abs(x, dtype=np.float64))  # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(F32)


def hard_sigmoid(x, *, alpha, beta):
    return np.clip(x * F32(alpha) + F32(beta), F32(0), F32(1)).astype(F32)


def tanh(x):
    return np.tanh(x).astype(F32)


def softmax(x, *, axis):
    e = np.exp((x - x.max(axis=axis, keepdims=True)).astype(np.float64))
    return (e / e.sum(axis=axis, keepdims=True)).astype(F32)


def softmax_shape(x, *, axis):
    if norm_axis(axis, len(x), "softmax") != axis:
        raise GraphError(f"softmax: axis {axis} must be given as a non-negative axis")
    return x


NORMS = ("l1", "l2", "max")


def normalize(x, *, norm):
    """Row normalisation over the last axis as onnxruntime's ai.onnx.ml Normalizer computes it
    (MAX divides by the signed maximum; an all-zero divisor gives zeros)."""
    x64 = x.astype(np.float64)
    if norm == "l1":
        d = np.abs(x64).sum(axis=-1, keepdims=True)
    elif norm == "l2":
        d = np.sqrt((x64 * x64).sum(axis=-1, keepdims=True))
    else:
        d = x64.max(axis=-1, keepdims=True)
    return np.divide(x64, d, out=np.zeros_like(x64), where=d != 0).astype(F32)


def normalize_shape(x, *, norm):
    if norm not in NORMS:
        raise GraphError(f"normalize: norm {norm!r} is not one of {NORMS}")
    if len(x) < 2:
        raise GraphError("normalize: needs a feature axis after the batch axis")
    return x


# name: (run, shape rule, attribute names, (min inputs, max inputs))
ELEMENTWISE = {
    "add": (add, _binary_shape("add"), (), (2, 2)),
    "sub": (sub, _binary_shape("sub"), (), (2, 2)),
    "mul": (mul, _binary_shape("mul"), (), (2, 2)),
    "div": (div, div_shape, (), (2, 2)),
    "relu": (relu, same_shape, (), (1, 1)),
    "leaky_relu": (leaky_relu, lambda x, alpha: x, ("alpha",), (1, 1)),
    "clip": (clip, lambda x, min, max: x, ("min", "max"), (1, 1)),
    "sigmoid": (sigmoid, same_shape, (), (1, 1)),
    "hard_sigmoid": (hard_sigmoid, lambda x, alpha, beta: x, ("alpha", "beta"), (1, 1)),
    "tanh": (tanh, same_shape, (), (1, 1)),
    "softmax": (softmax, softmax_shape, ("axis",), (1, 1)),
    "normalize": (normalize, normalize_shape, ("norm",), (1, 1)),
}
