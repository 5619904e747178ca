"""Errors raised by MRT. Each message names the op (and node) at fault, so that a model that MRT
cannot convert fails loudly and says where, instead of converting into something wrong."""


class MrtError(Exception):
    """Base class of every MRT error."""


class UnsupportedOp(MrtError):
    """The ONNX model uses an op, attribute value, dtype or shape that MRT does not support."""


class GraphError(MrtError):
    """A float graph breaks an IR rule: unknown op or attribute, bad arity, not topologically
    ordered, a shape that does not fit its op, or an op that would touch the batch axis."""


class BadInput(MrtError, ValueError):
    """A file or data set MRT cannot use as given: an ONNX file that does not parse, calibration
    data that is empty, not finite, or the same sample repeated (no ranges to calibrate from)."""
