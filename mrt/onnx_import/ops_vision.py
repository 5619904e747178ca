"""Importers for the ONNX ops of vision models that map to CVM opset-2 ops: Resize (10, 11, 13, 18, 19),
Upsample (7, 9) and ConvTranspose (1, 11, 22).

Resize becomes `resize` with one exact rational coordinate map (a, b, d) per spatial axis: the source
coordinate of output index i is (a*i + b) / d, from the ratio the float32 scale stands for (`scale_of`)
or out/in when sizes are given. Nearest rounding is folded into the map, so that
nearest always takes floor((a*i + b) / d):
    floor: x;  ceil: x + (d-1)/d;  round_prefer_ceil: floor(x + 1/2);  round_prefer_floor: ceil(x - 1/2);
    simple (Resize-10, Upsample, as onnxruntime runs them): floor when upsampling, ceil when downsampling.
Everything else (cubic, tf_crop_and_resize, antialiased downsampling, a scale on the batch or channel
axis, keep_aspect_ratio_policy other than stretch) is refused with one line naming the node.
"""
from fractions import Fraction
from math import floor, gcd, lcm

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import optional_input, where

COORD_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn",
               "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def source_map(mode: str, scale: Fraction, size_in: int, size_out: int) -> tuple[Fraction, Fraction]:
    """(A, B): the source coordinate of output index i is A*i + B (ONNX Resize, exact)."""
    if mode == "asymmetric":
        return 1 / scale, Fraction(0)
    if mode == "tf_half_pixel_for_nn":
        return 1 / scale, 1 / (2 * scale)
    if mode == "align_corners":
        return (Fraction(size_in - 1, size_out - 1), Fraction(0)) if size_out > 1 else (Fraction(0), Fraction(0))
    if mode == "pytorch_half_pixel" and size_out == 1:
        return Fraction(0), Fraction(0)
    offset = Fraction(0)
    if mode == "half_pixel_symmetric":
        adjustment = Fraction(size_out) / (scale * size_in)
        offset = Fraction(size_in, 2) * (1 - adjustment)
    return 1 / scale, offset + 1 / (2 * scale) - Fraction(1, 2)


def coord(mode: str, nearest: str | None, scale: Fraction, size_in: int, size_out: int) -> list[int]:
    """The integer map (a, b, d) of one axis: nearest -> floor((a*i + b) / d) is the ONNX pick;
    linear (nearest None) -> (a*i + b) / d is the source coordinate."""
    big_a, big_b = source_map(mode, scale, size_in, size_out)
    d = lcm(big_a.denominator, big_b.denominator)
    a, b = int(big_a * d), int(big_b * d)
    if nearest == "simple":
        nearest = "ceil" if scale < 1 else "floor"
    if nearest == "ceil":
        b += d - 1
    elif nearest in ("round_prefer_ceil", "round_prefer_floor"):
        a, b, d = 2 * a, 2 * b + d - (nearest == "round_prefer_floor"), 2 * d
    g = gcd(a, b, d)
    return [a // g, b // g, d // g]


MAX_SCALE_DENOMINATOR = 1 << 16


def scale_of(value) -> Fraction:
    """The ratio a float32 scale stands for: the closest fraction with a denominator up to 2^16 when it
    rounds to the same float32 (0.6f is 3/5, so (j + 0.5) / 0.6 lands on 2.5 as in a float32 runtime,
    not on the 2.4999999 of the binary fraction), else the float32's exact binary value."""
    exact = Fraction(float(np.float32(value)))
    near = exact.limit_denominator(MAX_SCALE_DENOMINATOR)
    return near if np.float32(float(near)) == np.float32(value) else exact


def _refuse(node, why: str):
    raise UnsupportedOp(f"{where(node)}: {why}")


def _scales_and_sizes(ctx, node, x, scales, sizes, axes):
    """Per axis of x: the scale (Fraction) and the output size. Exactly one of scales / sizes."""
    rank = len(x)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    given = scales if scales is not None else sizes
    if given is None or len(given) != len(axes):
        _refuse(node, f"needs scales or sizes with one value per axis of {axes}")
    full_scale, full_size = [Fraction(1)] * rank, list(x)
    for a, v in zip(axes, given):
        if scales is not None:
            full_scale[a] = scale_of(v)
            full_size[a] = floor(x[a] * full_scale[a]) if a else x[a]
        else:
            full_size[a] = int(v)
            full_scale[a] = Fraction(int(v), x[a]) if a else Fraction(1)
    if any(s <= 0 for s in full_scale[1:]) or min(full_size[1:]) < 1:
        _refuse(node, f"scales {[float(s) for s in full_scale]} give an empty or negative output")
    if full_scale[1] != 1 or full_size[1] != x[1]:
        _refuse(node, "resizing the channel axis is not supported")
    if rank != 4:
        _refuse(node, f"only 2-D (N, C, H, W) resizing is supported, the input is {x}")
    return full_scale[2:], full_size[2:]


def _emit_resize(ctx, node, mode, coord_mode, nearest, scales, sizes, axes=None):
    if mode not in ("nearest", "linear"):
        _refuse(node, f"mode {mode!r} is not supported (nearest, linear)")
    if coord_mode not in COORD_MODES:
        _refuse(node, f"coordinate_transformation_mode {coord_mode!r} is not supported")
    if mode == "nearest" and nearest not in NEAREST_MODES:
        _refuse(node, f"nearest_mode {nearest!r} is not supported")
    x = ctx.shape(node.input[0], node)
    (sh, sw), (oh, ow) = _scales_and_sizes(ctx, node, x, scales, sizes, axes)
    near = nearest if mode == "nearest" else None
    attrs = {"size": [oh, ow], "mode": mode, "coord_h": coord(coord_mode, near, sh, x[2], oh),
             "coord_w": coord(coord_mode, near, sw, x[3], ow)}
    ctx.emit("resize", [ctx.tensor(node.input[0], node)], attrs, node, out=node.output[0])


def _const_or_none(ctx, node, k, what):
    name = optional_input(node, k)
    if name is None:
        return None
    value = np.asarray(ctx.const(name, node, what))
    return None if value.size == 0 else value.reshape(-1)


def resize(ctx, node, attrs):
    """Resize 11..19 (inputs X, roi, scales, sizes) and 10 (X, scales: asymmetric, simple nearest).
    roi is read only by tf_crop_and_resize (refused), so it is ignored."""
    mode = attrs.get("mode", "nearest")
    if len(node.input) == 2:  # Resize-10: its second input is scales (from 11 on, roi; scales or sizes follow)
        return _emit_resize(ctx, node, mode, "asymmetric", "simple", _const_or_none(ctx, node, 1, "Resize scales"),
                            None)
    coord_mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = attrs.get("nearest_mode", "round_prefer_floor")
    # cubic_coeff_a: cubic only; extrapolation_value: tf_crop_and_resize only (both refused); exclude_outside
    # zeroes the weights of taps outside the input and renormalizes: nearest and linear read the clamped edge
    # element there, the same value
    attrs.ignore("cubic_coeff_a", "extrapolation_value", "exclude_outside")
    if attrs.get("antialias", 0) and mode == "linear":
        _refuse(node, "antialias=1 is not supported")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        _refuse(node, "keep_aspect_ratio_policy other than 'stretch' is not supported")
    if coord_mode == "tf_crop_and_resize":
        _refuse(node, "coordinate_transformation_mode 'tf_crop_and_resize' (roi) is not supported")
    _emit_resize(ctx, node, mode, coord_mode, nearest, _const_or_none(ctx, node, 2, "Resize scales"),
                 _const_or_none(ctx, node, 3, "Resize sizes"), attrs.get("axes"))


def upsample(ctx, node, attrs):
    """Upsample 7 (scales attribute) and 9 (scales input): asymmetric coordinates, as Resize-10."""
    mode = attrs.get("mode", "nearest")
    mode = "linear" if mode in ("linear", "bilinear") else mode
    scales = attrs.get("scales") if len(node.input) < 2 else _const_or_none(ctx, node, 1, "Upsample scales")
    _emit_resize(ctx, node, mode, "asymmetric", "simple", scales, None)


def transpose_pads(node, x, kernel, strides, dilations, output_padding, auto_pad, output_shape, pads):
    """Explicit pads and output_padding of a ConvTranspose. With output_shape (or SAME_*: output = input *
    stride) the total padding s*(in-1) + output_padding + d*(k-1) + 1 - out is split as ONNX and
    onnxruntime do: the odd unit goes to the tail for SAME_UPPER, to the head otherwise. A negative tail
    (output_shape beyond the full output) is extra output_padding; a negative head is refused."""
    if output_shape is None and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return ([0, 0, 0, 0] if auto_pad == "VALID" else list(pads)), list(output_padding)
    if output_shape is None:
        output_shape = [x[2 + i] * strides[i] for i in range(2)]
    if len(output_shape) != 2:
        _refuse(node, f"output_shape {output_shape} must give the 2 spatial sizes")
    head, tail, extra = [], [], list(output_padding)
    for i in range(2):
        total = (strides[i] * (x[2 + i] - 1) + output_padding[i] + dilations[i] * (kernel[i] - 1) + 1
                 - output_shape[i])
        small, big = total // 2, total - total // 2
        h, t = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        if h < 0:
            _refuse(node, f"output_shape {list(output_shape)} would pad the output's head")
        head.append(h)
        tail.append(max(t, 0))
        extra[i] += max(-t, 0)
    return head + tail, extra


def conv_transpose(ctx, node, attrs):
    w = ctx.const(node.input[1], node, "ConvTranspose weight")
    x = ctx.shape(node.input[0], node)
    if w.ndim != 4 or len(x) != 4:
        _refuse(node, f"only 2-D transposed convolutions are supported (weight {w.shape}, input {x})")
    kernel = list(w.shape[2:])
    if attrs.get("kernel_shape", kernel) != kernel:
        _refuse(node, "kernel_shape differs from the weight's shape")
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    output_padding = attrs.get("output_padding", [0, 0])
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        _refuse(node, f"auto_pad {auto_pad!r} is not supported")
    output_shape = attrs.get("output_shape")
    if output_shape is not None and len(output_shape) == 4:
        output_shape = output_shape[2:]
    pads, output_padding = transpose_pads(node, x, kernel, strides, dilations, output_padding, auto_pad,
                                          output_shape, attrs.get("pads", [0, 0, 0, 0]))
    if len(strides) != 2 or len(dilations) != 2 or len(output_padding) != 2 or len(pads) != 4:
        _refuse(node, "strides/dilations/output_padding need 2 values and pads 4")
    inputs = [ctx.tensor(node.input[0], node), ctx.tensor(node.input[1], node)]
    if optional_input(node, 2):
        ctx.const(node.input[2], node, "ConvTranspose bias")
        inputs.append(ctx.tensor(node.input[2], node))
    ctx.emit("conv_transpose", inputs, {"strides": strides, "pads": pads, "dilations": dilations,
                                        "output_padding": output_padding, "groups": attrs.get("group", 1)},
             node, out=node.output[0])


# op_type -> (handler, since_versions of the op schema the handler implements); default domain
HANDLERS: dict = {
    "Resize": (resize, {10, 11, 13, 18, 19}),
    "Upsample": (upsample, {7, 9}),
    "ConvTranspose": (conv_transpose, {1, 11, 22}),
}
