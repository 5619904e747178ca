"""Quantization rules (filled in by the work on issue 30/31). RULES: {float op: rule}."""
from __future__ import annotations

RULES: dict = {}
