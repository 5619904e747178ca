"""ONNX -> MRT float graph import (see importer.py for what is supported and how)."""
from mrt.onnx_import.importer import import_onnx

__all__ = ["import_onnx"]
