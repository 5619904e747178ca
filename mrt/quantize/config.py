"""Quantization settings per target. Passed as arguments, never global."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

TARGETS = ("cvm", "fhe")
LOOKUP_RANGES = {"proven": "lookup_budget", "calibrated": "lookup_calibrated", "channels": "lookup_channels"}


@dataclass(frozen=True)
class QuantConfig:
    target: str = "cvm"
    bits: int = 8  # activations (symmetric, per tensor)
    weight_bits: int = 8  # weights (symmetric, per output channel)
    output_bits: int = 16  # graph outputs (more precision for logits costs nothing)
    feature_input_bits: int = 16  # 1-D (tabular) inputs, one scale per feature: more dynamic range
    acc_bits: int = 32  # accumulator budget of every multiply-accumulate (MAC splits keep it)
    lut_input_bits: int | None = None  # fhe: every table lookup's input fits this many bits
    lookup_range: str = "proven"  # fhe: size the rounding before a lookup from the verifier's "proven" worst case,
    # or from the "calibrated" range (one window per tensor) or per channel ("channels"), beyond which the rounding
    # requant clamps (LOOKUP_RANGES -> mrt.quantize.prerounding.HOOKS; docs/fhe.md)
    add_extra_bits: int = 4  # extra precision of the common scale of an activation + activation
    unsigned_activations: bool = True  # relu / clip(>= 0) outputs hold 0..2^bits - 1 (stored int16)
    wide_tensors: tuple[str, ...] = ()  # float tensors given wide_bits activations (mixed precision, mrt.mixed)
    wide_weight_bits: int | None = None  # weights of a MAC reading a wide tensor (None: weight_bits); the
    # recurrent default sets 10 (mrt.recurrent_precision)
    bias_correction: bool = False  # remove the mean shift rounded weights add (calibration means): on for fhe
    # (digits: 94.4% -> 95.8%); for cvm, mrt.pipeline measures both and keeps the better (mrt.bias_choice), unless set
    softmax: str = "client"  # final softmax: "client" drops it (outputs logits), "integer" computes it

    # Fixed choices of the rules, named here (class constants: not per conversion, not in the metadata)
    softmax_exp_bits: ClassVar[int] = 12  # integer softmax: exp(x - max) tabulated at scale 2^-12
    add_headroom_bits: ClassVar[int] = 2  # an add operand at the common scale: 2 bits over its calibrated range
    bias_share: ClassVar[int] = 4  # a MAC's bias takes at most 1/4 of the accumulator budget
    wide_bits: ClassVar[int] = 12  # a wide tensor's activation bits: 4 more than the default, still int16
    # storage (13 bits when unsigned), and a MAC reading it needs no split below K = 8192 taps
    # (2^12 x 2^7 x K < 2^31); 16 bits would split most convs and store unsigned values in int32

    @property
    def bias_correction_at_inputs(self) -> bool:
        """Whether bias correction also corrects the MACs that read a graph input. The fhe target keeps
        correcting every layer (its digits 94.4% -> 95.8% was measured so); on cvm, correcting the layer
        that reads cancer_linear's per-feature inputs moved a near-tie test sample (100% -> 99.4% agreement)."""
        return self.target == "fhe"

    @property
    def output_headroom_bits(self) -> int:
        """Graph outputs keep 2^this x their calibrated range: a forecast or logit beyond what calibration
        saw is not clipped (the sunspots LSTM's test peak, 13% above its calibration's, lost 23.7 sunspots).
        One of 16 bits; none when outputs have few bits (fhe: 8)."""
        return 1 if self.output_bits >= 12 else 0

    @property
    def pre_rounding(self) -> str:
        """The hook run before each rescale (mrt.quantize.prerounding.HOOKS): with a lookup budget
        (the fhe target), a wider input is first rounded into it."""
        if self.lut_input_bits is None:
            return "none"
        return LOOKUP_RANGES[self.lookup_range]

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r}; choose from {TARGETS}")
        if self.lookup_range not in LOOKUP_RANGES:
            raise ValueError(f"lookup_range must be one of {tuple(LOOKUP_RANGES)}, got {self.lookup_range!r}")
        if self.softmax not in ("client", "integer"):
            raise ValueError(f"softmax must be 'client' or 'integer', got {self.softmax!r}")
        for name in ("bits", "weight_bits", "output_bits", "feature_input_bits"):
            if not 2 <= getattr(self, name) <= 16:
                raise ValueError(f"{name} must be in 2..16, got {getattr(self, name)}")
        if self.wide_weight_bits is not None and not 2 <= self.wide_weight_bits <= 16:
            raise ValueError(f"wide_weight_bits must be in 2..16, got {self.wide_weight_bits}")
        object.__setattr__(self, "wide_tensors", tuple(self.wide_tensors))
        if not 8 <= self.acc_bits <= 32:
            raise ValueError(f"acc_bits must be in 8..32, got {self.acc_bits}")


def config_for(target: str = "cvm", **overrides) -> QuantConfig:
    """Defaults of a target; `None` overrides are ignored so CLI flags can pass through."""
    base = QuantConfig(target=target)
    if target == "fhe":
        # 6-bit table inputs: keys of ~2 GB and ~14 s per encrypted digits-MLP sample; 8-bit tables
        # cost 8 GB of keys and ~55 s (docs/fhe.md)
        base = replace(base, bits=6, weight_bits=6, output_bits=8, feature_input_bits=6, acc_bits=16,
                       lut_input_bits=6, unsigned_activations=False, bias_correction=True)
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})
