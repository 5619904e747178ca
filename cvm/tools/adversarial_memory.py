"""Adversarial models of the second round (issue 28): memory-bound data movement over tensors far larger
than cache, a node listing the most inputs an opset admits, a model that is mostly constants, and a chain
of tiny pads (the reference's slowest node per gas). Gas
schedule v2 priced data movement on tensors that fit in cache and charged nothing for edges or loading;
schedule v3 (cvm.gas_v3, opset 4) prices all three. Registered in cvm.tools.adversarial.CATALOGUE.
"""
from __future__ import annotations

import numpy as np

ROWS = 1 << 20  # a table's rows: the dimension limit
SIDE = 1 << 13  # an 8192 x 8192 int8 tensor: 64 MiB


def _b():
    import cvm
    return cvm.GraphBuilder()


def _rng(seed=0):
    return np.random.default_rng(seed)


def gather_chain():
    """16 chained lookups in a 2^20-row table (a random permutation): each lookup one cache miss."""
    b = _b()
    y = b.op("clip", b.input("x", (1 << 16,), 21), lo=0, hi=ROWS - 1)
    t = b.const(_rng(1).permutation(ROWS), dtype="int32")
    for _ in range(16):
        y = b.op("gather", y, t)
    return b, y


def gather_line_rows():
    """2^16 random rows of a 64 MiB table, one 64-byte cache line a row."""
    b = _b()
    y = b.op("clip", b.input("x", (1 << 16,), 21), lo=0, hi=ROWS - 1)
    t = b.const(_rng(2).integers(-(1 << 31) + 1, 1 << 31, (ROWS, 16)), dtype="int32")
    return b, b.op("gather", y, t)


def transpose_big():
    """A rank-4 transpose of 64 MiB reversing the axes: every read a new cache line."""
    b = _b()
    return b, b.op("transpose", b.input("x", (64, 64, 64, 256), 8), perm=(3, 2, 1, 0))


def slice_strided_big():
    """A slice of 64 MiB stepping 3 rows and 67 columns: one element a cache line."""
    b = _b()
    x = b.input("x", (16384, 4096), 8)
    return b, b.op("slice", x, starts=(0, 0), ends=(16384, 4096), steps=(3, 67))


def concat_big():
    """Two 32 MiB halves joined along the last axis (row-interleaved copies)."""
    b = _b()
    x = b.input("x", (SIDE, SIDE // 2), 8)
    return b, b.op("concat", x, x, axis=1)


def pad_big():
    """A 64 MiB tensor padded by one column each side."""
    b = _b()
    return b, b.op("pad", b.input("x", (SIDE, SIDE - 2), 8), pads=(0, 1, 0, 1), value=5)


def resize_big():
    """A nearest-neighbour 2x upsampling of 16 MiB into 64 MiB."""
    b = _b()
    x = b.input("x", (16, 1024, 1024), 8)
    return b, b.op("resize2d", x, size=(2048, 2048), mode=0, coord_h=(1, 0, 2), coord_w=(1, 0, 2), frac_bits=0)


def concat_widest():
    """Concats listing 1,024 inputs each (the most opset 4 admits), 16 of them, on one element."""
    b = _b()
    x = b.input("x", (1,), 8)
    parts = [b.op("concat", *([b.op("relu", x)] * 1024), axis=0) for _ in range(16)]
    return b, b.op("concat", *parts, axis=0)


def constants_heavy():
    """64 MiB of constants read by one gather of one row: loading is the whole cost."""
    b = _b()
    y = b.op("clip", b.input("x", (1,), 8), lo=0, hi=1023)
    return b, b.op("gather", y, b.const(_rng(3).integers(-127, 128, (1024, 1 << 16)), dtype="int8"))


def pad_chain():
    """2,000 zero-width rank-6 pads of one element: the reference's per-node cost of a pad."""
    b = _b()
    y = b.input("x", (1, 1, 1, 1, 1, 1), 8)
    for _ in range(2000):
        y = b.op("pad", y, pads=[0] * 12, value=0)
    return b, y


CASES = [
    ("gather_chain_2_20", "16 chained gathers over a 2^20-row table, 2^16 indices (one miss a lookup)", gather_chain),
    ("gather_line_rows", "2^16 random 64-byte rows of a 64 MiB table", gather_line_rows),
    ("transpose_64mib", "rank-4 transpose of 64 MiB reversing the axes", transpose_big),
    ("slice_strided_64mib", "slice of 64 MiB with steps (3, 67): one element a cache line", slice_strided_big),
    ("concat_64mib", "two 32 MiB halves joined along the last axis", concat_big),
    ("pad_64mib", "pad of a 64 MiB tensor, one column each side", pad_big),
    ("resize_up_64mib", "nearest 2x upsampling of 16 MiB into 64 MiB", resize_big),
    ("concat_widest", "16 concats of 1,024 listed inputs (opset 4's node_inputs limit)", concat_widest),
    ("constants_64mib", "64 MiB of constants read by one gather of one row", constants_heavy),
    ("pad_chain", "2000 zero-width rank-6 pads of one element", pad_chain),
]
