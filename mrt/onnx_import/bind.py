"""Bind graph inputs to constants before import: settings that a model takes as inputs but that are fixed for
the deployed model become initializers, so that what depends on them folds.

Silero VAD takes its sample rate as an int64 input `sr` and branches on `sr == 16000` with an `If`; an integer
graph cannot branch on a value, but a model deployed at 16 kHz never sees another rate. Binding `sr` to 16000
turns the condition into a constant, and control.inline_if keeps the 16 kHz branch only.

    model = bind_inputs(onnx.load(path), {"sr": 16000})
    m = mrt.pipeline.convert(model, calibration)
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from mrt.errors import UnsupportedOp

# ONNX element type -> numpy dtype of a bound value
_DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.INT64: np.int64,
           onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_}


def _value(vi, value) -> np.ndarray:
    """`value` as an array of the input's declared type and (where concrete) shape."""
    t = vi.type.tensor_type
    if t.elem_type not in _DTYPES:
        raise UnsupportedOp(f"graph input {vi.name!r}: binding element type {t.elem_type} is not supported")
    a = np.asarray(value, dtype=_DTYPES[t.elem_type])
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if len(dims) != a.ndim or any(d is not None and d != s for d, s in zip(dims, a.shape)):
            raise UnsupportedOp(f"graph input {vi.name!r}: bound value of shape {list(a.shape)} does not fit the "
                                f"declared shape {['?' if d is None else d for d in dims]}")
    return a


def bind_inputs(model: onnx.ModelProto, values: dict) -> onnx.ModelProto:
    """A copy of `model` with each named graph input replaced by an initializer holding its value."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inputs = {vi.name: vi for vi in out.graph.input}
    unknown = sorted(set(values) - set(inputs))
    if unknown:
        raise UnsupportedOp(f"cannot bind {unknown}: not graph inputs ({sorted(inputs)})")
    if len(values) == len(inputs):
        raise UnsupportedOp("cannot bind every graph input: the model would have no input left")
    kept = [vi for vi in out.graph.input if vi.name not in values]
    bound = [numpy_helper.from_array(_value(inputs[name], v), name) for name, v in values.items()]
    initializers = [i for i in out.graph.initializer if i.name not in values]  # an input's default is replaced
    del out.graph.input[:]
    out.graph.input.extend(kept)
    del out.graph.initializer[:]
    out.graph.initializer.extend([*initializers, *bound])
    return out
