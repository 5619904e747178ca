"""ScatterElements, ScatterND, TopK and the Bitwise ops through the integer pipeline (mrt.float_ops.scatter,
mrt.quantize.rules_scatter, rules_integer.bitwise): the float ops give ONNX's results, and the converted CVM models
give the same integers, bit for bit, on inputs within the calibrated range."""
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper, numpy_helper

from mrt.float_ops import OPS
from mrt.pipeline import convert
from mrt.quantize import QuantizeError
from tests.mrt.conftest import IR_VERSION
from tests.mrt.test_integer_ops import SETTINGS, _run

N = helper.make_node
REDUCTIONS = ["none", "add", "mul", "max", "min"]
REACH = 20
SHAPE, UPDATES = (1, 4, 5), (1, 4, 3)  # data, and indices / updates along axis 2


def _model(node, inputs, inits=None, out_type=TensorProto.INT64, opset=18):
    ins = [helper.make_tensor_value_info(n, t, list(s)) for n, (t, s) in inputs.items()]
    outs = [helper.make_tensor_value_info(o, out_type, None) for o in node.output if o]
    graph = helper.make_graph([node], "g", ins, outs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", opset)])


def _scatter_ref(data, idx, upd, axis, reduction):
    """ONNX's reference ScatterElements, one update at a time in order (the last of duplicates wins for none)."""
    out = np.array(data, np.float64)
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[axis] = idx[p] % data.shape[axis]
        q = tuple(q)
        v = upd[p]
        out[q] = {"none": v, "add": out[q] + v, "mul": out[q] * v, "max": max(out[q], v), "min": min(out[q], v)}[
            reduction]
    return out


def _ends(shape, reach, rng, low=None):
    """Calibration values over [-reach, reach] with both ends present."""
    v = rng.integers(-reach if low is None else low, reach + 1, (30, *shape[1:]))
    v[0], v[1] = reach, -reach if low is None else low
    return v


# ---------------------------------------------------------------- float ops


@SETTINGS
@given(data=st.data(), reduction=st.sampled_from(REDUCTIONS), axis=st.sampled_from([1, 2]))
def test_float_scatter_along_is_onnxs(data, reduction, axis):
    x = data.draw(hnp.arrays(np.int64, (2, 3, 4), elements=st.integers(-9, 9)))
    shape = (2, 2, 4) if axis == 1 else (2, 3, 2)
    i = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-x.shape[axis], x.shape[axis] - 1)))
    u = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-9, 9)))
    got = OPS["scatter_along"].run(x.astype(np.float32), i.astype(np.float32), u.astype(np.float32), axis=axis,
                                   reduction=reduction, integer=1)
    np.testing.assert_array_equal(got, _scatter_ref(x, i, u, axis, reduction))


@SETTINGS
@given(x=hnp.arrays(np.int64, (3, 7), elements=st.integers(-4, 4)), k=st.integers(1, 7), largest=st.booleans())
def test_float_top_k_orders_ties_by_index(x, k, largest):
    """A stable sort: among equal values the lower index comes first, for largest and smallest alike."""
    keys = [sorted(range(7), key=lambda j, r=r: (-r[j] if largest else r[j], j))[:k] for r in x]
    values = OPS["top_k"].run(x.astype(np.float32), axis=1, k=k, largest=int(largest), output=0)
    indices = OPS["top_k"].run(x.astype(np.float32), axis=1, k=k, largest=int(largest), output=1)
    np.testing.assert_array_equal(indices, keys)
    np.testing.assert_array_equal(values, np.take_along_axis(x, np.asarray(keys), axis=1))


# ---------------------------------------------------------------- ScatterElements and ScatterND end to end


@lru_cache(maxsize=None)
def _scatter_model(reduction, const_idx=None):
    """ScatterElements on axis 2 of integer data; the indices an input, or the constant `const_idx` (a tuple)."""
    inputs = {"d": (TensorProto.INT64, SHAPE), "u": (TensorProto.INT64, UPDATES)}
    inits = None if const_idx is None else {"i": np.asarray(const_idx, np.int64).reshape(UPDATES)}
    if const_idx is None:
        inputs["i"] = (TensorProto.INT64, UPDATES)
    model = _model(N("ScatterElements", ["d", "i", "u"], ["y"], axis=2, reduction=reduction), inputs, inits)
    rng = np.random.default_rng(0)
    reach = 5 if reduction == "mul" else REACH  # a product of three updates stays within the 16-bit output
    feeds = {"d": _ends(SHAPE, reach, rng), "u": _ends(UPDATES, reach, rng)}
    if const_idx is None:
        feeds["i"] = _ends(UPDATES, SHAPE[2] - 1, rng, low=-SHAPE[2])
    return convert(model, feeds, progress=False), reach


@pytest.mark.parametrize("reduction", REDUCTIONS)
@SETTINGS
@given(data=st.data())
def test_scatter_elements_by_computed_indices_is_exact(reduction, data):
    m, reach = _scatter_model(reduction)
    d = data.draw(hnp.arrays(np.int64, SHAPE, elements=st.integers(-reach, reach)))
    u = data.draw(hnp.arrays(np.int64, UPDATES, elements=st.integers(-reach, reach)))
    i = data.draw(hnp.arrays(np.int64, UPDATES, elements=st.integers(-SHAPE[2], SHAPE[2] - 1)))
    np.testing.assert_array_equal(_run(m, {"d": d, "u": u, "i": i}), _scatter_ref(d, i, u, 2, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_by_constant_indices_is_exact(reduction):
    """Constant indices fold to constant flags; duplicates (4 twice, -1 = 4) combine as ONNX's reference does."""
    idx = (4, -1, 0, 1, 2, 3, 0, 0, 0, 2, 3, 4)
    m, reach = _scatter_model(reduction, idx)
    rng = np.random.default_rng(1)
    d, u = rng.integers(-reach, reach + 1, (16, *SHAPE[1:])), rng.integers(-reach, reach + 1, (16, *UPDATES[1:]))
    want = [_scatter_ref(d[b:b + 1], np.reshape(idx, UPDATES), u[b:b + 1], 2, reduction)[0] for b in range(16)]
    np.testing.assert_array_equal(_run(m, {"d": d, "u": u}), np.stack(want))


def test_scatter_elements_of_floats_keeps_the_datas_scale():
    rng = np.random.default_rng(2)
    model = _model(N("ScatterElements", ["d", "i", "u"], ["y"], axis=1),
                   {"d": (TensorProto.FLOAT, (1, 6)), "i": (TensorProto.INT64, (1, 3)), "u": (TensorProto.FLOAT, (1, 3))},
                   out_type=TensorProto.FLOAT)
    feeds = {"d": rng.standard_normal((20, 6)).astype(np.float32), "i": rng.integers(0, 6, (20, 3)),
             "u": rng.standard_normal((20, 3)).astype(np.float32)}
    got = _run(convert(model, feeds, progress=False), feeds)
    want = np.stack([_scatter_ref(feeds["d"][b:b + 1], feeds["i"][b:b + 1], feeds["u"][b:b + 1], 1, "none")[0]
                     for b in range(20)])
    assert np.abs(got - want).max() <= 2 * max(np.abs(feeds["d"]).max(), np.abs(feeds["u"]).max()) / 127


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_by_computed_index_rows_is_exact(reduction):
    """Rows (0, j) of indices [1, 2, 2] write rows of data [1, 4, 3] (negative j counts from the end)."""
    model = _model(N("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction),
                   {"d": (TensorProto.INT64, (1, 4, 3)), "i": (TensorProto.INT64, (1, 2, 2)),
                    "u": (TensorProto.INT64, (1, 2, 3))})
    rng = np.random.default_rng(3)
    rows = np.stack([np.zeros((30, 2), np.int64), rng.integers(-4, 4, (30, 2))], axis=-1)
    rows[0, 0, 1], rows[1, 0, 1] = 3, -4
    feeds = {"d": _ends((1, 4, 3), 9, rng), "i": rows, "u": _ends((1, 2, 3), 9, rng)}
    got = _run(convert(model, feeds, progress=False), feeds)
    want = []
    for b in range(30):
        out = feeds["d"][b].astype(np.float64)
        for r in range(2):
            j = rows[b, r, 1] % 4
            out[j] = {"none": feeds["u"][b, r], "add": out[j] + feeds["u"][b, r], "mul": out[j] * feeds["u"][b, r],
                      "max": np.maximum(out[j], feeds["u"][b, r]), "min": np.minimum(out[j], feeds["u"][b, r])}[
                reduction]
        want.append(out)
    np.testing.assert_array_equal(got, np.stack(want))


# ---------------------------------------------------------------- TopK


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k", [1, 3])
def test_top_k_of_integers_gives_values_and_indices_exactly(largest, k):
    model = _model(N("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=largest), {"x": (TensorProto.INT64, (1, 8))},
                   {"k": np.asarray([k], np.int64)})
    rng = np.random.default_rng(4)
    x = _ends((1, 8), 3, rng)  # few values: many ties
    m = convert(model, {"x": x}, progress=False)
    q = {"x": m.quantize_input(x, "x")}
    got = m.run(q, backend="reference")
    got = [m.dequantize_output(got[s.name], s.name) for s in m.outputs]
    want = OPS["top_k"].run(x.astype(np.float32), axis=1, k=k, largest=largest, output=1).astype(np.int64)
    np.testing.assert_array_equal(got[1], want)
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, want, axis=1))


# ---------------------------------------------------------------- Bitwise


BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}


@lru_cache(maxsize=None)
def _bitwise_model(op):
    model = _model(N(op, ["a", "b"], ["y"]), {"a": (TensorProto.INT16, (1, 6)), "b": (TensorProto.INT16, (1, 6))},
                   out_type=TensorProto.INT16)
    rng = np.random.default_rng(5)
    feeds = {n: _ends((1, 6), 32767, rng).astype(np.int16) for n in "ab"}
    return convert(model, feeds, progress=False)


@pytest.mark.parametrize("op", sorted(BITWISE))
@SETTINGS
@given(a=hnp.arrays(np.int64, (4, 6), elements=st.integers(-32767, 32767)),
       b=hnp.arrays(np.int64, (4, 6), elements=st.integers(-32767, 32767)))
def test_bitwise_of_int16_is_exact(op, a, b):
    np.testing.assert_array_equal(_run(_bitwise_model(op), {"a": a, "b": b}), BITWISE[op](a, b))


@pytest.mark.parametrize("t, want", [(TensorProto.INT8, lambda x: -x - 1), (TensorProto.UINT8, lambda x: 255 - x)])
def test_bitwise_not_follows_the_type(t, want):
    model = _model(N("BitwiseNot", ["x"], ["y"]), {"x": (t, (1, 6))}, out_type=t)
    x = np.arange(-60, 60).reshape(20, 6) if t == TensorProto.INT8 else np.arange(0, 240).reshape(40, 6)
    np.testing.assert_array_equal(_run(convert(model, {"x": x}, progress=False), {"x": x}), want(x))


def test_bitwise_of_values_past_29_bits_is_refused():
    model = _model(N("BitwiseAnd", ["a", "b"], ["y"]), {"a": (TensorProto.INT32, (1, 6)),
                                                         "b": (TensorProto.INT32, (1, 6))}, out_type=TensorProto.INT32)
    feeds = {n: np.full((2, 6), 1 << 30, np.int64) * np.asarray([[1], [-1]]) for n in "ab"}
    with pytest.raises(QuantizeError, match="bitwise and of 3[01]-bit values"):
        convert(model, feeds, progress=False)
