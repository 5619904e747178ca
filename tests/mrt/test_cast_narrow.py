"""Cast to ONNX's 8- and 4-bit floats (rounded to their grid, saturating) and to its 2- and 4-bit integers
(truncated and wrapped): univariate tables (mrt.float_ops.unary narrow_float, wrap_int), compared with onnx's
reference implementation."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from mrt import pipeline
from mrt.errors import UnsupportedOp
from mrt.onnx_import import import_onnx

RNG = np.random.default_rng(3)


def _cast_model(to, saturate=None, out=TensorProto.FLOAT):
    attrs = {"to": to} if saturate is None else {"to": to, "saturate": saturate}
    nodes = [helper.make_node("Cast", ["x"], ["c"], **attrs), helper.make_node("Cast", ["c"], ["y"], to=out)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", out, ["N", 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _run(model, x):
    m = pipeline.convert(model, x, progress=False)
    return m.dequantize_output(m.run(m.quantize_input(x, m.inputs[0].name), backend="reference"), m.outputs[0].name)


@pytest.mark.parametrize("to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT4E2M1])
def test_a_cast_to_a_narrow_float_rounds_to_its_grid(to):
    x = RNG.normal(0, 2, size=(32, 16)).astype(np.float32)
    model = _cast_model(to)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = _run(model, x)
    cosine = float(np.sum(got * want) / np.linalg.norm(got) / np.linalg.norm(want))
    assert cosine > 0.999


@pytest.mark.parametrize("to", [TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2])
def test_a_cast_to_a_narrow_integer_wraps_exactly(to):
    x = RNG.integers(-20, 20, size=(32, 16)).astype(np.float32)
    model = _cast_model(to, out=TensorProto.INT32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert np.array_equal(_run(model, x), want)


def test_a_float8_cast_without_saturation_is_refused_by_name():
    with pytest.raises(UnsupportedOp, match="saturate=0"):
        import_onnx(_cast_model(TensorProto.FLOAT8E4M3FN, saturate=0))


@pytest.mark.parametrize("to", [TensorProto.INT4, TensorProto.INT32])
def test_integer_valued_floats_cast_to_themselves_at_an_8_bit_scale(to):
    """Floats holding integers (ids, counts) on a scale that does not divide them (15/127): each quantized value
    is read at its rounding interval's end away from zero, so 7 (6.97 on that grid) casts to 7, not 6."""
    x = np.stack([np.roll(np.arange(-9, 7, dtype=np.float32), k) for k in range(32)])
    model = _cast_model(to, out=TensorProto.INT32)
    assert np.array_equal(_run(model, x), ReferenceEvaluator(model).run(None, {"x": x})[0])
