"""Importers for ONNX ops (filled in by the work on issue 30/31). HANDLERS: {op_type: (handler, since versions)}."""
from __future__ import annotations

HANDLERS: dict = {}
