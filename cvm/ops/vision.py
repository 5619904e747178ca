"""Opset 2: ops of production vision models that no integer rule over opset-1 ops computes
(docs/spec.md, opset 2)."""
from __future__ import annotations

from .base import OpDef

OPS: list[OpDef] = []
