"""A second, deliberately naive evaluator of opset 1: Python integers and explicit index loops.

It shares nothing with cvm/ops but the spec, so agreement with the reference is evidence that both
implement the written semantics (object arrays hold Python ints: no overflow is possible)."""
from __future__ import annotations

import itertools

import numpy as np


def obj(a) -> np.ndarray:
    out = np.empty(np.shape(a), dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = int(np.asarray(a)[idx])
    return out


def _bcast(a, b):
    return np.broadcast_arrays(a, b)


def binary(fn, a, b):
    a, b = _bcast(obj(a), obj(b))
    out = np.empty(a.shape, object)
    for idx in np.ndindex(a.shape):
        out[idx] = fn(int(a[idx]), int(b[idx]))
    return out


def round_shift(v: int, s: int) -> int:
    return v if s == 0 else (v + 2 ** (s - 1)) // 2 ** s


def requant(x, m, shift, bits, axis):
    x = obj(x)
    lim = 2 ** (bits - 1) - 1
    out = np.empty(x.shape, object)
    for idx in np.ndindex(x.shape):
        mult = int(m[0]) if len(m) == 1 else int(m[idx[axis + 1]])
        out[idx] = min(max(round_shift(int(x[idx]) * mult, shift), -lim), lim)
    return out


def div(x, d):
    return binary(lambda a, b: (2 * a + b) // (2 * b), x, d)


def conv2d(x, w, b, strides, pads, dilations, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.empty((n, o, oh, ow), object)
    for bi, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        acc = 0 if b is None else int(b[oc])
        for ci, u, v in itertools.product(range(cg), range(kh), range(kw)):
            r, s = i * sh + u * dh - pt, j * sw + v * dw - pl
            if 0 <= r < h and 0 <= s < wd:
                acc += int(w[oc, ci, u, v]) * int(x[bi, g * cg + ci, r, s])
        out[bi, oc, i, j] = acc
    return out


def dense(x, w, b):
    out = np.empty(x.shape[:-1] + (w.shape[0],), object)
    for idx in np.ndindex(out.shape):
        acc = 0 if b is None else int(b[idx[-1]])
        for k in range(w.shape[1]):
            acc += int(x[idx[:-1] + (k,)]) * int(w[idx[-1], k])
        out[idx] = acc
    return out


def max_pool2d(x, kernel, strides, pads, dilations):
    n, c, h, wd = x.shape
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = kernel, strides, dilations, pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, c, oh, ow), object)
    for bi, ch, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        taps = [int(x[bi, ch, i * sh + u * dh - pt, j * sw + v * dw - pl])
                for u in range(kh) for v in range(kw)
                if 0 <= i * sh + u * dh - pt < h and 0 <= j * sw + v * dw - pl < wd]
        out[bi, ch, i, j] = max(taps)
    return out
