"""Sliding windows over the spatial axes (2, 3, ...) of an (N, C, *spatial) array: the one
building block of conv and every pooling op, for any number of spatial dims."""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from cvm.arith import window_out


def split_pads(pads):
    """ONNX-order pads (all begins, then all ends) -> [(begin, end), ...] per spatial axis."""
    nd = len(pads) // 2
    return [(pads[i], pads[nd + i]) for i in range(nd)]


def pad_spatial(x, pads, value):
    """Pad the spatial axes of x with `value`; batch and channel axes are never padded."""
    if not any(pads):
        return x
    return np.pad(x, [(0, 0), (0, 0), *split_pads(pads)], mode="constant", constant_values=value)


def windows(x, kernel, strides, dilations):
    """A read-only view of shape (N, C, *out, *kernel) of the windows of an already padded x."""
    nd = len(kernel)
    spatial = x.shape[2:]
    out = tuple(window_out(spatial[i], kernel[i], strides[i], dilations[i], 0, 0) for i in range(nd))
    st = x.strides
    view_strides = (st[:2] + tuple(st[2 + i] * strides[i] for i in range(nd))
                    + tuple(st[2 + i] * dilations[i] for i in range(nd)))
    return as_strided(x, x.shape[:2] + out + tuple(kernel), view_strides, writeable=False)


def kernel_axes(nd):
    """The axes of the kernel in a `windows` view with nd spatial dims."""
    return tuple(range(2 + nd, 2 + 2 * nd))
