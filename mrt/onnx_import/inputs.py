"""The graph inputs of an ONNX model as MRT inputs: one sample's tensor, concrete dims, a CVM batch axis in front.

Exporters declare a symbolic batch and often symbolic spatial dims (a detector's height and width, an OCR
model's line width). MRT imports what the graph computes for one sample: the batch is fixed at 1 and each other
symbolic dim at the one size the model will be run at, given by the caller (`mrt convert --input-shape`) or read
from the calibration data, whose arrays have that shape. The fixed shape is the CVM model's input shape, so it is
recorded in the model and checked on every call.

An input's unit axis (mrt.onnx_import.one_sample) is the size-1 axis its CVM per-sample shape leaves out: axis 0
where it is the symbolic batch or 1, axis 1 for a sequence-first recurrent layer's X and states, the one
symbolic dim of an input whose axis 0 is fixed above 1 (a batch declared elsewhere); an input with none of these
is stored whole, every ONNX axis a per-sample axis (a graph whose first dim is a fixed 100).
"""
from __future__ import annotations

from onnx import TensorProto

from mrt.errors import UnsupportedOp
from mrt.graph import TensorSpec


# ONNX input type -> IR input dtype: integers and booleans (token ids, attention masks, flags) stay integers,
# which the quantizer gives scale 1 and the calibrated range's bits (mrt.quantize.rules_text.integer_input); the
# float run computes on them as float32, exact below 2^24. Wider floats are read as float32 (MRT quantizes them).
# The narrow types numpy lacks (ml_dtypes': int4, float8, ...) hold only values int8 or float32 hold exactly
# (cvm.model.numeric converts a client's array of them). Integers (uint64 too) are refused beyond CVM's 32 bits in
# calibration data (mrt.pipeline) and beyond the bits the input was calibrated to at run time (Model.quantize_input).
_FLOATS = ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
           "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT4E2M1", "FLOAT6E2M3", "FLOAT6E3M2")
_INTEGERS = ("INT64", "INT32", "INT16", "INT8", "INT4", "INT2", "UINT64", "UINT32", "UINT16", "UINT8", "UINT4",
             "UINT2", "BOOL")
INPUT_DTYPES = {
    **{getattr(TensorProto, t): "float32" for t in _FLOATS if hasattr(TensorProto, t)},  # an older onnx lacks some
    **{getattr(TensorProto, t): "int64" for t in _INTEGERS if hasattr(TensorProto, t)},
}
# The element types whose values are floats: a graph output of one is a float output (a float8 output of
# Identity or Reshape holds float8 values, not integers); Cast to a narrow float rounds to its grid, which MRT does not
# model (ops_core's Cast refuses it).
FLOAT_ELEM_TYPES = frozenset(t for t, dtype in INPUT_DTYPES.items() if dtype == "float32")


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


RECURRENT = ("LSTM", "GRU", "RNN")


def unit_axis(vi, graph):
    """The ONNX axis of a graph input left out of its per-sample shape, or None (see the module docstring)."""
    dims = [_dim(d) for d in vi.type.tensor_type.shape.dim] if vi.type.HasField("tensor_type") else []
    for n in graph.node:
        if n.op_type in RECURRENT and vi.name in (list(n.input[:1]) + list(n.input[5:7])):
            layout = next((a.i for a in n.attribute if a.name == "layout"), 0)
            axis = 1 if layout == 0 else 0
            return axis if len(dims) > axis and dims[axis] in (None, 1) else None
    if dims and dims[0] in (None, 1):
        return 0
    symbolic = [a for a, d in enumerate(dims) if d is None]
    return symbolic[0] if len(symbolic) == 1 else None


def graph_input(vi, given=None, axis=0) -> tuple[TensorSpec, int | None]:
    """A graph input's spec (per-sample shape: the ONNX dims without the unit axis `axis`, all of them where it
    is None) and that axis. `given`: the per-sample shape to fix symbolic dims with (None: they must all be
    concrete)."""
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or t.elem_type not in INPUT_DTYPES:
        kind = TensorProto.DataType.Name(t.elem_type) if vi.type.HasField("tensor_type") else "a non-tensor"
        raise UnsupportedOp(f"graph input {vi.name!r}: {kind} inputs are not supported (floats up to 64 bits, "
                            "float8, float6, float4, bool, integers up to 64 bits)")
    if not t.HasField("shape"):
        raise UnsupportedOp(f"graph input {vi.name!r}: needs a declared shape")
    if any(d.HasField("dim_value") and d.dim_value == 0 for d in t.shape.dim):
        raise UnsupportedOp(f"graph input {vi.name!r}: a dim of size 0 (an empty tensor); CVM has no empty tensors")
    dims = [_dim(d) for d in t.shape.dim]
    kept = dims if axis is None else dims[:axis] + dims[axis + 1:]
    return TensorSpec(vi.name, _fixed(vi.name, kept, given), INPUT_DTYPES[t.elem_type]), axis


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
