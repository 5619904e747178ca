"""Activation width chosen by measurement: a small model whose 8-bit conversion loses precision that
12 bits keep is converted at 12-bit activations and 10-bit weights.

Why measured rather than fixed: 8-bit activations are what every large model needs for the int8
VNNI kernels, and on most models they lose little (mnist_cnn and the digits MLP are within 0.1
points of float accuracy). But on a MobileNetV3-style network with hard-swish and squeeze-excite blocks
the 8-bit noise of ~140 layers adds up evenly: the PP-OCR angle classifier (fixtures/models/
ppocr_cls.onnx) agreed with float on 99.1% of 1,024 rendered lines at 8 bits, 99.9% at 12 bits, and no
single tensor widened (mrt.mixed) recovers it. The cost of 12 bits is latency, which gas does not
price (gas counts MACs and elements, not their width), and it depends on where the MACs are: 1.9x on
that classifier (0.43 -> 0.80 ms, two thirds of its MACs in 1x1 convs, which the int16 VNNI GEMM runs),
5x on mnist_cnn and 10x on resnet_cifar (3x3 convs, portable int16 path). So 12 bits are tried only on
a model that stays cheap with them (at most SMALL_MODEL_MACS multiply-accumulates per sample, at least
MIN_FAST_SHARE of them in int16 VNNI kernels), whose 8-bit output error on the calibration samples is
large enough to matter (above ERROR_FLOOR), and kept only where they pay (at most 1/MIN_GAIN of that
error). Deterministic: MAC counts and errors on the calibration data, never a timing. `mrt convert
--bits 8` (or --bits N, --wide, --weight-bits) fixes the width and skips the measurement; recurrent
models and spectrogram front ends keep their own rules (mrt.recurrent_precision, mrt.spectral_precision);
`mrt convert --mixed-precision` widens single tensors under a measured latency budget instead (mrt.mixed).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mrt.quantize.config import QuantConfig

SMALL_MODEL_MACS = 32_000_000  # per sample: the PP-OCR angle classifier does 16M, resnet_cifar 68M
MIN_FAST_SHARE = 0.6  # of the MACs in ops the int16 VNNI GEMM runs: 12 bits cost the PP-OCR classifier
# (67% in 1x1 convs) 1.9x its 8-bit latency, mnist_cnn (15%: 3x3 convs) 5x, resnet_cifar (0%) 10x
MIN_GAIN = 2.0  # the wide model's output error must be at most half the 8-bit one's (6 dB)
ERROR_FLOOR = 0.02  # an 8-bit output error (relative L2 to float) at or below this is kept: a 34 dB output SQNR.
# mnist_cnn (0.0086) and the digits MLP (0.0054) are within 0.1 points of float accuracy at 8 bits, and
# mnist_cnn's 12-bit convs would take 5x the time; the PP-OCR angle classifier (0.036) lost 0.7 points
WIDE_BITS = QuantConfig.wide_bits  # activations of a wide model (12: still int16 storage)
WIDE_WEIGHT_BITS = 10  # its weights: free beside 12-bit activations (both int16 kernels), and the PP-OCR
# classifier's 256 test lines then match float's accuracy exactly (96.48%; 95.70% with 8-bit weights)
MAC_OPS = frozenset({"conv", "conv_transpose", "dense", "matmul"})  # float IR ops


@dataclass(frozen=True)
class WidthChoice:
    """What was measured: each candidate's output relative L2 to float on the calibration samples."""
    macs: Macs
    errors: dict  # {activation bits: error}; only 8 when the model is too large to try 12
    chosen: int

    def describe(self) -> str:
        """One line for the conversion's dump: what was measured and why this width."""
        m = self.macs
        if len(self.errors) == 1:
            why = (f"{m.total:,} MACs per sample > {SMALL_MODEL_MACS:,}" if m.total > SMALL_MODEL_MACS else
                   f"{100 * m.fast_share:.0f}% of its MACs in int16 VNNI kernels < {100 * MIN_FAST_SHARE:.0f}%"
                   if m.fast_share < MIN_FAST_SHARE else
                   f"output relative L2 to float on calibration {self.errors[8]:.5f} <= {ERROR_FLOOR:g}")
            return f"8-bit activations ({why}: 12 bits not tried)"
        e8, e12 = self.errors[8], self.errors[WIDE_BITS]
        return (f"{self.chosen}-bit activations: output relative L2 to float on calibration {e8:.5f} at 8 bits, "
                f"{e12:.5f} at {WIDE_BITS} ({e8 / max(e12, 1e-30):.2f}x; {MIN_GAIN:g}x needed), "
                f"{m.total:,} MACs per sample, {100 * m.fast_share:.0f}% in int16 VNNI kernels")


@dataclass(frozen=True)
class Macs:
    total: int  # multiply-accumulates per sample
    int16_fast: int  # of which in ops the int16 VNNI kernels run (numba_kernels/dense16.py)

    @property
    def fast_share(self) -> float:
        return self.int16_fast / self.total if self.total else 0.0  # no MACs (trees): nothing measured here


def macs(graph) -> Macs:
    """Multiply-accumulates per sample of a float graph's convolutions, dense layers and matmuls, and how
    many of them are in ops that the int16 VNNI GEMM runs at 12 bits (dense layers, matmuls, 1x1 stride-1
    ungrouped convs); 3x3 and depthwise convs at 12 bits take the portable int16 path."""
    def shape(name):
        return graph.full_shape(name)[1:] if name in graph.shapes else graph.full_shape(name)

    total = fast = 0
    for node in graph.nodes:
        if node.op not in MAC_OPS:
            continue
        w = shape(node.inputs[1])
        if node.op == "conv":
            n = int(np.prod(shape(node.outputs[0]))) * int(np.prod(w[1:]))
            pointwise = tuple(w[2:]) == (1, 1) and node.attrs["groups"] == 1 and set(node.attrs["strides"]) == {1}
            fast += n if pointwise else 0
        elif node.op == "conv_transpose":
            n = int(np.prod(shape(node.inputs[0]))) * int(np.prod(w[1:]))
        else:  # dense x[..., K] w[O, K]; matmul x[..., K] y[K, N]
            n = int(np.prod(shape(node.outputs[0]))) * int(shape(node.inputs[0])[-1])
            fast += n
        total += n
    return Macs(total, fast)


def applies(target: str, bits, overrides: dict) -> bool:
    """Measured only when the caller left the width to the converter: the cvm target, no --bits, and no
    per-tensor or weight widths of its own (--wide, --weight-bits, a recurrent model's wide cells)."""
    fixed = {"wide_tensors", "weight_bits", "wide_weight_bits"} & set(overrides)
    return target == "cvm" and bits is None and not fixed


def wide_config(cfg):
    return replace(cfg, bits=WIDE_BITS, weight_bits=WIDE_WEIGHT_BITS)


def choose(m: Macs, error8: float, error12_of) -> WidthChoice:
    """error12_of() -> the wide model's output error, called only for a model cheap enough to try."""
    if m.total > SMALL_MODEL_MACS or m.fast_share < MIN_FAST_SHARE or error8 <= ERROR_FLOOR:
        return WidthChoice(m, {8: error8}, 8)
    error12 = error12_of()
    wide = error12 * MIN_GAIN <= error8
    return WidthChoice(m, {8: error8, WIDE_BITS: error12}, WIDE_BITS if wide else 8)
