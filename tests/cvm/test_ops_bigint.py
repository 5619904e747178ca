"""Each op on small cases: the reference interpreter against the naive big-integer evaluator."""
import numpy as np
import pytest

import cvm
import bigint

RNG = np.random.default_rng(1)


def run_ref(b, out, x):
    return b.build(out).run(x, backend="reference")


def rand(shape, bits=8, rng=RNG):
    m = 2 ** (bits - 1) - 1
    return rng.integers(-m, m + 1, shape)


@pytest.mark.parametrize("strides,pads,dilations,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1), ((2, 1), (1, 0, 2, 1), (1, 1), 1),
    ((1, 2), (2, 2, 2, 2), (2, 1), 2), ((3, 3), (1, 1, 0, 0), (1, 2), 4)])
def test_conv2d(strides, pads, dilations, groups):
    x = rand((2, 4, 7, 6)).astype(np.int8)
    w = rand((8, 4 // groups, 3, 2))
    bias = rand((8,), 20)
    b = cvm.GraphBuilder()
    xi = b.input("x", (4, 7, 6), 8)
    y = b.op("conv2d", xi, b.const(w, dtype="int8"), b.const(bias, dtype="int32"),
             strides=strides, pads=pads, dilations=dilations, groups=groups)
    got = run_ref(b, y, x)
    want = bigint.conv2d(x, w, bias, strides, pads, dilations, groups)
    assert np.array_equal(got.astype(object), want)


def test_dense_and_matmul():
    x = rand((3, 2, 5), 16).astype(np.int16)
    w, bias = rand((4, 5)), rand((4,), 24)
    b = cvm.GraphBuilder()
    xi = b.input("x", (2, 5), 16)
    y = b.op("dense", xi, b.const(w), b.const(bias))
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.dense(x, w, bias))

    x = rand((3, 2, 5), 14).astype(np.int16)
    b = cvm.GraphBuilder()
    xi = b.input("x", (2, 5), 14)
    t = b.op("transpose", xi, perm=(1, 0))
    y = b.op("matmul", xi, t)
    want = np.array([[[sum(int(x[n, i, k]) * int(x[n, j, k]) for k in range(5)) for j in range(2)]
                      for i in range(2)] for n in range(3)], dtype=object)
    assert np.array_equal(run_ref(b, y, x).astype(object), want)


@pytest.mark.parametrize("op,fn", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                   ("mul", lambda a, b: a * b)])
def test_binary_broadcast(op, fn):
    x = rand((2, 3, 4, 5), 16).astype(np.int16)
    c = rand((4, 1), 16)
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 4, 5), 16)
    y = b.op(op, xi, b.const(c))
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.binary(fn, x, c))
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 4, 5), 16)
    y = b.op(op, b.const(c), xi)
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.binary(fn, c, x))


def test_requant_per_channel_and_div():
    x = rand((2, 3, 4), 32).astype(np.int32)
    m = np.array([1, 2 ** 31 - 1, 12345])
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 4), 32)
    y = b.op("requant", xi, b.const(m, dtype="int32"), shift=31, bits=12, axis=0)
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.requant(x, m, 31, 12, 0))

    d = np.array([1, 2, 3, 7])
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 4), 32)
    y = b.op("div", xi, b.const(d))
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.div(x, d))


def test_max_pool_with_padding_and_dilation():
    x = rand((2, 3, 6, 7)).astype(np.int8)
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 6, 7), 8)
    kw = dict(kernel=(3, 2), strides=(2, 3), pads=(1, 1, 2, 0), dilations=(1, 2))
    y = b.op("max_pool2d", xi, **kw)
    assert np.array_equal(run_ref(b, y, x).astype(object), bigint.max_pool2d(x, **kw))


def test_reductions_lut_layout():
    x = rand((2, 3, 4), 8).astype(np.int8)
    b = cvm.GraphBuilder()
    xi = b.input("x", (3, 4), 8)
    table = np.arange(-127, 128) ** 2 // 100
    outs = [b.op("sum", xi, axes=(1,), keepdims=0), b.op("max", xi, axes=(0, 1)),
            b.op("lut", xi, b.const(table), offset=-127), b.op("pad", xi, pads=(1, 0, 0, 2), value=-3),
            b.op("slice", xi, starts=(1, 0), ends=(3, 4), steps=(1, 3)),
            b.op("concat", xi, b.const(np.full((1, 4), 9)), axis=0), b.op("reshape", xi, shape=(2, 6)),
            b.op("relu", xi), b.op("clip", xi, lo=-5, hi=60)]
    got = b.build(outs).run(x, backend="reference")
    xs = x.astype(object)
    want = [xs.sum(axis=2), xs.max(axis=(1, 2), keepdims=True), bigint.obj(table)[x.astype(np.int64) + 127],
            np.pad(xs, ((0, 0), (1, 0), (0, 2)), constant_values=-3), xs[:, 1:3, 0:4:3],
            np.concatenate([xs, np.full((2, 1, 4), 9, dtype=object)], axis=1), xs.reshape(2, 2, 6),
            np.where(xs > 0, xs, 0), np.minimum(np.maximum(xs, -5), 60)]
    for name, w in zip(outs, want):
        assert np.array_equal(got[name].astype(object), w), name
