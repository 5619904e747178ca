"""Small hand-built integer graphs (4-6 bit values) that exercise every FHE lowering rule."""
import numpy as np

import cvm


def mlp(seed: int = 1) -> cvm.Model:
    """dense -> round (requant m=1) -> requant -> relu -> dense: the shape `mrt convert --target fhe` emits."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (8,), bits=4)
    h = b.op("dense", x, b.const(rng.integers(-7, 8, (6, 8))), b.const(rng.integers(-20, 20, 6)), name="fc1")
    h = b.op("requant", h, b.const([1]), shift=4, bits=5, name="fc1.round")
    h = b.op("requant", h, b.const([3]), shift=2, bits=4, name="fc1.q")
    h = b.op("relu", h, name="relu1")
    y = b.op("dense", h, b.const(rng.integers(-7, 8, (3, 6))), name="fc2")
    return b.build(y)


def per_channel(seed: int = 2) -> cvm.Model:
    """A per-output-channel requant: one table per channel."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (6,), bits=3)
    h = b.op("dense", x, b.const(rng.integers(-2, 3, (4, 6))), name="fc")
    y = b.op("requant", h, b.const([1, 2, 3, 5]), shift=2, bits=4, axis=0, name="q")
    return b.build(y)


def conv(seed: int = 3) -> cvm.Model:
    """conv2d (padded) -> round -> relu -> max_pool2d -> flatten -> dense."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 5, 5), bits=3)
    h = b.op("conv2d", x, b.const(rng.integers(-3, 4, (2, 1, 3, 3))), b.const([2, -3]), pads=(1, 1, 1, 1),
             name="conv")
    h = b.op("requant", h, b.const([1]), shift=3, bits=4, name="conv.round")
    h = b.op("relu", h, name="relu")
    h = b.op("max_pool2d", h, kernel=(2, 2), strides=(2, 2), pads=(0, 0, 1, 1), name="pool")
    h = b.op("flatten", h, name="flat")
    y = b.op("dense", h, b.const(rng.integers(-3, 4, (3, 18))), name="fc")
    return b.build(y)


def lut(seed: int = 4) -> cvm.Model:
    """A non-monotone integer table (a sigmoid-like bump) -> dense."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (5,), bits=4)
    table = np.array([0, 1, 3, 6, 9, 12, 14, 15, 14, 12, 9, 6, 3, 1, 0])
    h = b.op("lut", x, b.const(table), offset=-7, name="bump")
    y = b.op("dense", h, b.const(rng.integers(-3, 4, (2, 5))), name="fc")
    return b.build(y)


def layout(seed: int = 5) -> cvm.Model:
    """transpose, pad, slice, concat with a constant, sum, add, sub, mul, clip, reshape."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 3), bits=3)
    t = b.op("transpose", x, perm=(1, 0), name="t")                        # (3, 2)
    p = b.op("pad", t, pads=(1, 0, 0, 1), value=-2, name="p")              # (4, 3)
    s = b.op("slice", p, starts=(0, 1), ends=(4, 3), steps=(2, 1), name="s")  # (2, 2)
    c = b.op("concat", s, b.const(rng.integers(-3, 4, (1, 2))), axis=0, name="cat")  # (3, 2)
    m = b.op("mul", c, b.const([2, -1]), name="mul")
    a = b.op("add", m, b.const([[1], [0], [-1]]), name="add")
    d = b.op("sub", a, c, name="sub")
    u = b.op("sum", d, axes=(1,), keepdims=0, name="sum")                  # (3,)
    y = b.op("clip", u, lo=-6, hi=9, name="clip")
    r = b.op("reshape", y, shape=(3, 1), name="r")
    return b.build(r)


def wide_table(seed: int = 6) -> cvm.Model:
    """A requant whose input needs 12 bits and whose multiplier makes no rounding exact, too large (> 16)
    for a split after a clear multiply: refused."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (8,), bits=5)
    h = b.op("dense", x, b.const(rng.integers(-15, 16, (4, 8))), name="fc")
    y = b.op("requant", h, b.const([77]), shift=10, bits=4, name="fc.q")
    return b.build(y)




def arith(seed: int = 7) -> cvm.Model:
    """Two-activation mul and matmul, div by a constant and by an activation, max reduction,
    constant minus activation."""
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 2), bits=3)
    sq = b.op("mul", x, x, name="sq")                                      # [-9, 9]
    mm = b.op("matmul", x, b.op("transpose", x, perm=(1, 0), name="xt"), name="mm")  # [-18, 18]
    d1 = b.op("div", mm, b.const([[3, 2], [1, 4]]), name="d1")
    pos = b.op("add", b.op("relu", x, name="rx"), b.const([1]), name="pos")  # [1, 4]
    d2 = b.op("div", x, pos, name="d2")
    mx = b.op("max", sq, axes=(1,), keepdims=1, name="mx")                 # (2, 1)
    k = b.op("sub", b.const([[1, -1]]), x, name="k")                      # constant first
    y = b.op("concat", d2, mx, d1, k, axis=1, name="y")                    # (2, 7)
    return b.build(y)


ALL = {"mlp": mlp, "per_channel": per_channel, "conv": conv, "lut": lut, "layout": layout, "arith": arith}
