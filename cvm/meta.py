"""The metadata map of a .cvm file: its schema, checked on every load and every Model construction.

Metadata is not hashed (only the graph is), but tools act on it: `quantize_input` divides by the
input scales, the registry commits the calibration hash, `mrt evaluate` follows the tensor map. A
file from an untrusted party therefore gets its metadata checked as strictly as its graph: every
key known, every value of its type, scales positive and finite, names that exist in the graph. A
violation is a FormatError naming the field ("meta.input_scales.x: ..."). docs/spec.md,
"Metadata", is the normative form of SCHEMA below.
"""
from __future__ import annotations

import math
import re
from typing import Callable

from . import threshold_codes
from .errors import FormatError
from .ir import Graph

Check = Callable[[object, str], None]  # (value, field path) -> None, or raises FormatError

HASH_HEX = re.compile(r"0x[0-9a-f]{64}")
MAX_TEXT = 4096  # characters of any metadata string


def _fail(path: str, message: str):
    raise FormatError(f"{path}: {message}")


def _type_name(v) -> str:
    return "a map" if isinstance(v, dict) else "a list" if isinstance(v, list) else type(v).__name__


def text(v, path: str) -> None:
    if not isinstance(v, str):
        _fail(path, f"must be a string, got {_type_name(v)}")
    if len(v) > MAX_TEXT:
        _fail(path, f"is {len(v)} characters long > limit {MAX_TEXT}")


def hash_hex(v, path: str) -> None:
    if not (isinstance(v, str) and HASH_HEX.fullmatch(v)):
        _fail(path, "must be '0x' and 64 lowercase hex digits")


def count(v, path: str) -> None:
    if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        _fail(path, f"must be a non-negative integer, got {v!r}"[:200])


def flag(v, path: str) -> None:
    if not isinstance(v, bool):
        _fail(path, f"must be true or false, got {_type_name(v)}")


def optional_int(v, path: str) -> None:
    if v is not None and not (isinstance(v, int) and not isinstance(v, bool)):
        _fail(path, f"must be an integer or nil, got {_type_name(v)}")


def scale(v, path: str) -> None:
    """A positive finite float (integers are accepted: 1 is a scale)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
        _fail(path, f"must be a positive finite number, got {v!r}"[:200])


def scales(v, path: str) -> None:
    """One scale per tensor, or a non-empty list (one per feature / channel)."""
    if isinstance(v, list):
        if not v:
            _fail(path, "must not be an empty list")
        for i, s in enumerate(v):
            scale(s, f"{path}[{i}]")
    else:
        scale(v, path)


def list_of(item: Check) -> Check:
    def check(v, path: str) -> None:
        if not isinstance(v, list):
            _fail(path, f"must be a list, got {_type_name(v)}")
        for i, x in enumerate(v):
            item(x, f"{path}[{i}]")
    return check


def one_of(*checks: Check) -> Check:
    def check(v, path: str) -> None:
        errors = []
        for c in checks:
            try:
                return c(v, path)
            except FormatError as e:
                errors.append(str(e))
        raise FormatError(" or ".join(errors))
    return check


def record(fields: dict[str, Check]) -> Check:
    """A map with string keys from `fields` (each optional), each value checked by its field."""
    def check(v, path: str) -> None:
        if not isinstance(v, dict):
            _fail(path, f"must be a map, got {_type_name(v)}")
        for k, x in v.items():
            if k not in fields:
                _fail(path, f"unknown key {k!r} (allowed: {', '.join(sorted(fields))})"[:300])
            fields[k](x, f"{path}.{k}")
    return check


def map_of(value: Check) -> Check:
    """A map from string names to values checked by `value`."""
    def check(v, path: str) -> None:
        if not isinstance(v, dict):
            _fail(path, f"must be a map, got {_type_name(v)}")
        for k, x in v.items():
            text(k, f"{path} key")
            value(x, f"{path}.{k}")
    return check


def tensor_map_entry(v, path: str) -> None:
    """[integer tensor name, scales, channel axis or nil]: where a float tensor went."""
    if not (isinstance(v, list) and len(v) == 3):
        _fail(path, "must be [name, scales, axis]")
    text(v[0], f"{path}[0]")
    scales(v[1], f"{path}[1]")
    optional_int(v[2], f"{path}[2]")


QUANTIZATION = record({  # MRT's QuantConfig (tests/mrt check that every field of it is listed here)
    "target": text, "softmax": text, "bits": count, "weight_bits": count, "output_bits": count,
    "feature_input_bits": count, "acc_bits": count, "lut_input_bits": optional_int, "add_extra_bits": count,
    "unsigned_activations": flag, "bias_correction": flag, "wide_tensors": list_of(text),
    "lookup_range": text,  # fhe: the rounding before a lookup sized from the "calibrated" or "proven" range
    "wide_weight_bits": optional_int,  # written only when set (a recurrent model's cells: mrt.recurrent_precision)
})

SCHEMA = record({
    "input_scales": map_of(scales),
    "input_thresholds": map_of(threshold_codes.check),
    "output_scales": map_of(scales),
    "labels": list_of(text),
    "output_transform": one_of(text, list_of(text)),
    "calibration_hash": hash_hex,
    "calibration": record({"method": text, "samples": count}),
    "provenance": record({"tool": text, "source": text, "onnx_keccak256": hash_hex, "target": text}),
    "tensor_map": map_of(tensor_map_entry),
    "quantization": QUANTIZATION,
})


def _per_feature_length(graph_shape: tuple, path: str, value) -> None:
    if isinstance(value, list) and len(value) != 1 and (not graph_shape or len(value) != graph_shape[-1]):
        _fail(path, f"has {len(value)} scales; expected 1 or one per feature "
                    f"({graph_shape[-1] if graph_shape else 'a scalar tensor has none'})")


def validate(meta, graph: Graph, output_shapes: dict[str, tuple]) -> None:
    """Raise FormatError naming the first field of `meta` that breaks the schema or names a tensor
    the graph does not have (input/output scales: of a graph input / output, one scale or one per
    feature of the last axis)."""
    SCHEMA(meta, "meta")
    inputs = {i.name: i.shape for i in graph.inputs}
    threshold_codes.check_inputs(meta.get("input_thresholds", {}), inputs)
    for name, value in meta.get("input_scales", {}).items():
        if name not in inputs:
            _fail(f"meta.input_scales.{name}", f"names no input of the graph (inputs: {sorted(inputs)})"[:300])
        _per_feature_length(inputs[name], f"meta.input_scales.{name}", value)
    for name, value in meta.get("output_scales", {}).items():
        if name not in output_shapes:
            _fail(f"meta.output_scales.{name}", f"names no output of the graph (outputs: {sorted(output_shapes)})"[:300])
        _per_feature_length(output_shapes[name], f"meta.output_scales.{name}", value)
