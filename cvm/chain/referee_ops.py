"""The Solidity referee's op table, Python side: for each CVM op, its op code in
contracts/src/Referee.sol, the integer parameters its NodeSpec carries, and which input elements
output element e reads, and the gas a read costs. One row per op, as Referee.sol has one dispatch per op code; both follow
docs/spec.md and the reference interpreter (cvm/ops), and tests/chain/test_chain_referee*.py hold
them to it on every node of the fixture models and of the built models there.

`params(shapes, out, attrs)`: shapes are the inputs' per-sample shapes (a constant's whole shape),
out the output's per-sample shape. `reads(p, e, n, value)`: per input position, the element indices
(row-major, one sample) the referee reads for output element e; `value(pos, k)` gives an input's
element where the indices depend on values (lut, gather). `max_reads(p, n)`: a bound on the reads of
any one element, which times `read_gas` bounds the referee's gas (model_commitment refuses a node
past the budget).

Shared codes: reshape and flatten keep the row-major order (12); transpose, pad and slice are one
affine index map per axis (16): input axis a reads output axis src[a] at src*mul + add, and an index
outside the input gives the pad value.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable


@dataclass(frozen=True)
class RefOp:
    code: int
    params: Callable[[list[tuple], tuple, dict], tuple]
    reads: Callable
    max_reads: Callable[[tuple, int], int]
    read_gas: int = 5_000  # Referee.evaluate's gas per read, rounded up from measurements (docs/chain.md)


def _bias(n: int, o: int) -> list[list[int]]:
    return [[o]] if n == 3 else []


def _strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def _coords(e: int, dims) -> list[int]:
    out = []
    for d in reversed(dims):
        e, k = divmod(e, d)
        out.append(k)
    return out[::-1]


# ------------------------------------------------------------------ windows (conv2d, conv_transpose2d, max_pool2d)

def _conv_params(s, out, a):
    return (*s[0], *out, s[1][2], s[1][3], *a["strides"], *a["pads"][:2], *a["dilations"], a["groups"])


def _conv_reads(p, e, n, value=None):
    C, H, W, O, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, g = p
    cg, og = C // g, O // g
    o, rest = divmod(e, OH * OW)
    i, j = divmod(rest, OW)
    gi = o // og
    xs, ws = [], []
    for c in range(cg):
        for u in range(KH):
            row = i * sh + u * dh - pt
            if not 0 <= row < H:
                continue
            for v in range(KW):
                col = j * sw + v * dw - pl
                if 0 <= col < W:
                    xs.append(((gi * cg + c) * H + row) * W + col)
                    ws.append(((o * cg + c) * KH + u) * KW + v)
    return [xs, ws] + _bias(n, o)


def _conv_t_params(s, out, a):
    return (*s[0], *out, s[1][2], s[1][3], *a["strides"], *a["pads"][:2], *a["dilations"], a["groups"])


def _conv_t_reads(p, e, n, value=None):
    """y[o,p,q] = b[o] + sum over c of o's group, (i,u) with i*sh + u*dh - pt = p, (j,v) likewise, of
    x[c,i,j] * w[c, o mod O/g, u, v] (spec 14.2)."""
    C, H, W, O, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, g = p
    cg, og = C // g, O // g
    o, rest = divmod(e, OH * OW)
    pp, qq = divmod(rest, OW)
    gi, oo = divmod(o, og)
    rows = [(u, (pp + pt - u * dh) // sh) for u in range(KH)
            if pp + pt - u * dh >= 0 and (pp + pt - u * dh) % sh == 0 and (pp + pt - u * dh) // sh < H]
    cols = [(v, (qq + pl - v * dw) // sw) for v in range(KW)
            if qq + pl - v * dw >= 0 and (qq + pl - v * dw) % sw == 0 and (qq + pl - v * dw) // sw < W]
    xs, ws = [], []
    for c in range(gi * cg, gi * cg + cg):
        for u, i in rows:
            for v, j in cols:
                xs.append((c * H + i) * W + j)
                ws.append(((c * og + oo) * KH + u) * KW + v)
    return [xs, ws] + _bias(n, o)


def _window_max(p, n):
    C, _, _, O, _, _, KH, KW, *_, g = p
    return 2 * (C // g) * KH * KW + (n == 3)


def _pool_params(s, out, a):
    return (*s[0], out[1], out[2], *a["kernel"], *a["strides"], *a["pads"][:2], *a["dilations"])


def _pool_reads(p, e, n, value=None):
    C, H, W, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw = p
    c, rest = divmod(e, OH * OW)
    i, j = divmod(rest, OW)
    return [[(c * H + row) * W + col
             for row in (i * sh + u * dh - pt for u in range(KH)) if 0 <= row < H
             for col in (j * sw + v * dw - pl for v in range(KW)) if 0 <= col < W]]


# ------------------------------------------------------------------ products (dense, matmul)

def _dense_reads(p, e, n, value=None):
    K, O = p
    r, o = divmod(e, O)
    return [list(range(r * K, r * K + K)), list(range(o * K, o * K + K))] + _bias(n, o)


def _matmul_params(s, out, a):
    return (s[0][-2], s[0][-1], s[1][-1])


def _matmul_reads(p, e, n, value=None):
    """y[b, m, q] = sum_k x[b, m, k] * y[b, k, q], the leading axes flattened to b."""
    M, K, N = p
    b, rest = divmod(e, M * N)
    m, q = divmod(rest, N)
    return [[(b * M + m) * K + k for k in range(K)], [(b * K + k) * N + q for k in range(K)]]


# ------------------------------------------------------------------ elementwise

def _binary_params(s, out, a):
    r = len(out)
    pad = [(1,) * (r - len(x)) + tuple(x) for x in s]
    return (r, *out, *pad[0], *pad[1])


def _binary_reads(p, e, n, value=None):
    """numpy broadcasting: each operand's shape right-aligned to the output's rank with ones."""
    r = p[0]
    out = p[1:1 + r]
    idx = []
    for dims in (p[1 + r:1 + 2 * r], p[1 + 2 * r:1 + 3 * r]):
        rem, flat, stride = e, 0, 1
        for ax in range(r - 1, -1, -1):
            rem, k = divmod(rem, out[ax])
            if dims[ax] != 1:
                flat += k * stride
            stride *= dims[ax]
        idx.append([flat])
    return idx


def _same(p, e, n, value=None):
    return [[e]]


def _requant_params(s, out, a):
    m = s[1][0]
    xs = s[0]
    stride = prod(xs[a["axis"] + 1:]) if m != 1 else 1
    return (a["shift"], a["bits"], m, stride, xs[a["axis"]] if m != 1 else 1)


def _requant_reads(p, e, n, value=None):
    _, _, m, stride, dim = p
    return [[e], [(e // stride) % dim if m != 1 else 0]]


def _lut_reads(p, e, n, value=None):
    """The table entry the input's value selects (the referee reverts outside the table)."""
    return [[e], [] if value is None else [value(0, e) - p[0]]]


def _gather_params(s, out, a):
    return (prod(s[1][1:]), s[1][0])


def _gather_reads(p, e, n, value=None):
    """y[i..., j...] = t[x[i...], j...] (spec 15): index element e // R, then its row's entry."""
    R, _ = p
    i, j = divmod(e, R)
    return [[i], [] if value is None else [value(0, i) * R + j]]


# ------------------------------------------------------------------ reductions and layout

def _reduce_params(s, out, a):
    """(nk, kept dims, kept strides, nr, reduced dims, reduced strides): output element e is the
    kept axes' coordinates (keepdims adds only ones), each input element one of the reduced ones'."""
    x, axes = s[0], set(a["axes"])
    st = _strides(x)
    kept = [ax for ax in range(len(x)) if ax not in axes]
    red = [ax for ax in range(len(x)) if ax in axes]
    return (len(kept), *(x[k] for k in kept), *(st[k] for k in kept),
            len(red), *(x[k] for k in red), *(st[k] for k in red))


def _reduce_reads(p, e, n, value=None):
    nk = p[0]
    kdims, kst = p[1:1 + nk], p[1 + nk:1 + 2 * nk]
    nr = p[1 + 2 * nk]
    rdims, rst = p[2 + 2 * nk:2 + 2 * nk + nr], p[2 + 2 * nk + nr:2 + 2 * nk + 2 * nr]
    base = sum(c * s for c, s in zip(_coords(e, kdims), kst))
    return [[base + sum(c * s for c, s in zip(_coords(t, rdims), rst)) for t in range(prod(rdims))]]


def _reduce_max(p, n):
    nk = p[0]
    nr = p[1 + 2 * nk]
    return prod(p[2 + 2 * nk:2 + 2 * nk + nr])


def _affine(out, ins, src, mul, add, value=0):
    r = len(out)
    return (r, value, *out, *ins, *src, *mul, *add)


def _transpose_params(s, out, a):
    perm = list(a["perm"])
    return _affine(out, s[0], [perm.index(ax) for ax in range(len(perm))], [1] * len(perm), [0] * len(perm))


def _pad_params(s, out, a):
    r = len(s[0])
    return _affine(out, s[0], range(r), [1] * r, [-a["pads"][ax] for ax in range(r)], a["value"])


def _slice_params(s, out, a):
    return _affine(out, s[0], range(len(s[0])), a["steps"], a["starts"])


def _affine_reads(p, e, n, value=None):
    r = p[0]
    out, ins = p[2:2 + r], p[2 + r:2 + 2 * r]
    src, mul, add = p[2 + 2 * r:2 + 3 * r], p[2 + 3 * r:2 + 4 * r], p[2 + 4 * r:2 + 5 * r]
    o = _coords(e, out)
    flat = 0
    for a in range(r):
        k = o[src[a]] * mul[a] + add[a]
        if not 0 <= k < ins[a]:
            return [[]]  # the pad value
        flat = flat * ins[a] + k
    return [[flat]]


def _concat_params(s, out, a):
    ax = a["axis"]
    return (prod(out[ax + 1:]), out[ax], *(x[ax] for x in s))


def _concat_reads(p, e, n, value=None):
    inner, total, lens = p[0], p[1], p[2:]
    outer, rest = divmod(e, total * inner)
    c, j = divmod(rest, inner)
    reads = [[] for _ in range(n)]
    for k, length in enumerate(lens):
        if c < length:
            reads[k] = [(outer * length + c) * inner + j]
            return reads
        c -= length
    raise AssertionError("concat element past its inputs")


# ------------------------------------------------------------------ resize2d

def _resize_params(s, out, a):
    return (*s[0], out[1], out[2], a["mode"], *a["coord_h"], *a["coord_w"], a["frac_bits"])


def axis_taps(i: int, size: int, a: int, b: int, d: int, mode: int) -> tuple[int, int]:
    """The source indices (i0, i1) of output index i along one axis (cvm.ops.vision.axis_map)."""
    t = (a * i + b) // d
    i0 = min(max(t, 0), size - 1)
    return (i0, i0) if mode == 0 else (i0, min(max(t + 1, 0), size - 1))


def _resize_reads(p, e, n, value=None):
    C, H, W, OH, OW, mode, ah, bh, dh, aw, bw, dw, _ = p
    c, rest = divmod(e, OH * OW)
    i, j = divmod(rest, OW)
    rows, cols = axis_taps(i, H, ah, bh, dh, mode), axis_taps(j, W, aw, bw, dw, mode)
    if mode == 0:
        return [[(c * H + rows[0]) * W + cols[0]]]
    return [[(c * H + y) * W + x for y in rows for x in cols]]


def _const(k: int):
    return lambda p, n: k


REFEREE_OPS: dict[str, RefOp] = {
    "conv2d": RefOp(1, _conv_params, _conv_reads, _window_max, 2_400),
    "dense": RefOp(2, lambda s, out, a: (s[0][-1], out[-1]), _dense_reads, lambda p, n: 2 * p[0] + (n == 3), 1_700),
    "add": RefOp(3, _binary_params, _binary_reads, _const(2)),
    "sub": RefOp(4, _binary_params, _binary_reads, _const(2)),
    "mul": RefOp(5, _binary_params, _binary_reads, _const(2)),
    "div": RefOp(6, _binary_params, _binary_reads, _const(2)),
    "relu": RefOp(7, lambda s, out, a: (), _same, _const(1)),
    "clip": RefOp(8, lambda s, out, a: (a["lo"], a["hi"]), _same, _const(1)),
    "requant": RefOp(9, _requant_params, _requant_reads, _const(2)),
    "lut": RefOp(10, lambda s, out, a: (a["offset"],), _lut_reads, _const(2)),
    "max_pool2d": RefOp(11, _pool_params, _pool_reads, lambda p, n: p[5] * p[6], 2_400),
    "reshape": RefOp(12, lambda s, out, a: (), _same, _const(1)),
    "flatten": RefOp(12, lambda s, out, a: (), _same, _const(1)),
    "matmul": RefOp(13, _matmul_params, _matmul_reads, lambda p, n: 2 * p[1], 1_800),
    "sum": RefOp(14, _reduce_params, _reduce_reads, _reduce_max, 2_600),
    "max": RefOp(15, _reduce_params, _reduce_reads, _reduce_max, 2_600),
    "transpose": RefOp(16, _transpose_params, _affine_reads, _const(1)),
    "pad": RefOp(16, _pad_params, _affine_reads, _const(1)),
    "slice": RefOp(16, _slice_params, _affine_reads, _const(1)),
    "concat": RefOp(17, _concat_params, _concat_reads, _const(1)),
    "resize2d": RefOp(18, _resize_params, _resize_reads, _const(4)),
    "conv_transpose2d": RefOp(19, _conv_t_params, _conv_t_reads, _window_max, 2_600),
    "gather": RefOp(20, _gather_params, _gather_reads, _const(2)),
    "isqrt": RefOp(21, lambda s, out, a: (), _same, _const(1)),
}
BY_CODE: dict[int, RefOp] = {}
for _op in REFEREE_OPS.values():
    BY_CODE.setdefault(_op.code, _op)
