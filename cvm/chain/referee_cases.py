"""Random op instances for the referee's differential test (cvm/chain/referee_diff.py): one draw
function per op the Solidity referee supports (cvm/chain/referee_ops.REFEREE_OPS).

`DRAWS[op](d, b)` adds the op (and any node it needs in front: a clip that proves a gather index or
a divisor in range) to the GraphBuilder `b` and returns (the op's output, explicit per-sample values
for some graph inputs); the other inputs get `Draw.signed` values at their bits. Attributes and
constants come from `Draw`, edge values often: int32 and clip bounds, shifts 0..62, exact rounding
halves, lookup and gather indices at the ends of their tables, geometry at the verifier's bounds.
An instance the verifier refuses is drawn again (referee_diff counts those).

The windowed and multiply-accumulate ops are in cvm/chain/referee_cases_mac.py.
"""

from __future__ import annotations

import numpy as np

from cvm.arith import INT32_MAX, bits_max
from cvm.builder import GraphBuilder
from cvm.chain.referee_draw import Draw
from cvm.limits import MAX_AXIS, MAX_CLIP, MAX_GEOMETRY, MIN_CLIP

I32 = INT32_MAX
NO_VALUES: dict = {}


# ------------------------------------------------------------------ elementwise

def _partner(d: Draw, b: GraphBuilder, out: tuple, bits: int) -> str:
    """The other operand of a binary op: a constant broadcasting to `out` (a suffix of it with some
    axes 1), or an activation of the same rank with some axes 1."""
    if d.chance(0.5):
        r = d.int(1, len(out))
        return b.const(d.signed(tuple(1 if d.chance(0.4) else n for n in out[len(out) - r:]), bits))
    return b.input("y", tuple(1 if d.chance(0.3) else n for n in out), bits)


def _binary(op: str):
    def draw(d: Draw, b: GraphBuilder):
        out = d.shape()
        abits = d.bits((1, 2, 8, 8, 16, 24, 31, 31))
        bbits = d.int(1, max(1, 33 - abits)) if op == "mul" and d.chance(0.5) else d.bits((1, 8, 16, 31))
        if op == "mul":
            bbits = min(bbits, max(1, 33 - abits))
        x = b.input("x", out, abits)
        y = x if d.chance(0.1) else _partner(d, b, out, bbits)
        return b.op(op, *((y, x) if d.chance(0.5) else (x, y))), NO_VALUES
    return draw


def draw_div(d: Draw, b: GraphBuilder):
    out = d.shape()
    xbits = d.bits((8, 8, 16, 31, 32))
    if d.chance(0.5):  # an activation divisor (clipped to 1.. to prove it), either one broadcasting
        part = tuple(1 if d.chance(0.4) else n for n in out)
        xs, ys = (part, out) if d.chance(0.3) else (out, part)
        y = b.op("clip", b.input("y", ys, d.bits((4, 8, 16, 32))), lo=1, hi=d.pick((1, 2, 9, 1000, I32)))
        return b.op("div", b.input("x", xs, xbits), y), NO_VALUES
    r = d.int(1, len(out))
    dv = d.values(tuple(1 if d.chance(0.5) else n for n in out[len(out) - r:]), 1,
                  d.pick((1, 2, 3, 7, 100, 1 << 20, I32)))
    values = NO_VALUES
    if dv.size == 1 and d.chance(0.5):  # x = k*dv + dv/2: exact halves (dv even), negative k too
        m, q = bits_max(xbits), int(dv.reshape(-1)[0])
        k = d.rng.integers(-(m // q) - 1, m // q + 1, out, dtype=np.int64)
        values = {"x": np.clip(k * q + q // 2, -m, m)}
    return b.op("div", b.input("x", out, xbits), b.const(dv)), values


def draw_relu(d: Draw, b: GraphBuilder):
    return b.op("relu", b.input("x", d.shape(), d.bits())), NO_VALUES


def draw_clip(d: Draw, b: GraphBuilder):
    bits = d.bits()
    m = bits_max(bits)
    lo = d.pick((MIN_CLIP, -m - 1, -m, -m + 1, 0, m, d.int(-m - 2, m + 2)))
    hi = d.pick((MAX_CLIP, m + 1, m, m - 1, lo, d.int(lo, max(lo, m + 2))))
    return b.op("clip", b.input("x", d.shape(), bits), lo=lo, hi=max(lo, hi)), NO_VALUES


def draw_isqrt(d: Draw, b: GraphBuilder):
    """Inputs at perfect squares and one either side of them, and at the ends of int32."""
    bits = d.bits((8, 16, 24, 31, 32, 32))
    shape = d.shape()
    m = bits_max(bits)
    r = d.rng.integers(0, int(np.sqrt(m)) + 1, shape, dtype=np.int64)
    v = np.clip(r * r + d.rng.integers(-1, 2, shape, dtype=np.int64), -m, m)
    return b.op("isqrt", b.input("x", shape, bits)), ({"x": v} if d.chance(0.6) else NO_VALUES)


# ------------------------------------------------------------------ rounding and lookups

def draw_requant(d: Draw, b: GraphBuilder):
    shape = d.shape(1, 3)
    xbits = d.bits((8, 16, 20, 31, 32))
    x = b.input("x", shape, xbits)
    axis = d.int(0, len(shape) - 1)
    per_channel = d.chance(0.5)
    mbits = d.pick((1, 2, 8, 16, 31))
    m = d.values((shape[axis] if per_channel else 1,), 0, bits_max(mbits) if mbits > 1 else 1)
    shift = d.pick((0, 1, 2, d.int(0, 62), d.int(0, 62), 62, min(62, xbits + mbits - 2)))
    bits = d.pick((1, 2, 8, 8, 16, 31, 32))
    y = b.op("requant", x, b.const(m), shift=shift, bits=bits,
             axis=axis if per_channel else d.pick((0, 0, MAX_AXIS)))
    return y, ({"x": d.signed(shape, xbits, shift=shift, mode="halves")} if d.chance(0.3) else NO_VALUES)


def draw_lut(d: Draw, b: GraphBuilder):
    """A table over the input's whole interval, a few entries wider; sometimes a 32-bit input clipped
    to a window at an end of int32, so the offset sits there."""
    shape = d.shape()
    if d.chance(0.2):
        x = b.input("x", shape, 32)
        n = d.int(0, 64)
        lo, hi = (-I32, MIN_CLIP + n) if d.chance(0.5) else (MAX_CLIP - n, MAX_CLIP)
        x = b.op("clip", x, lo=max(lo, MIN_CLIP), hi=hi)
        lo = max(lo, -I32)
    else:
        bits = d.int(1, 10)
        x = b.input("x", shape, bits)
        lo, hi = -bits_max(bits), bits_max(bits)
    offset = lo - d.int(0, 3)
    table = d.signed((hi - offset + 1 + d.int(0, 3),), d.bits((1, 8, 16, 32)))
    return b.op("lut", x, b.const(table), offset=offset), NO_VALUES


def draw_gather(d: Draw, b: GraphBuilder):
    """Index activations clipped into the table's rows (often onto its first and last row)."""
    rows = d.pick((1, 2, 3, 5, 8))
    table = d.signed((rows,) + d.shape(0, 2, 3), d.bits((1, 8, 16, 32)))
    shape = d.shape(1, 2, 4)
    x = b.input("x", shape, d.bits((4, 8, 16, 32)))
    x = b.op("clip", x, lo=d.pick((0, 0, min(1, rows - 1))), hi=rows - 1)
    return b.op("gather", x, b.const(table)), NO_VALUES


# ------------------------------------------------------------------ layout

def draw_reshape(d: Draw, b: GraphBuilder):
    shape = d.shape()
    rest, dims = int(np.prod(shape)), []
    while rest > 1 and len(dims) < 3:
        dims.append(d.pick([k for k in range(1, rest + 1) if rest % k == 0]))
        rest //= dims[-1]
    return b.op("reshape", b.input("x", shape, d.bits()), shape=dims + [rest]), NO_VALUES


def draw_flatten(d: Draw, b: GraphBuilder):
    return b.op("flatten", b.input("x", d.shape(), d.bits())), NO_VALUES


def draw_transpose(d: Draw, b: GraphBuilder):
    shape = d.shape(1, 5, 3)
    perm = [int(a) for a in d.rng.permutation(len(shape))]
    return b.op("transpose", b.input("x", shape, d.bits()), perm=perm), NO_VALUES


def draw_pad(d: Draw, b: GraphBuilder):
    shape = d.shape(1, 4, 3)
    bits = d.bits()
    pads = [d.pick((0, 0, 1, 2, 3)) for _ in range(2 * len(shape))]
    if d.chance(0.2):
        pads[d.int(0, len(pads) - 1)] = d.int(4, 40)
    value = d.edge(-I32, I32) if d.chance(0.5) else d.edge(-bits_max(bits), bits_max(bits))
    return b.op("pad", b.input("x", shape, bits), pads=pads, value=value), NO_VALUES


def draw_slice(d: Draw, b: GraphBuilder):
    shape = d.shape(1, 4, 5)
    starts = [d.int(0, n - 1) for n in shape]
    ends = [d.int(s + 1, n) for s, n in zip(starts, shape)]
    steps = [d.pick((1, 1, 2, 3, MAX_GEOMETRY)) for _ in shape]
    return b.op("slice", b.input("x", shape, d.bits()), starts=starts, ends=ends, steps=steps), NO_VALUES


def draw_concat(d: Draw, b: GraphBuilder):
    """Activations and constants of one rank joined on an axis, some listed more than once."""
    shape = d.shape(1, 4, 3)
    axis = d.int(0, len(shape) - 1)
    parts = [b.input("x", shape, d.bits())]
    for k in range(d.int(0, 3)):
        s = tuple(d.int(1, 3) if i == axis else n for i, n in enumerate(shape))
        bits = d.bits((8, 16, 32))
        parts.append(b.const(d.signed(s, bits)) if d.chance(0.5) else b.input(f"x{k}", s, bits))
    for _ in range(d.pick((0, 0, 1, 3))):
        parts.append(d.pick(parts))
    order = [parts[int(i)] for i in d.rng.permutation(len(parts))]
    return b.op("concat", *order, axis=axis), NO_VALUES


def _draws() -> dict:
    from cvm.chain import referee_cases_mac as mac
    simple = {name: _binary(name) for name in ("add", "sub", "mul")}
    simple.update(div=draw_div, relu=draw_relu, clip=draw_clip, isqrt=draw_isqrt, requant=draw_requant,
                  lut=draw_lut, gather=draw_gather, reshape=draw_reshape, flatten=draw_flatten,
                  transpose=draw_transpose, pad=draw_pad, slice=draw_slice, concat=draw_concat)
    return {**simple, **mac.DRAWS}


DRAWS = _draws()
