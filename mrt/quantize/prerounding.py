"""Target hooks that run before a rescale (QuantConfig.pre_rounding names one). The FHE target's
tables take inputs of at most lut_input_bits: a wider input is first reduced by a rounding shift,
requant(x, 1, shift, bits=lut_input_bits), which the FHE backend lowers to concrete's exact
round_bit_pattern instead of a wide table.

Two ways to size that shift:
- `lookup_budget`: from the verifier's proven (worst-case) interval, so the shift never clips. The
  proven interval of an accumulator bounds every combination of inputs and is far wider than what
  real data reaches: on the digits MLP the rescale that follows multiplied by 3 to 8, i.e. the
  6-bit table input carried only 2 to 3 bits of the activation.
- `lookup_calibrated`: from the calibrated range, the range beyond which the rescale's output
  saturates anyway: the shift is the smallest one that keeps that range inside the table budget, and
  the requant's own `bits` clamps whatever lies beyond it. The clamp is part of the CVM graph (an
  existing op), so every backend computes it the same way; the FHE backend lowers a requant whose
  rounded input is wider than the budget as an exact split rounding (cvm.interp.fhe_clamp)."""
from __future__ import annotations

import numpy as np

from cvm.arith import bits_max, round_shift


def none(qz, x: str, scale: np.ndarray, name: str, **_) -> tuple[str, np.ndarray]:
    return x, scale


def _emit(qz, x: str, scale: np.ndarray, name: str, shift: int) -> tuple[str, np.ndarray]:
    if not shift:
        return x, scale
    x = qz.op("requant", x, qz.const([1], dtype="int32"), shift=shift, bits=qz.cfg.lut_input_bits,
              name=f"{name}.round")
    return x, scale * 2.0 ** shift


def proven_shift(lo: int, hi: int, lut_input_bits: int) -> int:
    """The smallest rounding shift that brings every value of [lo, hi] within lut_input_bits."""
    lim, shift = bits_max(lut_input_bits), 0
    while max(abs(round_shift(lo, shift)), abs(round_shift(hi, shift))) > lim:
        shift += 1
    return shift


def lookup_budget(qz, x: str, scale: np.ndarray, name: str, **_) -> tuple[str, np.ndarray]:
    """x shifted right (rounding) until its proven interval fits lut_input_bits; the scale follows."""
    return _emit(qz, x, scale, name, proven_shift(*qz.interval(x), qz.cfg.lut_input_bits))


def saturation_reach(scale: np.ndarray, scale_out: float, bits: int, proven: int) -> int:
    """The largest |x| (input units) whose rescale to scale_out within `bits` does not saturate, over
    all channels: beyond it every channel's output is already clipped to bits_max(bits). A channel
    whose output rounds to 0 over the whole proven range |x| <= proven (a dead unit) is left out."""
    ratio = np.atleast_1d(np.asarray(scale, np.float64)) / float(scale_out)
    live = ratio[ratio * proven >= 0.5]
    if live.size == 0:
        return 0
    return min(proven, int(np.ceil((bits_max(bits) + 0.5) / float(live.min()))))


def calibrated_shift(lo: int, hi: int, reach: int, lut_input_bits: int) -> int:
    """The smallest shift that keeps [-reach, reach] within lut_input_bits; never more than the
    proven interval needs (a narrow input is not rounded at all)."""
    return min(proven_shift(-reach, reach, lut_input_bits), proven_shift(lo, hi, lut_input_bits))


def lookup_calibrated(qz, x: str, scale: np.ndarray, name: str, *, scale_out: float, bits: int, **_
                      ) -> tuple[str, np.ndarray]:
    """x rounded so that the range where its rescale does not saturate fits lut_input_bits; beyond
    it the pre-rounding requant's `bits` clamps (the rescale would have clipped those values anyway,
    up to the rounding of the boundary)."""
    lo, hi = qz.interval(x)
    reach = saturation_reach(scale, scale_out, bits, max(abs(lo), abs(hi)))
    return _emit(qz, x, scale, name, calibrated_shift(lo, hi, reach, qz.cfg.lut_input_bits))


MULTIPLIER_BITS = 2  # per-channel pre-rounding multipliers below 2^2: the rounded value is 2 bits wider (digits:
# 2..5 bits gave cosine 0.9983..0.9986 to float, each bit costs two bootstraps per element)


def lookup_channels(qz, x: str, scale: np.ndarray, name: str, *, scale_out: float, bits: int, axis=None, **_
                    ) -> tuple[str, np.ndarray]:
    """Per channel: requant(x, m_c, shift, bits=lut_input_bits) with small multipliers m_c so that
    each channel's own saturation range fills the table budget."""
    ratio = np.atleast_1d(np.asarray(scale, np.float64)) / float(scale_out)
    lo, hi = qz.interval(x)
    proven = max(abs(lo), abs(hi))
    if ratio.size == 1 or axis is None:
        return lookup_calibrated(qz, x, scale, name, scale_out=scale_out, bits=bits)
    lim = bits_max(qz.cfg.lut_input_bits)
    target = ratio * lim / bits_max(bits)  # m_c / 2^shift: the output's saturation point lands on the clip
    live = target * proven >= 0.5
    if not live.any() or float(target[live].max()) * proven <= lim:
        return lookup_calibrated(qz, x, scale, name, scale_out=scale_out, bits=bits)
    top = float(target[live].max())
    shift = int(np.floor(np.log2(((1 << MULTIPLIER_BITS) - 0.5) / top)))
    if shift < 1:
        return lookup_calibrated(qz, x, scale, name, scale_out=scale_out, bits=bits)
    m = np.maximum(1, np.round(target * 2.0 ** shift)).astype(np.int64)
    x = qz.op("requant", x, qz.const(m, dtype="int32"), shift=shift, bits=qz.cfg.lut_input_bits, axis=axis,
              name=f"{name}.round")
    return x, np.asarray(scale, np.float64) * 2.0 ** shift / m


HOOKS = {"none": none, "lookup_budget": lookup_budget, "lookup_calibrated": lookup_calibrated,
         "lookup_channels": lookup_channels}
