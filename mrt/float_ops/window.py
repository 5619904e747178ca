"""Sliding windows over the spatial axes of an array: the one building block of conv and every
pooling op, for any number of spatial dims, as strided views (no copies)."""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from cvm.arith import window_out


def split_pads(pads):
    """ONNX-order pads (all begins, then all ends) -> [(begin, end), ...] per spatial axis."""
    nd = len(pads) // 2
    return [(pads[i], pads[nd + i]) for i in range(nd)]


def pad_spatial(x, pads, value):
    """Pad the spatial axes (2, 3, ...) of x with `value`; batch and channel axes are never padded."""
    if not any(pads):
        return x
    return np.pad(x, [(0, 0), (0, 0), *split_pads(pads)], mode="constant", constant_values=value)


def out_shape(spatial, kernel, strides, dilations):
    """The window counts along each spatial axis of an already padded array."""
    return tuple(window_out(spatial[i], kernel[i], strides[i], dilations[i], 0, 0) for i in range(len(kernel)))


def windows(x, kernel, strides, dilations):
    """A read-only view of shape (N, C, *out, *kernel) of the windows of an already padded
    (N, C, *spatial) x."""
    nd = len(kernel)
    out = out_shape(x.shape[2:], kernel, strides, dilations)
    st = x.strides
    view_strides = (st[:2] + tuple(st[2 + i] * strides[i] for i in range(nd))
                    + tuple(st[2 + i] * dilations[i] for i in range(nd)))
    return as_strided(x, x.shape[:2] + out + tuple(kernel), view_strides, writeable=False)


def windows_last(x, kernel, strides, dilations):
    """A read-only view of shape (N, *out, *kernel, C) of the windows of an already padded
    channels-last (N, *spatial, C) x: each window's elements in (kernel..., channel) order."""
    nd = len(kernel)
    out = out_shape(x.shape[1:1 + nd], kernel, strides, dilations)
    st = x.strides
    view_strides = ((st[0],) + tuple(st[1 + i] * strides[i] for i in range(nd))
                    + tuple(st[1 + i] * dilations[i] for i in range(nd)) + (st[-1],))
    return as_strided(x, (x.shape[0], *out, *kernel, x.shape[-1]), view_strides, writeable=False)


def shifted(x, pos, out, strides, dilations):
    """The view of an already padded (N, C, *spatial) x that kernel position `pos` reads for every
    output position: shape (N, C, *out)."""
    return x[(slice(None), slice(None), *(slice(p * d, p * d + (o - 1) * s + 1, s)
                                          for p, o, s, d in zip(pos, out, strides, dilations)))]


def kernel_axes(nd):
    """The axes of the kernel in a `windows` view with nd spatial dims."""
    return tuple(range(2 + nd, 2 + 2 * nd))
