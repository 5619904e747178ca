"""Threshold codes: how a client turns float features into the integers of a tree-ensemble model.

A tree compares a feature with its split thresholds and nothing else, so a feature's value matters only
through its position among them. For feature j with the model's sorted thresholds t_0 < ... < t_{n-1}
(metadata `input_thresholds`, one list per feature), the client sends

    code_j = 2 * |{i : t_i < x_j}| + [x_j is one of the t_i]          (x_j rounded to float32 first)

so x_j <= t_i is exactly code_j <= 2i + 1 and x_j < t_i is exactly code_j <= 2i: every split of the
float model becomes one integer comparison with the same outcome (float32, because that is what the
ONNX tree operators compare in). The thresholds are written as the float64 values of float32 numbers;
the encoding is a sorted search, identical on every machine. docs/spec.md, "Metadata".
"""
from __future__ import annotations

import math

import numpy as np

from .arith import bits_max
from .errors import FormatError, InputError

MAX_THRESHOLDS = 1 << 14  # per feature: codes up to 2^15, an int16 input


def check(v, path: str) -> None:
    """meta.input_thresholds.<input>: a list (one per feature) of strictly increasing finite float32 values."""
    if not isinstance(v, list) or not v:
        raise FormatError(f"{path}: must be a non-empty list (one threshold list per feature)")
    for j, ts in enumerate(v):
        if not isinstance(ts, list) or len(ts) > MAX_THRESHOLDS:
            raise FormatError(f"{path}[{j}]: must be a list of at most {MAX_THRESHOLDS} numbers")
        for i, t in enumerate(ts):
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                    or float(np.float32(t)) != t:
                raise FormatError(f"{path}[{j}][{i}]: must be a finite float32 value, got {t!r}"[:200])
            if i and not ts[i - 1] < t:
                raise FormatError(f"{path}[{j}][{i}]: thresholds must be strictly increasing")


def bits_for(thresholds: list[list[float]]) -> int:
    """The fewest bits (>= 2) whose symmetric range holds every code 0 .. 2 * len(thresholds of a feature)."""
    top = 2 * max((len(ts) for ts in thresholds), default=0)
    bits = 2
    while bits_max(bits) < top:
        bits += 1
    return bits


def encode(x, thresholds: list[list[float]], dtype, name: str) -> np.ndarray:
    """The codes of float samples [..., features] (NaN and infinities refused, as everywhere else)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise InputError(f"input {name!r} must hold numbers, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != len(thresholds):
        raise InputError(f"input {name!r} has {len(thresholds)} features; its last axis must have that many "
                         f"elements, got shape {x.shape}")
    x = x.astype(np.float32).astype(np.float64)
    if x.size and not np.isfinite(x).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise InputError(f"input {name!r} holds {x[bad]} at index {bad}: NaN and infinity have no code")
    codes = np.empty(x.shape, np.int64)
    for j, ts in enumerate(thresholds):
        t = np.asarray(ts, np.float64)
        below = np.searchsorted(t, x[..., j], side="left")
        equal = np.searchsorted(t, x[..., j], side="right") - below
        codes[..., j] = 2 * below + equal
    return codes.astype(dtype)


def check_inputs(entries: dict, inputs: dict[str, tuple]) -> None:
    """Each coded input exists and has one threshold list per element of its last axis."""
    for name, thresholds in entries.items():
        if name not in inputs:
            raise FormatError(f"meta.input_thresholds.{name}: names no input of the graph (inputs: {sorted(inputs)})"[:300])
        shape = inputs[name]
        if not shape or len(thresholds) != shape[-1]:
            raise FormatError(f"meta.input_thresholds.{name}: has {len(thresholds)} threshold lists; expected one per "
                              f"feature ({shape[-1] if shape else 'a scalar input has none'})")
