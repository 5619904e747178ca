"""Recurrent models converted end to end: the unrolled LSTM/GRU/RNN quantizes with opset-1 ops only (dense, lut,
mul, add, requant, slice, concat), numba == reference bit for bit, and the outputs stay close to onnxruntime's."""
import numpy as np
import onnxruntime as ort
import pytest

from cvm.ops import OPSETS
from mrt.pipeline import convert
from tests.mrt.rnn_cases import torch_like
from tests.mrt.test_rnn_import import state_model


def _cos(a, b):
    return float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_converted(op, direction):
    model = torch_like(op, direction)
    rng = np.random.default_rng(7)
    calib, x = rng.normal(size=(256, 12, 3)).astype(np.float32), rng.normal(size=(64, 12, 3)).astype(np.float32)
    m = convert(model, calib, progress=False)
    assert {n.op for n in m.graph.nodes} <= set(OPSETS[1]) and m.graph.opset == 1
    xq = m.quantize_input(x)
    fast, ref = m.run(xq, backend="numba"), m.run(xq, backend="reference")
    np.testing.assert_array_equal(fast, ref)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert _cos(m.dequantize_output(fast), want) > 0.999


def test_state_model_converted():
    """The state input and output stay batch-first ([N, 2, H]) in the integer model."""
    model = state_model(hidden=8)
    rng = np.random.default_rng(8)
    data = {"x": rng.normal(size=(128, 6, 3)).astype(np.float32),
            "state": rng.normal(scale=0.5, size=(128, 2, 8)).astype(np.float32)}
    m = convert(model, data, progress=False)
    x, state = data["x"][:32], data["state"][:32]
    q = {s.name: m.quantize_input(v, s.name) for s, v in zip(m.graph.inputs, (x, state))}
    fast, ref = m.run(q, backend="numba"), m.run(q, backend="reference")
    want = dict(zip(["y", "state_out"], ort.InferenceSession(model.SerializeToString()).run(
        None, {"x": x, "state": np.moveaxis(state, 0, 1)})))
    for name in m.graph.outputs:
        np.testing.assert_array_equal(fast[name], ref[name])
    got = {o.split(".out")[0]: m.dequantize_output(fast[o], o) for o in m.graph.outputs}
    assert _cos(got["y"], want["y"]) > 0.999
    assert _cos(np.moveaxis(got["state_out"], 0, 1), want["state_out"]) > 0.999
