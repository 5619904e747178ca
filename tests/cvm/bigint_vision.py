"""A naive big-integer evaluator of the opset-2 vision ops (docs/spec.md section 14), written from the
spec text alone: Python integers and explicit index loops, nothing shared with cvm/ops."""
from __future__ import annotations

import itertools

import numpy as np


def _floor_div(n: int, d: int) -> int:
    return n // d  # Python's // is floor division for any sign


def _source(i: int, coord, size: int, mode: int, k: int):
    """(i0, i1, w0, w1) of output index i on one axis."""
    a, b, d = coord
    n = a * i + b
    t = _floor_div(n, d)
    r = n - t * d
    clip = lambda v: min(max(v, 0), size - 1)  # noqa: E731
    if mode == 0:
        return clip(t), clip(t), 1, 0
    w1 = _floor_div(r * 2 ** (k + 1) + d, 2 * d)
    return clip(t), clip(t + 1), 2 ** k - w1, w1


def resize2d(x, size, mode, coord_h, coord_w, frac_bits):
    n, c, h, w = x.shape
    oh, ow = size
    out = np.empty((n, c, oh, ow), object)
    for bi, ch, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        hi0, hi1, hw0, hw1 = _source(i, coord_h, h, mode, frac_bits)
        wi0, wi1, ww0, ww1 = _source(j, coord_w, w, mode, frac_bits)
        if mode == 0:
            out[bi, ch, i, j] = int(x[bi, ch, hi0, wi0])
            continue
        s = sum(p * q * int(x[bi, ch, a, b]) for p, a in ((hw0, hi0), (hw1, hi1)) for q, b in ((ww0, wi0), (ww1, wi1)))
        shift = 2 * frac_bits
        out[bi, ch, i, j] = s if shift == 0 else _floor_div(s + 2 ** (shift - 1), 2 ** shift)
    return out


def conv_transpose2d(x, w, b, strides, pads, dilations, output_padding, groups):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oph, opw) = strides, dilations, pads, output_padding
    oh = sh * (h - 1) + oph + dh * (kh - 1) + 1 - pt - pb
    ow = sw * (wd - 1) + opw + dw * (kw - 1) + 1 - pl - pr
    cg = c // groups
    out = np.empty((n, og * groups, oh, ow), object)
    for bi, o in itertools.product(range(n), range(og * groups)):
        g, ol = divmod(o, og)
        for p, q in itertools.product(range(oh), range(ow)):
            acc = 0 if b is None else int(b[o])
            for ci, i, u, j, v in itertools.product(range(g * cg, (g + 1) * cg), range(h), range(kh), range(wd),
                                                     range(kw)):
                if i * sh + u * dh - pt == p and j * sw + v * dw - pl == q:
                    acc += int(x[bi, ci, i, j]) * int(w[ci, ol, u, v])
            out[bi, o, p, q] = acc
    return out
