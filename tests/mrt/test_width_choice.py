"""Activation width chosen by measurement (mrt.width_choice): 12-bit activations and 10-bit weights only
for a small model whose 8-bit output error is large and at least halved by them; a caller's width is
obeyed; recurrent models keep their own rule. The PP-OCR classifier's case is in test_ppocr_cls.py."""
from pathlib import Path

import numpy as np
import pytest

from mrt import pipeline, width_choice
from mrt.width_choice import ERROR_FLOOR, MIN_GAIN, SMALL_MODEL_MACS, WIDE_BITS, Macs, choose

FIX = Path(__file__).parents[2] / "fixtures"


def _mnist(n=64):
    with np.load(FIX / "data" / "mnist_cnn_calib.npz") as d:
        return FIX / "models" / "mnist_cnn.onnx", d["x"][:n]


def test_the_rule():
    never = lambda: pytest.fail("12 bits tried")  # noqa: E731
    big, small, slow = Macs(SMALL_MODEL_MACS + 1, SMALL_MODEL_MACS + 1), Macs(1000, 1000), Macs(1000, 100)
    assert choose(big, 0.5, never).chosen == 8  # too large to try
    assert choose(slow, 0.5, never).chosen == 8  # its MACs would run on slow int16 kernels
    assert choose(small, ERROR_FLOOR, never).chosen == 8  # small enough error
    assert choose(small, 0.1, lambda: 0.1 / MIN_GAIN).chosen == WIDE_BITS
    assert choose(small, 0.1, lambda: 0.1 / MIN_GAIN * 1.01).chosen == 8  # not enough gain
    assert "12 bits not tried" in choose(big, 0.5, never).describe()
    assert "6.70x" in choose(small, 0.0670, lambda: 0.01).describe()


def test_macs_count_convs_and_dense_layers_per_sample():
    path, calib = _mnist(8)
    c = pipeline.prepare(path, calib, progress=False)
    expected = 0
    for node in c.graph.nodes:
        if node.op == "conv":
            o, i, kh, kw = c.graph.initializers[node.inputs[1]].shape
            expected += int(np.prod(c.graph.shapes[node.outputs[0]])) * i * kh * kw
        elif node.op == "dense":
            expected += int(np.prod(c.graph.initializers[node.inputs[1]].shape))
    m = width_choice.macs(c.graph)
    assert m.total == expected > 0
    assert 0 < m.int16_fast < m.total  # its dense layers, not its 3x3 convs


def _widths(model):
    q = model.meta["quantization"]
    return q["bits"], q["weight_bits"]


def test_a_model_whose_convs_would_be_slow_at_12_bits_keeps_8_and_the_dump_says_why():
    path, calib = _mnist()
    seen = {}
    model = pipeline.convert(path, calib, progress=False, dump=lambda i, name, p: seen.setdefault(name, str(p)))
    assert _widths(model) == (8, 8)
    assert seen["quantize"].splitlines()[0].endswith("in int16 VNNI kernels < 60%: 12 bits not tried)")


def _cheap(monkeypatch):
    monkeypatch.setattr(width_choice, "ERROR_FLOOR", 0.0)  # mnist_cnn: 0.025 at 8 bits, 0.0013 at 12/10 here
    monkeypatch.setattr(width_choice, "MIN_FAST_SHARE", 0.0)  # (its 3x3 convs would make 12 bits 5x slower)


def test_a_large_error_that_12_bits_halve_goes_wide(monkeypatch):
    _cheap(monkeypatch)
    path, calib = _mnist()
    model = pipeline.convert(path, calib, progress=False)
    assert _widths(model) == (WIDE_BITS, width_choice.WIDE_WEIGHT_BITS)
    xq = model.quantize_input(calib[:2])
    assert np.array_equal(model.run(xq, backend="numba"), model.run(xq, backend="reference"))


def test_a_width_the_caller_chose_is_obeyed(monkeypatch):
    _cheap(monkeypatch)
    path, calib = _mnist()
    assert _widths(pipeline.convert(path, calib, progress=False, bits=8)) == (8, 8)
    assert _widths(pipeline.convert(path, calib, progress=False, weight_bits=8)) == (8, 8)
    assert not width_choice.applies("fhe", None, {})
