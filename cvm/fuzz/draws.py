"""What the mutations draw from: integers at the edges of every limit, values of the wrong type, and
the names, nodes and constants of the graph being mutated.

Shared by every mutation module, so that all of them try the same boundaries; each draw takes the
case's rng, which keeps a case a function of (run seed, case number) alone.
"""
from __future__ import annotations

from ..ops import OPSET_V1
from .seeds import copy_tree

# Integers every attribute, dimension and bit count is tried with: the limits (cvm/limits.py) and one
# past them, the int32/int64/uint64 edges (all msgpack can hold), zero, one, negatives.
BOUNDARY = [0, 1, -1, 2, -2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 62, 63, 64, 65, 127, 128, 255, 256,
            4096, 4097, 65535, 65536, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, -(1 << 20), 1 << 24,
            (1 << 24) + 1, 1 << 26, (1 << 31) - 1, 1 << 31, -(1 << 31), -(1 << 31) - 1, 1 << 32, (1 << 62),
            (1 << 63) - 1, 1 << 63, -(1 << 63), (1 << 64) - 1]
BITS = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, -1]
DTYPES = ["int8", "int16", "int32"]
ODD_VALUES = [None, True, False, 1.5, float("nan"), float("inf"), -0.0, "", "x", b"", b"\x00", [], {}, [[1]],
              {"a": 1}, "int64", "float32", "\x00", "é" * 3]
OPS = sorted(OPSET_V1)


def pick(rng, seq):
    """One element, drawn with `rng.integers` (not `rng.choice`, which would copy `seq` to an array)."""
    return seq[int(rng.integers(len(seq)))]


def some_int(rng) -> int:
    """Mostly a boundary value, sometimes a small one, sometimes any size up to 2^62."""
    r = rng.random()
    if r < 0.6:
        return pick(rng, BOUNDARY)
    if r < 0.8:
        return int(rng.integers(-8, 65))
    return int(rng.integers(-(1 << 62), 1 << 62)) >> int(rng.integers(0, 63))


def odd_value(rng):
    """A value of an unexpected type (a fresh copy: mutations go on to edit what they put in)."""
    return copy_tree(pick(rng, ODD_VALUES))


def tensor_names(g: dict) -> list[str]:
    """Every name the graph defines (inputs, constants, node outputs), for rewiring onto; never empty."""
    names = [i[0] for i in g["inputs"] if isinstance(i, list) and i and isinstance(i[0], str)]
    names += [c[0] for c in g["constants"] if isinstance(c, list) and c and isinstance(c[0], str)]
    names += [n[2] for n in g["nodes"] if isinstance(n, list) and len(n) > 2 and isinstance(n[2], str)]
    return names or ["x"]


def some_node(g, rng, with_attrs=False):
    """A node still shaped [op, inputs, name, attrs] (an earlier mutation may have broken others)."""
    nodes = [n for n in g["nodes"] if isinstance(n, list) and len(n) == 4 and isinstance(n[3], dict)
             and (n[3] or not with_attrs)]
    return pick(rng, nodes) if nodes else None


def some_const(g, rng):
    """A constant still shaped [name, dtype, shape, data bytes]."""
    cs = [c for c in g["constants"] if isinstance(c, list) and len(c) == 4 and isinstance(c[3], bytes)]
    return pick(rng, cs) if cs else None
