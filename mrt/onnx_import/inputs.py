"""The graph inputs of an ONNX model as MRT inputs: a batch axis first, concrete per-sample dims.

Exporters often declare symbolic spatial dims (a detector's height and width, an OCR model's line
width). MRT fixes each to the one size the model will be run at: given by the caller (`mrt convert
--input-shape`) or read from the calibration data, whose arrays have that shape. The fixed shape is
the CVM model's input shape, so it is recorded in the model and checked on every call.
"""
from __future__ import annotations

from onnx import TensorProto

from mrt.errors import UnsupportedOp
from mrt.graph import TensorSpec


# ONNX input type -> IR input dtype: integers (token ids, attention masks) stay integers, which the quantizer
# gives scale 1 and declared bits (mrt.quantize.rules_text.integer_input); the float run computes on them as
# float32, exact below 2^24
INPUT_DTYPES = {TensorProto.FLOAT: "float32", TensorProto.INT64: "int64", TensorProto.INT32: "int64"}


def _dim(d):
    """A concrete dim (int > 0) or None for a symbolic one (dim_param, unset, or a negative value)."""
    return d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None


def _fixed(name: str, declared: list, given) -> tuple[int, ...]:
    """The per-sample shape: the declared dims, with the symbolic ones taken from `given`."""
    if given is None:
        if None in declared:
            raise UnsupportedOp(f"graph input {name!r}: per-sample dims {['?' if d is None else d for d in declared]} "
                                "are symbolic; fix them with --input-shape or calibration data of that shape")
        return tuple(declared)
    given = tuple(int(d) for d in given)
    if len(given) != len(declared) or any(d is not None and d != g for d, g in zip(declared, given)):
        raise UnsupportedOp(f"graph input {name!r}: shape {list(given)} does not fit the declared per-sample "
                            f"dims {['?' if d is None else d for d in declared]}")
    if min(given, default=1) < 1:
        raise UnsupportedOp(f"graph input {name!r}: shape {list(given)} has a dim below 1")
    return given


def graph_input(vi, given=None) -> tuple[TensorSpec, bool]:
    """A batched float32 graph input: its spec (per-sample shape) and whether it declares batch size 1.
    `given`: the per-sample shape to fix symbolic dims with (None: they must all be concrete)."""
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or t.elem_type not in INPUT_DTYPES:
        raise UnsupportedOp(f"graph input {vi.name!r}: only float32 and integer (int64, int32: token ids, "
                            "masks) tensors are supported")
    if not t.HasField("shape") or not t.shape.dim:
        raise UnsupportedOp(f"graph input {vi.name!r}: needs a shape with a batch axis")
    dims = list(t.shape.dim)
    batch = _dim(dims[0])
    if batch is not None and batch != 1:
        raise UnsupportedOp(f"graph input {vi.name!r}: batch dim must be symbolic or 1, got {batch}")
    return TensorSpec(vi.name, _fixed(vi.name, [_dim(d) for d in dims[1:]], given), INPUT_DTYPES[t.elem_type]), batch == 1


def shapes_for(inputs, shapes: dict | None, strict: bool = True) -> dict:
    """{input name: per-sample shape} from the caller's shapes; a single unnamed shape (key "x" or
    None) stands for the model's only input. strict=False ignores names that are not inputs (shapes
    read from calibration data, which may also hold labels)."""
    if not shapes:
        return {}
    shapes = dict(shapes)
    if len(inputs) == 1 and inputs[0].name not in shapes:
        for alias in ("x", None):
            if alias in shapes:
                return {inputs[0].name: shapes[alias]}
    names = {vi.name for vi in inputs}
    unknown = set(shapes) - names
    if not strict:
        return {k: v for k, v in shapes.items() if k in names}
    if unknown:
        raise UnsupportedOp(f"input shapes given for {sorted(map(str, unknown))}, which are not graph inputs "
                            f"({[vi.name for vi in inputs]})")
    return shapes
