"""Planning of table lookups: widths as concrete counts them, exact rounding search, refusals."""
import numpy as np
import pytest
from concrete import fhe

from cvm.interp.fhe_lookup import FHEUnsupported, int_bits, plan_lookup, tlu_bits
from cvm.arith import round_shift


def test_int_bits_is_concretes_width():
    for lo in range(-70, 70, 3):
        for hi in range(lo, 140, 7):
            assert int_bits(lo, hi) == fhe.Integer.that_can_represent(np.array([lo, hi])).bit_width, (lo, hi)


def _as_fn(f):
    """A scalar function of x -> the planner's (n, 1) form."""
    return lambda xs: np.array([f(int(v)) for v in xs], np.int64).reshape(-1, 1)


def _check_exact(f, plan):
    """Brute force: f(x) == f(representative(round_bit_pattern(x + c, r))) on the whole interval."""
    for x in range(plan.lo, plan.hi + 1):
        v = round_shift(x + plan.offset, plan.shift) << plan.shift if plan.shift else x
        assert f(int(plan.representative(v))) == f(x), x


def test_narrow_input_needs_no_rounding():
    plan = plan_lookup(_as_fn(lambda x: max(x, 0)), -31, 31, 6, monotone=True, node="n", what="relu")
    assert (plan.shift, plan.offset, plan.tlu_bits) == (0, 0, 6)


def test_rounding_requant_is_folded_at_its_own_shift():
    f = lambda x: min(max(round_shift(x, 10), -31), 31)  # noqa: E731  requant(m=1, shift=10, bits=6)
    plan = plan_lookup(_as_fn(f), -19530, 19796, 6, monotone=True, node="n", what="requant")
    assert (plan.shift, plan.offset) == (10, 0) and plan.tlu_bits <= 6
    _check_exact(f, plan)


def test_offset_moves_cells_onto_the_breakpoints():
    f = lambda x: (x + 5) // 8  # noqa: E731  steps at x = 3 (mod 8): no cell of round_shift(x, 3) fits
    plan = plan_lookup(_as_fn(f), -300, 300, 7, monotone=True, node="n", what="lut")
    assert plan.shift == 3 and plan.offset != 0
    _check_exact(f, plan)


def test_non_monotone_table_is_checked_value_by_value():
    f = lambda x: [0, 5, 1, 4][(x // 16) % 4]  # noqa: E731  constant on blocks of 16 starting at 0
    plan = plan_lookup(_as_fn(f), 0, 1023, 7, monotone=False, node="n", what="lut")
    assert plan.shift == 4
    _check_exact(f, plan)


def test_inexact_rounding_is_refused_naming_the_node():
    f = lambda x: min(max(round_shift(7 * x, 6), -7), 7)  # noqa: E731  requant(m=7, shift=6)
    with pytest.raises(FHEUnsupported, match=r"node 'fc\.q'.*needs 12 bits.*lookup budget of 6") as e:
        plan_lookup(_as_fn(f), -1290, 1290, 6, monotone=True, node="fc.q", what="requant lookup")
    assert e.value.node == "fc.q" and e.value.rule == "fhe.lookup_bits"


def test_overflowing_rounding_costs_one_more_bit():
    assert tlu_bits(-2047, 2047, 4) == 9  # 2047 rounds up to 2048: concrete keeps an extra bit
    assert tlu_bits(-2000, 2000, 4) == 8


@pytest.mark.parametrize("seed", range(5))
def test_random_step_functions_plan_exactly(seed):
    rng = np.random.default_rng(seed)
    r, phase = int(rng.integers(2, 6)), int(rng.integers(0, 64))
    lo, hi = -int(rng.integers(200, 900)), int(rng.integers(200, 900))
    steps = np.cumsum(rng.integers(0, 2, 4096))  # a non-decreasing step function, constant on 2^r blocks

    def f(x):
        return int(steps[((x + phase) >> r) + 1024])

    plan = plan_lookup(_as_fn(f), lo, hi, 11 - r + 1, monotone=True, node="n", what="step")
    _check_exact(f, plan)
