"""Multiply-accumulate splits: when the proven bound of a dot product exceeds the accumulator
budget, split the summed dimension into chunks whose bounds fit, then add the chunks (rounding
each by a common right shift first when their sum could still exceed the budget)."""
from __future__ import annotations

import numpy as np

from cvm.arith import bits_max, mac_bound, round_shift
from cvm.ops.vision import output_rows
from mrt.quantize.state import QuantizeError, Quantizer


def _reach(w_cols: np.ndarray, bias: np.ndarray | None, lo: int, hi: int) -> int:
    """The largest magnitude the verifier proves for sum_k w[o,k]*x_k + b[o], x_k in [lo, hi]: its own
    bound (cvm.arith.mac_bound), so a chunk planned to fit the budget is one the verifier accepts."""
    blo, bhi = mac_bound(w_cols, (lo, hi), bias)
    return max(-blo, bhi)


def plan_chunks(w2d: np.ndarray, group: int, bias, lo: int, hi: int, limit: int) -> list[tuple[int, int]]:
    """Contiguous chunks of the summed axis (in units of `group` columns) whose bounds fit `limit`."""
    n = w2d.shape[1] // group
    chunks, start = [], 0
    while start < n:
        end = start + 1
        b = bias if not chunks else None
        if _reach(w2d[:, start * group:end * group], b, lo, hi) > limit:
            raise QuantizeError("a single input column already exceeds the accumulator budget")
        while end < n and _reach(w2d[:, start * group:(end + 1) * group], b, lo, hi) <= limit:
            end += 1
        chunks.append((start, end))
        start = end
    return chunks


def emit_mac(qz: Quantizer, op: str, x: str, qw: np.ndarray, qb: np.ndarray | None, name: str,
             share: str | None = None, weight_bits: int | None = None, **attrs) -> tuple[str, float]:
    """Emit conv2d / dense / conv_transpose2d of x with integer weights, split to the accumulator budget
    (along the summed input channels; a grouped conv or conv_transpose2d is never split).
    Returns the output tensor and the factor (a power of two) its scale gained. share: the float weight's name,
    under which identical integer weights and biases are stored once (Quantizer.const). weight_bits: the bits qw
    was quantized to (default QuantConfig.weight_bits), which decide its storage (int8 up to 8 bits)."""
    limit = bits_max(qz.cfg.acc_bits)
    lo, hi = qz.interval(x)
    transposed = op == "conv_transpose2d"  # weight [C, O/g, KH, KW]: its input channels are axis 0
    if op == "dense":
        w2d, group, axis = qw, 1, len(qz.shape_of(x)) - 1
    else:
        rows = output_rows(qw, attrs.get("groups", 1)) if transposed else qw.reshape(len(qw), -1)
        if attrs.get("groups", 1) != 1 and _reach(rows, qb, lo, hi) > limit:
            raise QuantizeError(f"node {name!r}: grouped {op} exceeds the {qz.cfg.acc_bits}-bit accumulator budget")
        w2d, group, axis = rows, qw.shape[2] * qw.shape[3], 0
    wdt = "int8" if (weight_bits or qz.cfg.weight_bits) <= 8 else "int16"

    def mac(inp, w, b, suffix):
        keys = (None, None) if share is None else (f"{share}#weight", f"{share}#bias")
        args = [inp, qz.const(w, dtype=wdt, share=keys[0])] + \
            ([qz.const(b, dtype="int32", share=keys[1])] if b is not None else [])
        return qz.op(op, *args, name=name + suffix, **attrs)

    if _reach(w2d, qb, lo, hi) <= limit:
        return mac(x, qw, qb, ""), 1.0

    chunks = plan_chunks(w2d, group, qb, lo, hi, limit)
    shape = qz.shape_of(x)
    parts, bounds = [], []
    for i, (s, e) in enumerate(chunks):
        starts, ends = [0] * len(shape), list(shape)
        starts[axis], ends[axis] = s, e
        xs = qz.op("slice", x, starts=starts, ends=ends, steps=[1] * len(shape), name=f"{name}.x{i}")
        w = qw[s:e] if transposed else qw[:, s:e]
        b = qb if i == 0 else None
        parts.append(mac(xs, w, b, f".part{i}"))
        bounds.append(_reach(w2d[:, s * group:e * group], b, lo, hi))
    shift = 0
    while sum(abs(round_shift(p, shift)) + (1 if shift else 0) for p in bounds) > limit:
        shift += 1
    if shift:
        one = qz.const([1], dtype="int32")
        parts = [qz.op("requant", p, one, shift=shift, bits=qz.cfg.acc_bits, name=f"{p}.shift")
                 for p in parts]
    out = parts[0]
    for i, p in enumerate(parts[1:], 1):
        out = qz.op("add", out, p, name=f"{name}.sum{i}" if i < len(parts) - 1 else name)
    return out, float(2 ** shift)
