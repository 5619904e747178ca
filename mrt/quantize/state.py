"""The quantizer's working state: the cvm graph being built and, for every float tensor, the
integer tensor that represents it and its scale (float value = integer * scale)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

import cvm
from cvm.ops import LATEST_OPSET
from cvm.arith import INT32_MAX, INT64_MAX, bits_max
from cvm.limits import MAX_SHIFT
from mrt.quantize import prerounding
from mrt.quantize.bounds import Bounds
from mrt.errors import MrtError
from mrt.quantize.config import QuantConfig



class QuantizeError(MrtError):
    """The float graph cannot be quantized as asked; the message names the node."""


@dataclass(frozen=True, kw_only=True)
class QT:
    """An integer tensor standing for a float one: value = q * scale (scale per tensor, or per
    channel along per-sample `axis`). `narrow` means: per tensor, within the activation range (the
    activation bits, or 0..2^bits - 1 for an unsigned activation). `exact` means the integers are the float
    values themselves (an index, an integer input): scale 1, and a graph output keeps them so."""

    name: str
    scale: np.ndarray  # shape () or (C,)
    axis: int | None = None
    narrow: bool = False
    exact: bool = False

    @property
    def per_channel(self) -> bool:
        return self.scale.ndim == 1 and self.scale.size > 1


def safe_name(name: str) -> str:
    """A cvm tensor name (charset [A-Za-z0-9_.:/-], at most 100 characters) for a float one."""
    out = re.sub(r"[^A-Za-z0-9_.:/\-]", "_", name)[-100:]
    return out or "t"


def choose_multiplier(ratio: np.ndarray, in_absmax: int) -> tuple[np.ndarray, int]:
    """Integer multipliers m and one shift s with m / 2^s ~ ratio, as precise as int32 multipliers
    and int64 products allow (the largest s such that every m fits int32)."""
    ratio = np.atleast_1d(np.asarray(ratio, np.float64))
    top = float(ratio.max())
    if not top > 0:
        return np.ones_like(ratio, dtype=np.int64), 0
    shift = min(MAX_SHIFT, math.floor(math.log2(INT32_MAX / top)))
    while shift > 0 and (int(np.round(top * 2.0 ** shift)) > INT32_MAX
                         or in_absmax * INT32_MAX + (1 << (shift - 1)) > INT64_MAX):
        shift -= 1
    if shift < 0:
        raise QuantizeError(f"rescale ratio {top:.3g} is too large for a multiply + shift")
    m = np.round(ratio * 2.0 ** shift).astype(np.int64)
    return np.maximum(m, 0), shift


class Quantizer:
    """The state of one quantization: the float graph and its thresholds, the integer graph being
    emitted (`b`, through input/const/op), what the verifier proves about it (`bounds`, told about
    each emitted item), and the integer tensor standing for each float one (`q`)."""

    def __init__(self, graph, thresholds: dict[str, float], config: QuantConfig,
                 means: dict[str, np.ndarray] | None = None):
        self.fgraph = graph
        self.thr = thresholds
        self.means = means or {}
        self.cfg = config
        self.b = cvm.GraphBuilder()
        self.bounds = Bounds(LATEST_OPSET)  # the graph is written in the lowest opset that holds its ops
        self.q: dict[str, QT] = {}
        self.graph_inputs = {s.name for s in graph.inputs}
        self._names: set[str] = set()
        self._shared: dict[tuple, str] = {}  # const(share=...): (key, dtype, shape, values) -> the emitted constant

    # ---------------------------------------------------------------- emission

    def input(self, name: str, shape, bits: int) -> str:
        self.b.input(name, shape, bits)
        self.bounds.admit_input(self.b.inputs[-1])
        return name

    def const(self, values, dtype=None, share: str | None = None) -> str:
        """An integer constant. `share`: a key naming where the values come from (the float weight of a MAC);
        identical values under one key are emitted once, so the unrolled steps of a recurrent layer, which read one
        float weight and quantize it alike, store it once. Without a key (and with a float weight read by one node)
        every call emits its own constant, so such graphs keep their bytes and hashes."""
        if share is not None:
            a = np.asarray(values, np.int64)
            key = (share, str(dtype), a.shape, a.tobytes())
            if key in self._shared:
                return self._shared[key]
        name = self.b.const(values, dtype=dtype)
        self.bounds.admit_constant(name, self.b.constants[name])
        if share is not None:
            self._shared[key] = name
        return name

    def op(self, op: str, *inputs: str, name: str, **attrs) -> str:
        """Emit a cvm node under a valid, unique name derived from `name`; it is verified here."""
        out = self.b.op(op, *inputs, name=self.fresh(name), **attrs)
        self.bounds.admit_node(self.b.nodes[-1])
        return out

    def fresh(self, hint: str) -> str:
        base = safe_name(hint)
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    # ---------------------------------------------------------------- scales and bounds

    def act_bits(self, fname: str) -> int:
        """The activation bits of a float tensor: wide_bits for the config's wide tensors (mixed
        precision), the config's bits otherwise."""
        return self.cfg.wide_bits if fname in self.cfg.wide_tensors else self.cfg.bits

    def scale_of(self, fname: str, bits: int | None = None) -> float:
        t = float(self.thr.get(fname, 0.0))
        return (t if t > 0 else 1.0) / bits_max(bits or self.act_bits(fname))

    def interval(self, name: str) -> tuple[int, int]:
        return self.bounds.interval(name)

    def shape_of(self, name: str) -> tuple[int, ...]:
        return self.bounds.shape(name)

    # ---------------------------------------------------------------- rescaling

    def requant(self, t: QT, scale_out: float, bits: int, name: str) -> QT:
        """Rescale t to a per-tensor scale, clipped to `bits`, after the target's pre-rounding hook
        (QuantConfig.pre_rounding: the fhe target first fits the input to its lookup budget)."""
        x, scale_in = prerounding.HOOKS[self.cfg.pre_rounding](self, t.name, t.scale, name,
                                                                  scale_out=scale_out, bits=bits, axis=t.axis)
        lo, hi = self.interval(x)
        m, s = choose_multiplier(np.asarray(scale_in, np.float64) / scale_out, max(abs(lo), abs(hi)))
        attrs = {"shift": s, "bits": bits}
        if m.size > 1:
            attrs["axis"] = t.axis
        out = self.op("requant", x, self.const(m, dtype="int32"), name=name, **attrs)
        return QT(name=out, scale=np.asarray(scale_out, np.float64), narrow=bits == self.cfg.bits)

    def narrow(self, fname: str, target: str | None = None) -> QT:
        """The float tensor as a per-tensor integer at the activation bits. A wide tensor is
        rescaled to the calibrated scale of `target` (default: of the tensor itself)."""
        t = self.q[fname]
        if t.narrow:
            return t
        bits = self.act_bits(target or fname)
        if self.cfg.unsigned_activations and self.interval(t.name)[0] >= 0:
            bits += 1  # proven non-negative (a sum pool of ReLU outputs): 0..2^bits - 1, as _non_negative does
        return replace(self.requant(t, self.scale_of(target or fname, bits), bits, name=f"{t.name}.q"), narrow=True)

    def rescale_to(self, fname: str, scale: float, name: str, bits: int | None = None) -> QT:
        """The float tensor at exactly this per-tensor scale and `bits` (default: the activation bits); a
        concat into a wide tensor passes its wide bits, or its parts would clip at 1/16 of the range."""
        t = self.q[fname]
        if t.narrow and float(t.scale) == scale:
            return t
        return self.requant(t, scale, bits or self.cfg.bits, name=name)

    def weight_bits_of(self, fname: str) -> int:
        """The weight bits of a MAC reading float tensor `fname`: QuantConfig.wide_weight_bits when it reads a
        wide tensor and that is set (a recurrent cell's dense layers), weight_bits otherwise."""
        wide = self.cfg.wide_weight_bits
        return wide if wide is not None and fname in self.cfg.wide_tensors else self.cfg.weight_bits

    def weights(self, w: np.ndarray, axis: int = 0, min_scale=None, bits: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Symmetric per-output-channel integer weights and their scales (`bits`: default weight_bits)."""
        wmax = bits_max(bits or self.cfg.weight_bits)
        red = tuple(i for i in range(w.ndim) if i != axis)
        absmax = np.abs(w).max(axis=red).astype(np.float64) if w.ndim > 1 else np.abs(w).astype(np.float64)
        scale = np.where(absmax > 0, absmax / wmax, 1.0)
        if min_scale is not None:
            scale = np.maximum(scale, min_scale)
        shape = [1] * w.ndim
        shape[axis] = -1
        qw = np.clip(np.round(w / scale.reshape(shape)), -wmax, wmax).astype(np.int64)
        return qw, scale
