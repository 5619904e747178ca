"""Adversarial models: accepted models at the corners of the gas schedule and of the verifier's bounds,
built to be cheap in gas and expensive to run (big pads, strides, dilations, tiny outputs, large
reductions, lookup- and division-heavy graphs, long chains of tiny nodes). `cvm bench --adversarial`
(cvm/tools/bench_adversarial.py) times them; docs/performance.md records a run.

API: CATALOGUE (name -> Case: name, why, make), build(name) -> (model, x).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import adversarial_memory
from .. import limits
from ..repricing import repriced

G = limits.MAX_GEOMETRY
I32_MIN, I32_MAX = limits.MIN_CLIP, limits.MAX_CLIP


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    make: Callable  # () -> (GraphBuilder, output names, input bits); the input is drawn from the bits


def _rng(seed=0):
    return np.random.default_rng(seed)


def _b():
    import cvm
    return cvm.GraphBuilder()


# ------------------------------------------------------------------ the catalogue
# Each builder returns (builder, outputs). Inputs are random integers in the input's bit range.

def _conv_big_pads():
    b = _b()
    x = b.input("x", (1, 1, 1), 8)
    return b, b.op("conv2d", x, b.const(np.array([[[[3]]]], np.int8)), pads=[G, G, 0, 0], strides=[G, G])


def _conv_huge_strides():
    b = _b()
    x = b.input("x", (16, 1024, 1024), 8)
    w = _rng(1).integers(-127, 128, (1, 16, 3, 3))
    return b, b.op("conv2d", x, b.const(w), strides=[G, G])


def _conv_huge_dilations():
    b = _b()
    x = b.input("x", (1, 3, 3), 8)
    return b, b.op("conv2d", x, b.const(np.array([[[[1, 2], [3, 4]]]], np.int8)), dilations=[G, G],
                   pads=[G, G, G, G], strides=[G, G])


def _conv_tall_kernel():
    b = _b()
    x = b.input("x", (1, 2, 1), 8)
    w = np.zeros((1, 1, G, 1), np.int64)
    w[0, 0, G - 3:, 0] = [2, 3, 4]
    return b, b.op("conv2d", x, b.const(w, dtype="int8"), pads=[G - 2, 0, 0, 0])


def _conv_wide_kernel_taps_apart():
    b = _b()
    x = b.input("x", (1, 1, 3), 8)
    return b, b.op("conv2d", x, b.const(np.array([[[[1, 10]]]], np.int8)), strides=[1, G], dilations=[1, G],
                   pads=[0, G, 0, G])


def _tiny_convs_chain():
    b = _b()
    y = b.input("x", (1, 3, 3), 8)
    for i in range(200):
        y = b.op("conv2d", y, b.const(np.array([[[[1, 0], [0, 1]]]], np.int8)), pads=[0, 0, 1, 1])
        y = b.op("clip", y, lo=-127, hi=127)
    return b, y


def _tiny_pools_chain():
    b = _b()
    y = b.input("x", (1, 3, 3), 8)
    for _ in range(400):
        y = b.op("max_pool2d", y, kernel=[2, 2], pads=[0, 0, 1, 1])
    return b, y


def _maxpool_far_pads():
    b = _b()
    x = b.input("x", (1, 2, 2), 8)
    return b, b.op("max_pool2d", x, kernel=[2, 2], dilations=[G, G], strides=[G, G], pads=[G, G, 0, 0])


def _maxpool_tall_kernel():
    b = _b()
    x = b.input("x", (1, 2, 1), 8)
    return b, b.op("max_pool2d", x, kernel=[G, 1], pads=[G - 1, 0, 0, 0])


def _depthwise_taps_in_pads():
    b = _b()
    x = b.input("x", (4096, 1, 1), 8)
    w = _rng(2).integers(-127, 128, (4096, 1, 3, 3))
    return b, b.op("conv2d", x, b.const(w), pads=[1, 1, 1, 1], groups=4096)


def _depthwise_far():
    b = _b()
    x = b.input("x", (256, 2, 2), 8)
    w = _rng(3).integers(-127, 128, (256, 1, 1, 1))
    return b, b.op("conv2d", x, b.const(w), strides=[G, G], pads=[G, G, G, G], groups=256)


def _dense_wide_k():
    b = _b()
    x = b.input("x", (G,), 8)
    return b, b.op("dense", x, b.const(_rng(4).integers(-1, 2, (1, G))), b.const([7]))


def _dense_tiny_chain():
    b = _b()
    y = b.input("x", (1,), 8)
    for _ in range(500):
        y = b.op("dense", y, b.const(np.array([[1]], np.int8)))
    return b, y


def _matmul_tiny_chain():
    b = _b()
    y = b.input("x", (1, 1), 8)
    for _ in range(300):
        y = b.op("clip", b.op("matmul", y, y), lo=-127, hi=127)
    return b, y


def _sum_2_24():
    b = _b()
    x = b.input("x", (1 << 12, 1 << 12), 8)
    return b, b.op("sum", x, axes=[0, 1])


def _max_2_20_rank6():
    b = _b()
    x = b.input("x", (4, 4, 4, 4, 64, 64), 8)
    return b, b.op("max", x, axes=[0, 2, 4], keepdims=0)


def _sum_strided_axis():
    b = _b()
    x = b.input("x", (1 << 10, 1 << 10), 8)
    return b, b.op("sum", x, axes=[0], keepdims=0)


def _lut_big_tables():
    b = _b()
    y = b.input("x", (1,), 16)
    m = (1 << 15) - 1
    for i in range(256):
        t = _rng(10 + i).integers(-m, m + 1, 2 * m + 1)
        y = b.op("lut", y, b.const(t), offset=-m)
    return b, y


def _lut_chain():
    b = _b()
    y = b.input("x", (1,), 8)
    t = np.arange(-127, 128)[::-1].copy()
    for _ in range(1000):
        y = b.op("lut", y, b.const(t), offset=-127)
    return b, y


def _div_chain():
    b = _b()
    y = b.input("x", (4,), 8)
    for i in range(1000):
        y = b.op("div", y, b.const([1 + i % 3]))
    return b, y


def _div_by_activation():
    b = _b()
    x = b.input("x", (1 << 16,), 16)
    d = b.op("add", b.op("clip", x, lo=0, hi=1000), b.const([1]))
    return b, b.op("div", x, d)


def _relu_chain():
    b = _b()
    y = b.input("x", (1,), 8)
    for _ in range(4000):
        y = b.op("relu", y)
    return b, y


def _reshape_chain():
    b = _b()
    y = b.input("x", (2, 2), 8)
    for i in range(2000):
        y = b.op("reshape", y, shape=[4] if i % 2 == 0 else [2, 2])
    return b, y


def _transpose_rank6_chain():
    b = _b()
    y = b.input("x", (2, 2, 2, 2, 2, 2), 8)
    for _ in range(1000):
        y = b.op("transpose", y, perm=[5, 0, 1, 2, 3, 4])
    return b, y


def _concat_one_input():
    b = _b()
    x = b.input("x", (1,), 8)
    return b, b.op("concat", *([x] * 100_000), axis=0)


def _concat_many_consts():
    b = _b()
    x = b.input("x", (1,), 8)
    c = b.const([5])
    return b, b.op("concat", *([x, c] * 20_000), axis=0)


def _slice_huge_step():
    b = _b()
    x = b.input("x", (16, 1024, 1024), 8)
    return b, b.op("slice", x, starts=[0, 0, 0], ends=[16, 1024, 1024], steps=[G, G, G])


def _slice_chain():
    b = _b()
    y = b.input("x", (4, 4), 8)
    for _ in range(2000):
        y = b.op("slice", y, starts=[0, 0], ends=[4, 4], steps=[1, 1])
    return b, y


def _pad_geometry_bound():
    b = _b()
    x = b.input("x", (1,), 8)
    return b, b.op("pad", x, pads=[G - 1, 0], value=-3)


def _pad_rank6():
    b = _b()
    x = b.input("x", (1, 1, 1, 1, 1, 1), 8)
    return b, b.op("pad", x, pads=[0, 1, 0, 1, 0, 1, 15, 0, 15, 0, 15, 0], value=I32_MAX)


def _requant_int32():
    b = _b()
    x = b.input("x", (1 << 16,), 32)
    return b, b.op("requant", x, b.const([I32_MAX]), shift=62, bits=32)


def _requant_chain():
    b = _b()
    y = b.input("x", (1,), 32)
    for _ in range(1000):
        y = b.op("requant", y, b.const([(1 << 30) + 1]), shift=30, bits=32)
    return b, y


def _clip_int32_chain():
    b = _b()
    y = b.input("x", (1,), 32)
    for _ in range(2000):
        y = b.op("clip", y, lo=I32_MIN, hi=I32_MAX)
    return b, y


def _broadcast_add():
    b = _b()
    x = b.input("x", (1, 1), 8)
    return b, b.op("add", x, b.const(_rng(5).integers(-127, 128, (1 << 12, 1 << 12)), dtype="int8"))


def _mul_tiny_chain():
    b = _b()
    y = b.input("x", (1, 1, 1, 1, 1, 1), 8)
    for _ in range(2000):
        y = b.op("clip", b.op("mul", y, b.const(np.full((1, 1, 1, 1, 1, 1), -1))), lo=-127, hi=127)
    return b, y


CATALOGUE: dict[str, Case] = {c.name: c for c in [
    Case("conv_big_pads", "1x1 conv, pads and stride 2^20 on one pixel: 2x2 outputs, one real tap", _conv_big_pads),
    Case("conv_huge_strides", "3x3 conv, strides 2^20 over a 16x1024x1024 input (2^24, unpaid): 1 output", _conv_huge_strides),
    Case("conv_huge_dilations", "2x2 conv, dilations/pads/strides 2^20 on 3x3: taps 2^20 apart", _conv_huge_dilations),
    Case("conv_tall_kernel", "kernel 2^20 x 1, all but 2 taps in the padding (pays its 2^20 MACs)", _conv_tall_kernel),
    Case("conv_taps_apart", "1x2 kernel, stride/dilation/pads 2^20 along W: each tap reads 1 pixel", _conv_wide_kernel_taps_apart),
    Case("tiny_convs_chain", "200 x (2x2 conv on 3x3 + clip): per-call overhead, ~140 gas a node", _tiny_convs_chain),
    Case("tiny_pools_chain", "400 x 2x2 max_pool on 3x3: per-call overhead, ~145 gas a node", _tiny_pools_chain),
    Case("maxpool_far_pads", "2x2 pool dilated 2^20, strides/pads 2^20: 1 output, 1 real tap", _maxpool_far_pads),
    Case("maxpool_tall_kernel", "2^20 x 1 pool over 2 rows, pads 2^20-1: 2^21 compares paid, 3 real", _maxpool_tall_kernel),
    Case("depthwise_pads", "depthwise 3x3 on 4096 channels of 1x1: 8 of 9 taps in the padding", _depthwise_taps_in_pads),
    Case("depthwise_far", "depthwise 1x1, strides/pads 2^20, 256 channels: 9 outputs, 1 real", _depthwise_far),
    Case("dense_wide_k", "dense k = 2^20 into 1 output (one long dot product)", _dense_wide_k),
    Case("dense_tiny_chain", "500 dense 1x1 nodes on one element", _dense_tiny_chain),
    Case("matmul_tiny_chain", "300 x (1x1 matmul + clip) on one element", _matmul_tiny_chain),
    Case("sum_2_24", "sum over 2^24 elements (the tensor limit) into one", _sum_2_24),
    Case("max_rank6", "max over 3 of 6 axes, 2^20 elements, strided", _max_2_20_rank6),
    Case("sum_strided_axis", "sum over axis 0 of 1024x1024 (column sums)", _sum_strided_axis),
    Case("lut_big_tables", "256 lut nodes, each its own 65535-entry table (unpaid), on one element", _lut_big_tables),
    Case("lut_chain", "1000 lut nodes (255 entries) on one element", _lut_chain),
    Case("div_chain", "1000 div nodes by a constant on 4 elements", _div_chain),
    Case("div_by_activation", "div of 2^16 elements by an activation divisor", _div_by_activation),
    Case("relu_chain", "4000 relu nodes on one element (near MAX_NODES)", _relu_chain),
    Case("reshape_chain", "2000 reshapes of 4 elements", _reshape_chain),
    Case("transpose_chain", "1000 rank-6 transposes of 64 elements", _transpose_rank6_chain),
    Case("concat_one_input", "concat listing one 1-element input 100,000 times", _concat_one_input),
    Case("concat_consts", "concat of an input and a constant, 20,000 times each", _concat_many_consts),
    Case("slice_huge_step", "slice steps 2^20 of a 2^24-element input (unpaid): one element out", _slice_huge_step),
    Case("slice_chain", "2000 identity slices of 16 elements", _slice_chain),
    Case("pad_geometry_bound", "pad one element by 2^20-1 (the dimension limit)", _pad_geometry_bound),
    Case("pad_rank6", "rank-6 pad of one element, value int32 max", _pad_rank6),
    Case("requant_int32", "requant of 2^16 int32 values, multiplier 2^31-1, shift 62", _requant_int32),
    Case("requant_chain", "1000 int32 requants on one element", _requant_chain),
    Case("clip_int32_chain", "2000 clips at the int32 ends on one element", _clip_int32_chain),
    Case("broadcast_add", "one element broadcast against a 4096x4096 constant", _broadcast_add),
    Case("mul_tiny_chain", "2000 x (rank-6 broadcast mul + clip) on one element", _mul_tiny_chain),
]}


CATALOGUE.update({name: Case(name, why, make) for name, why, make in adversarial_memory.CASES})


def build(name: str, seed: int = 0, opset: int | None = None):
    """(model, x): the accepted model and an integer input of batch 1 in its input's bit range; with
    `opset`, the model moved to that repricing opset (cvm.repricing.repriced: raises VerifyError/LimitError
    where the opset refuses it, e.g. opset 4's limit on a node's inputs)."""
    b, out = CATALOGUE[name].make()
    model = b.build(out)
    if opset is not None:
        model = repriced(model, opset)
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    x = _rng(seed).integers(-m, m + 1, (1,) + tuple(spec.shape[1:]), dtype=np.int64).astype(spec.dtype)
    return model, x
