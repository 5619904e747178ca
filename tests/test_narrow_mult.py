"""narrow_mult.narrow: a narrowed requant (m', r', s') it returns equals the requant it replaces on every
value of the domain (checked here again with Python integers, independently of its numpy check), after
the clip when one is given, and stays within int32 lanes; and for the multipliers MRT emits (2^29..2^31,
an 8-bit or relu'd residual, the add's requant over a 13-bit sum) it finds one, so the kernels use it
(a 13-bit residual requantized by such a multiplier often has none: its conv keeps conv_vnni).

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 -> 100)."""
from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from cvm.interp.numba_kernels.narrow_mult import LANE, narrow

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 10)


def requant(d: int, m: int, r: int, s: int) -> int:
    return (d * m + r) >> s


def clipped(v: int, clip) -> int:
    return v if clip is None else min(max(v, clip[0]), clip[1])


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(mult=st.one_of(st.integers(1, (1 << 31) - 1), st.integers(-(1 << 20), 1 << 20)), shift=st.integers(0, 40),
       lo=st.integers(-(1 << 15), 1 << 15), width=st.integers(0, 5000), clip=st.one_of(st.none(), st.just((0, 255)),
                                                                                  st.just((-127, 127))))
def test_a_narrowed_requant_is_exact_on_its_domain(mult, shift, lo, width, clip):
    hi = lo + width
    rnd = (1 << shift) >> 1
    got = narrow(mult, rnd, shift, lo, hi, clip)
    if got is None:
        return
    m, r, s = got
    for d in range(lo, hi + 1):
        assert abs(d * m + r) < LANE
        assert clipped(requant(d, m, r, s), clip) == clipped(requant(d, mult, rnd, shift), clip), (d, got)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(rmul=st.integers(1 << 29, (1 << 31) - 1), rshift=st.integers(26, 29), rbits=st.sampled_from([8, 9]),
       m2=st.integers(1 << 29, (1 << 31) - 1), shift2=st.integers(32, 35), lim=st.sampled_from([2047, 4095]))
def test_mrt_shaped_requants_narrow(rmul, rshift, rbits, m2, shift2, lim):
    rlo, rhi = (0, 255) if rbits == 9 else (-(1 << (rbits - 1)) + 1, (1 << (rbits - 1)) - 1)
    rq = narrow(rmul, (1 << rshift) >> 1, rshift, rlo, rhi)
    ends = [requant(d, rmul, (1 << rshift) >> 1, rshift) for d in (rlo, rhi)]
    assert rq is not None
    assert narrow(m2, 1 << (shift2 - 1), shift2, -lim + min(ends), lim + max(ends), (0, 255)) is not None


def test_domains_too_large_or_degenerate_are_refused():
    assert narrow(1 << 30, 1 << 33, 34, -(1 << 20), 1 << 20) is None
    assert narrow(0, 0, 0, 0, 10) is None
    assert narrow(5, 0, 0, 10, 0) is None
