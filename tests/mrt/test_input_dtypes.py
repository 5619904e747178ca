"""Graph inputs of every ONNX element type with an exact integer or float meaning (mrt.onnx_import.inputs).

* uint32, uint64, int4, uint4, int2, uint2 are integer inputs like int8's: scale 1, the calibrated range's bits.
  CVM holds at most 32-bit integers: calibration data beyond them is a BadInput, and a run value beyond the bits
  the input was calibrated to is an InputError naming the input (never clipped, never wrapped).
* float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float6 and float4e2m1 values are float32 values exactly: the
  client's array (ml_dtypes, as onnx.numpy_helper reads a TensorProto) is converted to float32, then quantized
  like any float input.

Each model is tiny (onnx.helper): Cast to float, then Relu, converted through mrt.pipeline and run on CVM's
reference interpreter.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mrt.pipeline as pipeline
from cvm.errors import InputError
from mrt.errors import BadInput
from mrt.onnx_import.inputs import INPUT_DTYPES

INTEGERS = {"UINT32": (0, 1000), "UINT64": (0, 1000), "INT4": (-8, 7), "UINT4": (0, 15), "INT2": (-2, 1),
            "UINT2": (0, 3)}
FLOATS = ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT4E2M1",
          "FLOAT6E2M3", "FLOAT6E3M2", "BFLOAT16")


def _model(elem: int, features: int = 4):
    x = helper.make_tensor_value_info("x", elem, [None, features])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, features])
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("Relu", ["xf"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 23)])


def _as_onnx_reads(values: np.ndarray, elem: int) -> np.ndarray:
    """`values` as an array of the ONNX type, read back as the node tests' harness reads it (numpy_helper)."""
    typed = values.astype(helper.tensor_dtype_to_np_dtype(elem))
    return numpy_helper.to_array(numpy_helper.from_array(typed))


def _convert_and_run(elem: int, data: np.ndarray):
    m = pipeline.convert(_model(elem, data.shape[1]), {"x": data}, progress=False)
    got = m.dequantize_output(m.run(m.quantize_input(data), backend="reference"))
    return m, got


@pytest.mark.parametrize("kind", sorted(INTEGERS))
def test_integer_input_types_convert_at_scale_one(kind):
    elem = getattr(TensorProto, kind)
    assert INPUT_DTYPES[elem] == "int64"
    lo, hi = INTEGERS[kind]
    data = _as_onnx_reads(np.random.default_rng(0).integers(lo, hi + 1, (64, 4)), elem)
    m, got = _convert_and_run(elem, data)
    assert m.inputs[0].scale == 1.0
    q = m.quantize_input(data)
    np.testing.assert_array_equal(q, data.astype(np.int64))  # every value kept exactly
    np.testing.assert_array_equal(m.run(data, backend="reference"), m.run(q, backend="reference"))  # int4 as int8
    want = np.maximum(data.astype(np.float64), 0)
    assert np.abs(got - want).max() <= 1e-3 * max(1.0, want.max())


@pytest.mark.parametrize("kind", FLOATS)
def test_narrow_float_input_types_are_float32_values(kind):
    elem = getattr(TensorProto, kind)
    assert INPUT_DTYPES[elem] == "float32"
    values = np.random.default_rng(1).standard_normal((64, 4)) * 2
    data = _as_onnx_reads(np.abs(values) if kind == "FLOAT8E8M0" else values, elem)  # e8m0: powers of 2 only
    assert data.dtype.kind != "f" or data.dtype.itemsize <= 2  # a narrow type, not already float32
    m, got = _convert_and_run(elem, data)
    exact = data.astype(np.float32)
    np.testing.assert_array_equal(m.quantize_input(data), m.quantize_input(exact))
    want = np.maximum(exact, 0)
    assert np.abs(got - want).max() <= 0.02 * want.max()


def test_uint64_beyond_the_calibrated_range_is_refused_naming_the_input():
    data = np.array([[0, 1, 5, 3]] * 7 + [[2, 0, 1, 7]], np.uint64)
    m, _ = _convert_and_run(TensorProto.UINT64, data)
    assert m.inputs[0].bits == 4
    for bad in (np.array([[0, 1, 9, 3]], np.uint64), np.array([[0, 1, 2 ** 64 - 1, 3]], np.uint64)):
        with pytest.raises(InputError, match=r"^input 'x' holds integers in \[0, \d+\], outside the \[-7, 7\]") as e:
            m.quantize_input(bad)
        assert "\n" not in str(e.value)
    assert str(2 ** 64 - 1) in str(e.value)  # read as an integer: no wrap to -1, no float64 rounding
    np.testing.assert_array_equal(m.quantize_input(np.array([[7, 0, 0, 1]], np.uint64)), [[7, 0, 0, 1]])


def test_calibration_integers_beyond_cvm_32_bits_are_a_bad_input():
    data = np.array([[0, 1, 2 ** 40, 3]] * 7 + [[2, 0, 1, 7]], np.uint64)
    with pytest.raises(BadInput, match=r"^calibration data 'x' holds integers in \[0, 1099511627776\], beyond the "
                                       r"\[-2147483647, 2147483647\] of a CVM integer input"):
        pipeline.convert(_model(TensorProto.UINT64), {"x": data}, progress=False)


def test_unsupported_input_types_name_the_input_and_type():
    from mrt.errors import UnsupportedOp
    from mrt.onnx_import.inputs import graph_input
    vi = helper.make_tensor_value_info("z", TensorProto.COMPLEX64, [1, 4])
    with pytest.raises(UnsupportedOp, match=r"^graph input 'z': COMPLEX64 inputs are not supported"):
        graph_input(vi)
