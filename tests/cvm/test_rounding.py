"""Rounding edge cases of requant and div: negative halves, shift 0, per-channel multipliers, clip bounds."""
import numpy as np
import pytest

import cvm
from cvm.arith import round_shift


def requant(x, m, shift, bits, axis=0, in_bits=32):
    x = np.asarray(x)
    b = cvm.GraphBuilder()
    xi = b.input("x", x.shape[1:], in_bits)
    y = b.op("requant", xi, b.const(m, dtype="int32"), shift=shift, bits=bits, axis=axis)
    return b.build(y).run(x.astype(np.int32), backend="reference")


@pytest.mark.parametrize("v,s,want", [(1, 1, 1), (-1, 1, 0), (3, 1, 2), (-3, 1, -1), (2, 2, 1), (-2, 2, 0),
                                      (-6, 2, -1), (6, 2, 2), (5, 0, 5), (-5, 0, -5), (-7, 3, -1), (-4, 3, 0)])
def test_round_half_up(v, s, want):
    # floor(v / 2^s + 1/2): halves go toward +inf, also for negative values.
    assert round_shift(v, s) == want
    assert round_shift(np.int64(v), s) == want


def test_requant_negative_halves_and_shift_zero():
    x = np.array([[-3, -2, -1, 0, 1, 2, 3]])
    assert requant(x, [1], 1, 8).tolist() == [[-1, -1, 0, 0, 1, 1, 2]]
    assert requant(x, [3], 0, 8).tolist() == [[-9, -6, -3, 0, 3, 6, 9]]


def test_requant_per_channel_axis():
    x = np.array([[[10, -10], [10, -10], [10, -10]]])  # sample shape (3, 2): channels on axis 0
    got = requant(x, [1, 2, 3], 2, 8, axis=0)
    assert got.tolist() == [[[3, -2], [5, -5], [8, -7]]]  # 10*3/4 = 7.5 -> 8; -30/4 = -7.5 -> -7
    got = requant(np.array([[[4, 4, 4]]]), [1, 2, 3], 1, 8, axis=1)
    assert got.tolist() == [[[2, 4, 6]]]


def test_requant_clips_to_symmetric_bits():
    x = np.array([[1000, -1000, 127, -127, 128, -128]])
    assert requant(x, [1], 0, 8).tolist() == [[127, -127, 127, -127, 127, -127]]
    assert requant(x, [1], 0, 1).tolist() == [[0, 0, 0, 0, 0, 0]]


def test_requant_extremes_stay_exact():
    x = np.array([[2 ** 31 - 1, -(2 ** 31 - 1)]])
    got = requant(x, [2 ** 31 - 1], 62, 32)
    want = [round_shift(int(v) * (2 ** 31 - 1), 62) for v in x[0]]
    assert got.tolist() == [want]


def test_div_rounds_half_up():
    b = cvm.GraphBuilder()
    xi = b.input("x", (8,), 8)
    y = b.op("div", xi, b.const([2]))
    x = np.array([[-5, -4, -3, -1, 1, 3, 5, 7]], np.int8)
    assert b.build(y).run(x, backend="reference").tolist() == [[-2, -2, -1, 0, 1, 2, 3, 4]]


def test_div_by_activation_proven_positive():
    b = cvm.GraphBuilder()
    xi = b.input("x", (4,), 8)
    pos = b.op("clip", xi, lo=1, hi=127)
    s = b.op("sum", pos, axes=(0,))
    y = b.op("div", b.op("mul", pos, b.const([100])), s)
    x = np.array([[1, 1, 2, -50]], np.int8)
    assert b.build(y).run(x, backend="reference").tolist() == [[20, 20, 40, 20]]
