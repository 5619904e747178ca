"""Float ops of audio front ends: magnitude, sqrt(a^2 + b^2) of two tensors of one shape (the real and imaginary
parts of an STFT written as two constant-kernel convolutions; mrt.passes.fuse_magnitude finds the written-out
form). Quantized by mrt.quantize.rules_audio as exact integer squares, their sum and an integer square root,
so the power spectrum's dynamic range is never squeezed into an activation's bits."""
import numpy as np

from mrt.errors import GraphError

F32 = np.float32


def magnitude(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.sqrt(a64 * a64 + b64 * b64).astype(F32)


def magnitude_shape(a, b):
    if tuple(a) != tuple(b):
        raise GraphError(f"magnitude: parts of shapes {a} and {b} differ")
    return tuple(a)


AUDIO = {
    "magnitude": (magnitude, magnitude_shape, (), (2, 2)),
}
