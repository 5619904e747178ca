"""The numpy calls of the per-step path as compiled kernels, for the whole-plan runner (a numpy call
would split its program): add / sub / mul with broadcasting, the tensor division (div_round.py), and
concat; a slice (take_axis) as runs; and in place of kernels that are slow on a few values, the
small-call twins of variants.VARIANTS' "program" rows (row_twins: a VNNI or int32 dense of a few pixels,
the fused row kernels and small dense layers).

The per-step path runs add / sub / mul as `np.<ufunc>(a, b, out, dtype=calc, casting="unsafe")`
(lower_ops, a calls.Ufunc); `translate` turns such a call into `binary(op, a, b, sa, sb, out)` when every operand is
C-contiguous, and a concat (`np.concatenate(parts, axis, out, casting="unsafe")`) of C-contiguous
parts into one `place` call a part. Exactness of binary: numpy computes
in `calc` (the widest of the operands' and the output's types, so no operand narrows) and casts to
the output; the kernel computes in int64 and stores into the output. Both are the exact result
modulo 2^(output bits) (two's complement: truncating int64 to the output equals truncating to calc
first, calc being at least as wide), and the verifier proved the exact result fits the output.
place stores each value into the output's type as numpy's unsafe cast does (truncation).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...arith import div_round_into
from .calls import Call, Ufunc, call
from .div_round import at, div_round4
from .tuning import DEFAULT_TUNING, Tuning

OPS = {np.add: 0, np.subtract: 1, np.multiply: 2}
RANK = 4  # operands and output are seen as 4-d (unit axes in front); higher ranks stay in numpy


@njit(cache=True, nogil=True)
def binary(op, a, b, sa, sb, out):
    """out[i] = a[i . sa] (op) b[i . sb] over the 4-d index i of out; sa, sb: element strides of the
    flat operands (0 along a broadcast axis). Rows whose operands are contiguous (or one of them a
    scalar along the row: a per-row or per-tensor operand) go through contiguous slices, which LLVM
    vectorizes (ViT-B/16's 197x768 rows: 137 -> 12 us); any other stride takes the indexed loop."""
    d0, d1, d2, d3 = out.shape
    ka, kb = sa[3], sb[3]
    for i0 in range(d0):
        for i1 in range(d1):
            for i2 in range(d2):
                pa, pb, row = at(sa, i0, i1, i2), at(sb, i0, i1, i2), out[i0, i1, i2]
                if ka == 1 and kb == 1:
                    _rows(op, a[pa:pa + d3], b[pb:pb + d3], row)
                elif ka == 1 and kb == 0:
                    _row_scalar(op, a[pa:pa + d3], np.int64(b[pb]), row)
                elif ka == 0 and kb == 1:
                    _scalar_row(op, np.int64(a[pa]), b[pb:pb + d3], row)
                else:
                    _strided(op, a, pa, ka, b, pb, kb, row)


@njit(cache=True, inline="always")
def _rows(op, a, b, row):
    if op == 0:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) + np.int64(b[i])
    elif op == 1:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) - np.int64(b[i])
    else:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) * np.int64(b[i])


@njit(cache=True, inline="always")
def _row_scalar(op, a, s, row):
    if op == 0:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) + s
    elif op == 1:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) - s
    else:
        for i in range(row.shape[0]):
            row[i] = np.int64(a[i]) * s


@njit(cache=True, inline="always")
def _scalar_row(op, s, b, row):
    if op == 0:
        for i in range(row.shape[0]):
            row[i] = s + np.int64(b[i])
    elif op == 1:
        for i in range(row.shape[0]):
            row[i] = s - np.int64(b[i])
    else:
        for i in range(row.shape[0]):
            row[i] = s * np.int64(b[i])


@njit(cache=True, inline="always")
def _strided(op, a, pa, ka, b, pb, kb, row):
    if op == 0:
        for i3 in range(row.shape[0]):
            row[i3] = np.int64(a[pa + i3 * ka]) + np.int64(b[pb + i3 * kb])
    elif op == 1:
        for i3 in range(row.shape[0]):
            row[i3] = np.int64(a[pa + i3 * ka]) - np.int64(b[pb + i3 * kb])
    else:
        for i3 in range(row.shape[0]):
            row[i3] = np.int64(a[pa + i3 * ka]) * np.int64(b[pb + i3 * kb])


@njit(cache=True, nogil=True)
def place(part, start, out):
    """out[o, start + i, j] = part[o, i, j]: one part of a concat along the middle axis."""
    for o in range(part.shape[0]):
        for i in range(part.shape[1]):
            row = out[o, start + i]
            src = part[o, i]
            for j in range(part.shape[2]):
                row[j] = src[j]


@njit(cache=True, nogil=True)
def take_runs(x, start, step, inner, out):
    """elementwise.take_axis on flat rows: out[o, i*inner + j] = x[o, (start + i*step)*inner + j];
    x: (outer, n*inner), out: (outer, m*inner). A step of 1 copies one run a row (take_axis loops
    over `inner` elements at a time: one at a time for a slice of the last axis, a gate's)."""
    outer, width = out.shape
    if step == 1:
        base = start * inner
        for o in range(outer):
            src, dst = x[o, base:base + width], out[o]
            for k in range(width):
                dst[k] = src[k]
        return
    for o in range(outer):
        src, dst = x[o], out[o]
        for i in range(width // inner):
            b = (start + i * step) * inner
            for j in range(inner):
                dst[i * inner + j] = src[b + j]


def translate(c: Call, tuning: Tuning = DEFAULT_TUNING) -> list:
    """The calls that do what the bound call c does: [c], or compiled kernels in its place (the numpy
    calls above; the small-call twins that `tuning` turns on, variants.VARIANTS' "program" rows)."""
    from . import variants
    from .elementwise import take_axis
    from .lower_ops import _concat
    fn, a = c
    if fn is _concat:
        return _concat_calls(a.parts, a.axis, a.out) or [c]
    if fn is take_axis and a.x.flags.c_contiguous and a.out.flags.c_contiguous:
        x, out = a.x, a.out
        return [call(take_runs, x.reshape(x.shape[0], -1), a.start, a.step, out.shape[2], out.reshape(out.shape[0], -1))]
    if fn is div_round_into:
        return [_division(c)]
    return [variants.choose("program", _binary_call(c), tuning)]


def _concat_calls(parts, axis, out) -> list | None:
    if not all(isinstance(x, np.ndarray) and x.flags.c_contiguous and x.dtype.kind in "iu" for x in (*parts, out)):
        return None
    outer, inner = int(np.prod(out.shape[:axis], dtype=np.int64)), int(np.prod(out.shape[axis + 1:], dtype=np.int64))
    calls, start = [], 0
    for part in parts:
        calls.append(call(place, part.reshape(outer, part.shape[axis], inner), start, out.reshape(outer, -1, inner)))
        start += part.shape[axis]
    return calls


def _broadcast(operands, out) -> list | None:
    """The element strides of C-contiguous integer operands broadcast to out (rank <= RANK), or None."""
    if out.ndim > RANK or not all(isinstance(x, np.ndarray) and x.flags.c_contiguous and x.dtype.kind in "iu"
                                  for x in (*operands, out)):
        return None
    strides = [_strides(x.shape, out.shape) for x in operands]
    return None if any(s is None for s in strides) else strides


def _out4(out):
    return out.reshape((1,) * (RANK - out.ndim) + out.shape)


def _binary_call(c: Call) -> Call:
    """binary's call for a calls.Ufunc call (np.<add|subtract|multiply>(a, b, out) of lower_ops) whose
    operands are C-contiguous and broadcast to out's shape (rank <= RANK), none wider than its type; else c."""
    if not isinstance(c.fn, Ufunc) or c.fn.op not in OPS:
        return c
    a, b, out = c.args
    calc = c.fn.dtype
    if (strides := _broadcast((a, b), out)) is None or any(x.dtype.itemsize > calc.itemsize for x in (a, b, out)) \
            or calc.kind != "i":
        return c
    return call(binary, OPS[c.fn.op], a.reshape(-1), b.reshape(-1), strides[0], strides[1], _out4(out))


def _division(c: Call) -> Call:
    """div_round.div_round4's call for a div_round_into(x, d, out, d2) call on int32-or-narrower operands
    that broadcast to out; else c."""
    a = c.args
    if (strides := _broadcast((a.x, a.d), a.out)) is None or a.x.dtype.itemsize > 4 or a.d.dtype.itemsize > 4:
        return c
    return call(div_round4, a.x.reshape(-1), a.d.reshape(-1), strides[0], strides[1], _out4(a.out))


def _strides(shape: tuple, out: tuple) -> np.ndarray | None:
    """Element strides (RANK of them) of a C-contiguous operand broadcast to out, or None."""
    if len(shape) > len(out):
        return None
    full = (1,) * (len(out) - len(shape)) + tuple(shape)
    if any(d not in (1, o) for d, o in zip(full, out)):
        return None
    c = np.ones(len(full), np.int64)
    for i in range(len(full) - 2, -1, -1):
        c[i] = c[i + 1] * full[i + 1]
    s = [int(c[i]) if full[i] == out[i] and out[i] > 1 else 0 for i in range(len(full))]
    return np.array([0] * (RANK - len(full)) + s, np.int64)
