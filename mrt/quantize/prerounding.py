"""Target hooks that run before a rescale (QuantConfig.pre_rounding names one). The FHE target's
tables take inputs of at most lut_input_bits: a wider input is first reduced by an exact rounding
shift, which concrete lowers to round_bit_pattern, a cheap operation, instead of a wide table."""
from __future__ import annotations

import numpy as np

from cvm.arith import bits_max, round_shift


def none(qz, x: str, scale: np.ndarray, name: str) -> tuple[str, np.ndarray]:
    return x, scale


def lookup_budget(qz, x: str, scale: np.ndarray, name: str) -> tuple[str, np.ndarray]:
    """x shifted right (rounding) until its proven interval fits lut_input_bits; the scale follows."""
    lo, hi = qz.interval(x)
    lim, shift = bits_max(qz.cfg.lut_input_bits), 0
    while max(abs(round_shift(lo, shift)), abs(round_shift(hi, shift))) > lim:
        shift += 1
    if not shift:
        return x, scale
    x = qz.op("requant", x, qz.const([1], dtype="int32"), shift=shift, bits=qz.cfg.lut_input_bits,
              name=f"{name}.round")
    return x, scale * 2.0 ** shift


HOOKS = {"none": none, "lookup_budget": lookup_budget}
