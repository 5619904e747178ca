"""The versioned op tables. Never edit a shipped table: a new opset is the previous one merged with changes."""
from __future__ import annotations

from types import MappingProxyType

from . import elementwise, layout, linear, pool, rescale
from .base import Arg, OpDef, RuleError

OPSET_V1 = MappingProxyType({op.name: op for m in (linear, elementwise, rescale, pool, layout) for op in m.OPS})

OPSETS = MappingProxyType({1: OPSET_V1})
LATEST_OPSET = 1

__all__ = ["Arg", "OpDef", "RuleError", "OPSETS", "OPSET_V1", "LATEST_OPSET"]
