"""Float ops of vision models that map to CVM opset-2 ops: resize (nearest, bilinear) and conv_transpose.

`resize` carries its coordinate maps the way CVM's resize2d does: per spatial axis (a, b, d), the
source coordinate of output index i is exactly (a*i + b) / d. The importer turns every ONNX
coordinate_transformation_mode and nearest_mode into that form (mrt.onnx_import.ops_vision), so the
float op and the integer op read the same positions; only the bilinear weights differ (float64 here,
2^-frac_bits fixed point in CVM). Nearest takes floor((a*i + b) / d), clipped to the axis.
"""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import is_batched

F32 = np.float32
RESIZE_MODES = ("nearest", "linear")


def _axis(v, axis, size_out, coord, mode):
    a, b, d = coord
    n = a * np.arange(size_out, dtype=np.int64) + b
    t = n // d
    i0 = np.clip(t, 0, v.shape[axis] - 1)
    if mode == "nearest":
        return np.take(v, i0, axis=axis)
    f = ((n - t * d) / d).reshape((-1,) + (1,) * (v.ndim - 1 - axis))
    i1 = np.clip(t + 1, 0, v.shape[axis] - 1)
    return np.take(v, i0, axis=axis) * (1 - f) + np.take(v, i1, axis=axis) * f


def resize(x, *, size, mode, coord_h, coord_w):
    """Separable: along H, then along W (bilinear = two linear interpolations), in float64."""
    y = _axis(x.astype(np.float64), 2, size[0], coord_h, mode)
    return _axis(y, 3, size[1], coord_w, mode).astype(F32)


def resize_shape(x, *, size, mode, coord_h, coord_w):
    if len(x) != 4 or not is_batched(x):
        raise GraphError(f"resize: input {x} is not a batched (N, C, H, W) tensor")
    if mode not in RESIZE_MODES:
        raise GraphError(f"resize: mode {mode!r} is not one of {RESIZE_MODES}")
    if len(size) != 2 or min(size) < 1:
        raise GraphError(f"resize: size {size} must be 2 positive ints")
    for c in (coord_h, coord_w):
        if len(c) != 3 or c[0] < 0 or c[2] < 1:
            raise GraphError(f"resize: coordinate map {c} must be (a >= 0, b, d >= 1)")
    return (*x[:2], *size)


def conv_transpose_size(size, k, s, d, pad_begin, pad_end, output_padding):
    return s * (size - 1) + output_padding + d * (k - 1) + 1 - pad_begin - pad_end


def conv_transpose(x, w, b=None, *, strides, pads, dilations, output_padding, groups):
    """Every input pixel scattered through every tap into the full (uncropped) output, float64, then
    cropped by the pads (ONNX ConvTranspose)."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    full = (sh * (h - 1) + dh * (kh - 1) + 1 + output_padding[0], sw * (wd - 1) + dw * (kw - 1) + 1 + output_padding[1])
    y = np.zeros((n, groups, og) + full)
    xg = x.astype(np.float64).reshape(n, groups, c // groups, h, wd)
    wg = w.astype(np.float64).reshape(groups, c // groups, og, kh, kw)
    for u in range(kh):
        for v in range(kw):
            y[:, :, :, u * dh:u * dh + sh * (h - 1) + 1:sh, v * dw:v * dw + sw * (wd - 1) + 1:sw] += np.einsum(
                "ngchw,gco->ngohw", xg, wg[:, :, :, u, v])
    oh, ow = (conv_transpose_size(h, kh, sh, dh, pads[0], pads[2], output_padding[0]),
              conv_transpose_size(wd, kw, sw, dw, pads[1], pads[3], output_padding[1]))
    y = y.reshape(n, groups * og, *full)[:, :, pads[0]:pads[0] + oh, pads[1]:pads[1] + ow]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(F32)


def conv_transpose_shape(x, w, b=None, *, strides, pads, dilations, output_padding, groups):
    if is_batched(w) or (b is not None and is_batched(b)):
        raise GraphError("conv_transpose: the weight and bias must be constants")
    if len(x) != 4 or len(w) != 4:
        raise GraphError(f"conv_transpose: input {x} and weight {w} must both be rank 4 (2-D only)")
    if not (len(strides) == len(dilations) == len(output_padding) == 2 and len(pads) == 4):
        raise GraphError("conv_transpose: strides/dilations/output_padding need 2 values and pads 4")
    if min(pads) < 0 or min((*strides, *dilations)) < 1 or min(output_padding) < 0:
        raise GraphError("conv_transpose: negative pads/output_padding or non-positive strides/dilations")
    if groups < 1 or x[1] % groups or w[0] != x[1]:
        raise GraphError(f"conv_transpose: {x[1]} input channels, weight {w} and groups={groups} mismatch")
    if b is not None and tuple(b) != (w[1] * groups,):
        raise GraphError(f"conv_transpose: bias shape {b} is not ({w[1] * groups},)")
    out = tuple(conv_transpose_size(x[2 + i], w[2 + i], strides[i], dilations[i], pads[i], pads[2 + i],
                                    output_padding[i]) for i in range(2))
    if min(out) < 1:
        raise GraphError(f"conv_transpose: output {out} would be empty")
    return (x[0], w[1] * groups, *out)


# name: (run, shape rule, attribute names, (min inputs, max inputs))
VISION: dict = {
    "resize": (resize, resize_shape, ("size", "mode", "coord_h", "coord_w"), (1, 1)),
    "conv_transpose": (conv_transpose, conv_transpose_shape,
                       ("strides", "pads", "dilations", "output_padding", "groups"), (2, 3)),
}
