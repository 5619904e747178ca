"""Quantization rules for the float ops of mrt.float_ops.vision (CVM opset-2 ops)."""

RULES: dict = {}
