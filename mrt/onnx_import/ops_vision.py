"""Importers for the ONNX ops of vision models that map to CVM opset-2 ops (resize, transposed conv)."""

# (op_type) -> (handler, since_versions of the op schema the handler implements); default domain
HANDLERS: dict = {}
