"""Model API: run-time input checks, gas limit, float boundary helpers, wire format."""
from pathlib import Path

import numpy as np
import pytest

import cvm

FIXTURE = Path(__file__).parents[2] / "fixtures" / "cvm" / "tiny_cnn.cvm"


@pytest.fixture(scope="module")
def model():
    return cvm.load(FIXTURE)


def x_int(n=2):
    return np.random.default_rng(0).integers(-127, 128, (n, 1, 8, 8)).astype(np.int8)


def test_specs(model):
    (i,), (o,) = model.inputs, model.outputs
    assert (i.name, i.shape, i.bits, i.dtype) == ("x", (None, 1, 8, 8), 8, np.int8)
    assert (o.name, o.shape, o.dtype) == ("logits", (None, 10), np.int32)


def test_gas_limit_checked_before_running(model):
    assert model.cost(3) == 3 * model.gas
    model.run(x_int(3), backend="reference", gas_limit=3 * model.gas)
    with pytest.raises(cvm.GasLimitExceeded, match=f"needs {3 * model.gas} gas"):
        model.run(x_int(3), backend="reference", gas_limit=3 * model.gas - 1)


@pytest.mark.parametrize("bad,message", [
    (np.zeros((2, 1, 8, 7), np.int8), r"must have shape \(batch, 1, 8, 8\)"),
    (np.zeros((1, 8, 8), np.int8), r"must have shape"),
    (np.zeros((2, 1, 8, 8), np.float32), "must hold integers"),
    (np.full((2, 1, 8, 8), 128, np.int16), r"outside its 8-bit range \[-127, 127\]"),
    (np.full((2, 1, 8, 8), -128, np.int8), "outside its 8-bit range"),
    (np.zeros((0, 1, 8, 8), np.int8), "batch size 0"),
])
def test_bad_inputs(model, bad, message):
    with pytest.raises(cvm.InputError, match=message):
        model.run(bad, backend="reference")


def test_dict_inputs(model):
    y = model.run({"x": x_int()}, backend="reference")
    assert np.array_equal(y, model.run(x_int(), backend="reference"))
    with pytest.raises(cvm.InputError, match="missing"):
        model.run({"y": x_int()}, backend="reference")


def test_unknown_backend(model):
    with pytest.raises(ValueError, match="unknown backend"):
        model.run(x_int(), backend="gpu")


def test_quantize_dequantize(model):
    q = model.quantize_input(np.array([[[[0.5] * 8] * 8]]) * np.ones((1, 1, 8, 8)))
    assert q.dtype == np.int8 and q.max() == 64  # 0.5 * 127 = 63.5 -> 64 (half to even)
    assert model.quantize_input(np.full((1, 1, 8, 8), 9.0)).max() == 127  # clipped
    assert np.allclose(model.dequantize_output(np.array([[10000]])), 1.0)


def test_wire_format_roundtrip(model):
    x = x_int(3)
    data = model.encode_input(x)
    assert len(data) == 3 * 64
    assert np.array_equal(model.decode_input(data), x)
    y = model.run(x, backend="reference")
    assert np.array_equal(model.decode_output(model.encode_output(y)), y)
    with pytest.raises(cvm.InputError, match="not a whole number"):
        model.decode_input(data[:-1])


def test_batch_rows_match_single_runs(model):
    x = x_int(5)
    y = model.run(x, backend="reference")
    for i in range(5):
        assert np.array_equal(model.run(x[i:i + 1], backend="reference")[0], y[i])
