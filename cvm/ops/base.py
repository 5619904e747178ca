"""What an op is: its attributes, shape rule, bound rule, cost and reference semantics, in one record.

Shapes are per sample: every activation carries an implicit leading batch axis at run time, and
attribute axes count from the first per-sample axis. Constants have no batch axis.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..arith import bias_sides, row_sums

Shape = tuple[int, ...]


class RuleError(Exception):
    """An op rule is broken; the verifier adds the node name and turns it into a VerifyError."""

    def __init__(self, rule: str, message: str):
        self.rule = rule
        super().__init__(message)


class ConstStats:
    """Facts about one constant that several nodes may need, computed once: the verifier shares one
    per constant, so a weight read by many nodes costs its size once, not once per node."""

    def __init__(self, values: np.ndarray):
        self.values = values
        self._cache: dict[str, tuple] = {}

    def _get(self, key: str, compute) -> tuple:
        if key not in self._cache:
            self._cache[key] = compute(self.values)
        return self._cache[key]

    def row_sums(self) -> tuple[np.ndarray, np.ndarray, int]:
        return self._get("row_sums", row_sums)

    def bias_sides(self) -> tuple[np.ndarray, np.ndarray]:
        return self._get("bias_sides", bias_sides)


@dataclass(frozen=True)
class Arg:
    """What the verifier knows about one input of a node: shape, proven interval, and the
    constant's values (and shared facts about them) when the input is a constant."""

    shape: Shape
    lo: int
    hi: int
    const: np.ndarray | None = None
    stats: ConstStats | None = None

    def row_sums(self) -> tuple[np.ndarray, np.ndarray, int]:
        return (self.stats or ConstStats(self.const)).row_sums()

    def bias_sides(self) -> tuple[np.ndarray, np.ndarray]:
        return (self.stats or ConstStats(self.const)).bias_sides()

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass(frozen=True)
class Attr:
    kind: str  # "int" or "ints"
    default: object = None  # None means required


TABLE_MONOTONE = "monotone"  # an element function non-decreasing in the input element
TABLE_ANY = "any"  # an element function of no known shape (a lookup table)


@dataclass(frozen=True)
class OpDef:
    name: str
    min_inputs: int
    max_inputs: int  # -1 means variadic
    attrs: dict[str, Attr]
    shape: Callable[[Sequence[Arg], dict], Shape]
    bound: Callable[[Sequence[Arg], dict, Shape], tuple[int, int]]
    cost: Callable[[Sequence[Arg], dict, Shape], int]
    reference: Callable[..., np.ndarray]
    const_inputs: tuple[int, ...] = ()  # input positions that must be constants
    activation_inputs: tuple[int, ...] = ()  # input positions that must not be constants
    doc: str = field(default="", repr=False)
    # Properties that backends and tools read here instead of keeping their own lists of op names:
    accumulates: bool = False  # a multiply-accumulate; its output width is the model's accumulator width
    table: str = ""  # TABLE_*: each output element is a function of the matching input element(s)
    table_profile: Callable[[dict, list, Shape], Shape] | None = None  # (attrs, constants, input shape)
    # -> the smallest per-sample shape over which the element function takes all its forms (a
    # per-channel constant makes it vary along that axis); None: the same function everywhere
    bilinear: bool = False  # the product of its two inputs (of two activations, a square in FHE)
    compares: bool = False  # computes maxima by comparing elements (needs their differences' bits)

    def profile(self, attrs: dict, consts: list, shape: Shape) -> Shape:
        """See `table_profile`."""
        if self.table_profile is None:
            return (1,) * len(shape)
        return self.table_profile(attrs, consts, shape)

    def resolve_attrs(self, attrs: dict) -> dict:
        """Fill defaults and reject unknown or ill-typed attributes."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise RuleError("attrs.unknown", f"{self.name} has no attribute {sorted(unknown)[0]!r}")
        out = {}
        for name, spec in self.attrs.items():
            value = attrs.get(name, spec.default)
            if value is None:
                raise RuleError("attrs.missing", f"{self.name} needs attribute {name!r}")
            if spec.kind == "int" and not _is_int(value):
                raise RuleError("attrs.type", f"{self.name} attribute {name!r} must be an int")
            if spec.kind == "ints" and not (isinstance(value, (list, tuple)) and all(map(_is_int, value))):
                raise RuleError("attrs.type", f"{self.name} attribute {name!r} must be a list of ints")
            out[name] = tuple(int(v) for v in value) if spec.kind == "ints" else int(value)
        return out


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def clamp(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """min(max(x, lo), hi) elementwise (np.clip does the same with ~4 us more per call, which a node
    of a few elements, costing ~100 gas, cannot afford)."""
    return np.minimum(np.maximum(x, lo), hi)


def elements(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def require(cond: bool, rule: str, message: str) -> None:
    if not cond:
        raise RuleError(rule, message)


def require_range(values, lo: int, hi: int, rule: str, what: str) -> None:
    """Every value in lo..hi (docs/spec.md, "Attribute bounds")."""
    if not all(lo <= v <= hi for v in values):
        shown = list(values[:8]) + (["..."] if len(values) > 8 else [])
        raise RuleError(rule, f"{what} must each be in {lo}..{hi}, got {shown}")


def check_axis(axis: int, rank: int, what: str = "axis") -> int:
    require(0 <= axis < rank, "attrs.axis", f"{what} {axis} out of range for a rank-{rank} sample")
    return axis


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy broadcasting, right-aligned, on per-sample shapes."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuleError("shape.broadcast", f"shapes {' and '.join(map(str, shapes))} do not broadcast")


def interval_of(arg: Arg) -> tuple[int, int]:
    return arg.lo, arg.hi


def corners(f, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Bound of f over a box, for f monotone in each argument separately."""
    vals = [f(x, y) for x in a for y in b]
    return min(vals), max(vals)


def const_interval(values: np.ndarray) -> tuple[int, int]:
    if values.size == 0:
        return 0, 0
    return int(values.min()), int(values.max())


def with_batch(axes) -> tuple[int, ...]:
    """Per-sample axes -> axes of the batched array."""
    return tuple(a + 1 for a in axes)
