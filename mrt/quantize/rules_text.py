"""Quantization rules of transformer text models (docs/spec.md 15.3): integer inputs, embed -> gather,
layer_norm (integer mean and variance, isqrt, an integer division), masked_softmax (a table of the mask's
bias, max subtraction, an exponent table, an integer sum and division) and div_tensor (a division by a
batched divisor). Every step is one CVM op, so its rounding and bound are that op's own."""
from __future__ import annotations

import math

import numpy as np

from cvm.arith import bits_for, bits_max
from mrt.float_ops.unary import run_program
from mrt.quantize import rules
from mrt.quantize.rules import _const, _node_name, _operand
from mrt.quantize.state import QT, QuantizeError

EMBED_BITS = 16  # embedding tables: int16, one scale per table (the whole input of the model passes here)
LN_INPUT_BITS = 16  # LayerNorm reads its (residual) input at up to 16 bits
LN_FRAC_BITS = 14  # the normalised value (x - mean) / std in units of 2^-14
LN_GAMMA_BITS = 12  # gamma as integers of 12 bits (one scale): |z| * |gamma| < 2^(18.4 + 11) < 2^31
SOFTMAX_BITS = 12  # scores enter the masked softmax at 12 bits
SOFTMAX_EXP_BITS = 15  # exp(v) tabulated at 2^-15
SOFTMAX_PROB_BITS = 12  # probabilities as 0..2^12 - 1 (the P x V matmul: L * 4095 * 127 < 2^31 up to L = 4096)


def integer_input(qz, spec, thresholds) -> int:
    """The declared bits of an integer graph input (token ids, masks): bits_for(0, V-1) when it indexes a
    V-row embedding, else the calibration data's range (its absmax threshold, rounded up)."""
    rows = [qz.fgraph.initializers[n.inputs[1]].shape[0] for n in qz.fgraph.consumers(spec.name) if n.op == "embed"]
    reach = math.ceil(float(thresholds.get(spec.name, 1.0)))
    if rows:
        if reach > max(rows) - 1:
            raise QuantizeError(f"input {spec.name!r}: calibration values up to {reach} exceed the embedding's "
                                f"{max(rows)} rows")
        return bits_for(0, max(rows) - 1)
    return max(2, bits_for(-reach, reach))


def _per_tensor(qz, fname: str, bits: int) -> QT:
    """The tensor at one scale, within `bits` (requantized to its calibrated range when wider)."""
    t = qz.q[fname]
    lo, hi = qz.interval(t.name)
    if t.per_channel or max(-lo, hi) > bits_max(bits):
        t = qz.requant(t, qz.scale_of(fname, bits), bits, name=f"{t.name}.q{bits}")
    return t


def embed(qz, node):
    ids = qz.q[node.inputs[0]]
    table = _const(qz, node.inputs[1])
    name = _node_name(node)
    if ids.per_channel or float(np.asarray(ids.scale).reshape(())) != 1.0:
        # a computed index (RoBERTa's position ids): rounded to the integer it stands for, exact while the float
        # error of its computation stays below one half
        ids = qz.requant(ids, 1.0, bits_for(-len(table), len(table)), name=f"{name}.rounded")
    idx = qz.op("clip", ids.name, lo=0, hi=len(table) - 1, name=f"{name}.index")
    scale = float(np.abs(table).max()) / bits_max(EMBED_BITS) or 1.0
    qt = qz.const(np.round(table / scale).astype(np.int64), dtype="int16")
    return QT(name=qz.op("gather", idx, qt, name=name), scale=np.asarray(scale))


def _square_bits(n: int) -> int:
    """Bits of d' such that n * max(d')^2 fits int32."""
    return min(12, int((31 - math.log2(n)) // 2) + 1)


def layer_norm(qz, node):
    """(x - mean) / std in integers over the last axis (spec 15.3), then gamma and beta."""
    t = _per_tensor(qz, node.inputs[0], LN_INPUT_BITS)
    shape = qz.shape_of(t.name)
    n, last, name = shape[-1], len(shape) - 1, _node_name(node)
    s = qz.op("sum", t.name, axes=[last], keepdims=1, name=f"{name}.sum")
    d = qz.op("sub", qz.op("mul", t.name, qz.const([n]), name=f"{name}.nx"), s, name=f"{name}.dev")  # n (x - mean)
    dlo, dhi = qz.interval(d)
    b = _square_bits(n)
    k = max(0, max(-dlo, dhi).bit_length() - (b - 1))
    d1 = qz.op("requant", d, qz.const([1]), shift=k, bits=b, name=f"{name}.dev_r")
    m = bits_max(b)
    sq = qz.op("lut", d1, qz.const(np.arange(-m, m + 1, dtype=np.int64) ** 2), offset=-m, name=f"{name}.sq")
    v = qz.op("sum", sq, axes=[last], keepdims=1, name=f"{name}.var")  # n^3 var / (s^2 2^2k)
    eps = node.attrs["epsilon"] * n ** 3 / (float(t.scale) ** 2 * 4.0 ** k)
    r = qz.op("isqrt", qz.op("add", v, qz.const([max(1, round(min(eps, 2 ** 30)))]), name=f"{name}.var_eps"),
              name=f"{name}.std")
    mult, shift = _ratio(math.sqrt(n) * 2.0 ** (LN_FRAC_BITS - k))
    num = qz.op("requant", d, qz.const([mult], dtype="int32"), shift=shift, bits=32, name=f"{name}.num")
    z = qz.op("div", num, r, name=f"{name}.z")
    zmax = (math.isqrt(n) + 2) << LN_FRAC_BITS
    z = qz.op("clip", z, lo=-zmax, hi=zmax, name=f"{name}.zc")
    scale = 2.0 ** -LN_FRAC_BITS
    if len(node.inputs) > 1:
        gamma = _const(qz, node.inputs[1]).astype(np.float64).reshape(-1)
        sg = float(np.abs(gamma).max()) / bits_max(LN_GAMMA_BITS) or 1.0
        z = qz.op("mul", z, qz.const(np.round(gamma / sg).astype(np.int64)), name=f"{name}.gamma")
        scale *= sg
    if len(node.inputs) > 2:
        beta = _const(qz, node.inputs[2]).astype(np.float64).reshape(-1)
        z = qz.op("add", z, qz.const(np.round(beta / scale).astype(np.int64), dtype="int32"), name=name)
    return QT(name=z, scale=np.asarray(scale))


def _ratio(r: float) -> tuple[int, int]:
    """m, s with m / 2^s ~ r, m < 2^24 (a requant multiplier; d * m stays far inside int64)."""
    s = max(0, 23 - math.frexp(r)[1])
    return max(1, round(r * 2 ** s)), s


def _penalty(qz, node, s, floor, k=1):
    """The bias of input k at the scores' scale s, clipped to +-floor: a table over the mask's integer values, or,
    for a constant mask (the empty program, or a third input), the constant itself rounded."""
    name = _node_name(node)
    constant = _const(qz, node.inputs[k])
    if constant is not None:
        pen = np.clip(np.round(_operand(qz, constant, node.inputs[0]).astype(np.float64) / s), -floor, floor)
        return qz.const(pen.astype(np.int64))
    mask = qz.q[node.inputs[1]]
    if mask.per_channel:
        mask = qz.narrow(node.inputs[1])
    mlo, mhi = qz.interval(mask.name)
    if mhi - mlo >= 1 << 16:
        raise QuantizeError(f"node {node.name!r}: the mask's values span {mhi - mlo + 1} integers, more than a "
                            "table holds")
    with np.errstate(all="ignore"):
        bias = run_program((np.arange(mlo, mhi + 1) * float(mask.scale)).astype(np.float32), node.attrs["program"])
        pen = np.clip(np.round(np.nan_to_num(bias.astype(np.float64), nan=0.0, neginf=-np.inf) / s), -floor, floor)
    return qz.op("lut", mask.name, qz.const(pen.astype(np.int64)), offset=mlo, name=f"{name}.bias")


def masked_softmax(qz, node):
    """softmax(x + bias(mask)) over the last axis (spec 15.3): bias as a table over the mask's integer
    values at the scores' scale, clipped at -(R + D + 1) (masked: exactly 0 after the exponent table)."""
    x = _per_tensor(qz, node.inputs[0], SOFTMAX_BITS)
    lo, hi = qz.interval(x.name)
    s, name, last = float(x.scale), _node_name(node), len(qz.shape_of(x.name)) - 1
    spread = hi - lo
    reach = min(spread + 1, math.ceil((SOFTMAX_EXP_BITS + 1) * math.log(2) / s))
    floor = spread + reach + 1
    biased = qz.op("add", x.name, _penalty(qz, node, s, floor), name=f"{name}.biased")
    if len(node.inputs) == 3:  # a constant mask besides the computed one: both penalties clipped, so no overflow
        biased = qz.op("add", biased, _penalty(qz, node, s, floor, 2), name=f"{name}.biased2")
    top = qz.op("max", biased, axes=[last], keepdims=1, name=f"{name}.max")
    d = qz.op("clip", qz.op("sub", biased, top, name=f"{name}.shifted"), lo=-reach, hi=0, name=f"{name}.clipped")
    table = np.round(np.exp(np.arange(-reach, 1) * s) * 2 ** SOFTMAX_EXP_BITS).astype(np.int64)
    if reach == spread + 1:
        table[0] = 0  # only masked positions reach -(R + 1)
    e = qz.op("lut", d, qz.const(table), offset=-reach, name=f"{name}.exp")
    total = qz.op("sum", e, axes=[last], keepdims=1, name=f"{name}.sum")
    total = qz.op("clip", total, lo=1, hi=max(1, qz.interval(total)[1]), name=f"{name}.total")
    top_p = (1 << SOFTMAX_PROB_BITS) - 1
    num = qz.op("mul", e, qz.const([top_p], dtype="int16"), name=f"{name}.scaled")
    p = qz.op("div", num, total, name=f"{name}.div")
    # e <= sum(e), so p <= top_p: the clip changes nothing and gives the verifier that fact (the div's bound
    # alone is num / 1), so the P x V matmul's accumulator is proven from 12-bit probabilities
    return QT(name=qz.op("clip", p, lo=0, hi=top_p, name=name), scale=np.asarray(1.0 / top_p), narrow=True)


def div_tensor(qz, node):
    """a / b, b batched: b at one scale, clipped to >= 1 (one step of its scale: the float model's epsilon
    clamp is below it), a widened by 2^p to keep precision, one rounding division."""
    a, b = qz.q[node.inputs[0]], qz.q[node.inputs[1]]
    if a.per_channel or _widening(qz, a.name) < qz.act_bits(node.inputs[0]):
        # a raw intermediate whose proven range leaves the quotient fewer bits than an activation (a
        # wide division's output, bounded by numerator / 1, feeding the next division): requantized
        # first. Every MiniLM tensor widened gave cosine 0.776 without this: the L2 normalisation's
        # numerator was proven within 2^30, so p = 0 and the embedding came out in {-1, 0, 1, 2}.
        a = qz.narrow(node.inputs[0])
    if b.per_channel:
        b = qz.narrow(node.inputs[1])
    name = _node_name(node)
    blo, bhi = qz.interval(b.name)
    den = b.name if blo >= 1 else qz.op("clip", b.name, lo=1, hi=max(1, bhi), name=f"{name}.den")
    p = _widening(qz, a.name)
    num = a.name if p == 0 else qz.op("mul", a.name, qz.const([1 << p], dtype="int32"), name=f"{name}.num")
    out = qz.op("div", num, den, name=name)
    return QT(name=out, scale=np.asarray(float(a.scale) / float(b.scale) / 2 ** p))


def _widening(qz, name: str) -> int:
    """The bits div_tensor can widen a numerator by and stay within int32."""
    lo, hi = qz.interval(name)
    return max(0, 30 - max(-lo, hi, 1).bit_length())


RULES: dict = {"embed": embed, "layer_norm": layer_norm, "masked_softmax": masked_softmax, "div_tensor": div_tensor}
__all__ = ["RULES", "integer_input", "rules"]
