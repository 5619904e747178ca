"""A small XGBoost model (fixtures/trees/xgb_cancer.onnx: 12 trees of depth 3 on breast cancer) converted
for the fhe target from the same integer graph as for CVM (threshold-coded inputs, opset-1 ops), compiled by
the FHE backend and run encrypted: reference == clear == simulation == execution, bit for bit."""
import time
from pathlib import Path

import numpy as np
import pytest

from cvm.interp import fhe as F

mrt = pytest.importorskip("mrt")
pytest.importorskip("sklearn")

from mrt.trees.datasets import split  # noqa: E402

ONNX = Path(__file__).parents[2] / "fixtures" / "trees" / "xgb_cancer.onnx"
N_ENCRYPTED = 3


@pytest.fixture(scope="module")
def xgb():
    xtr, xte, _, _ = split("cancer")
    model = mrt.convert(ONNX, xtr, target="fhe", progress=False)
    inputset = model.quantize_input(xtr)
    runner = F.prepare(model.graph, model.analysis, lookup_bits=model.meta["quantization"]["lut_input_bits"],
                       inputset=inputset)
    return model, runner, xte


def test_clear_and_simulated_circuit_equal_the_reference(xgb):
    model, runner, x = xgb
    q = model.quantize_input(x)
    name, out = model.graph.inputs[0].name, model.graph.outputs[0]
    want = model.run(q, backend="reference")
    assert np.array_equal(runner({name: q}, mode="clear")[out], want)
    assert np.array_equal(runner({name: q[:20]}, mode="simulate")[out], want[:20])


@pytest.mark.slow
def test_encrypted_equals_plain(xgb, record_property):
    model, runner, x = xgb
    q = model.quantize_input(x[:N_ENCRYPTED])
    name, out = model.graph.inputs[0].name, model.graph.outputs[0]
    runner({name: q[:1]}, mode="execute")   # keys and compilation outside the timing
    start = time.perf_counter()
    got = runner({name: q}, mode="execute")[out]
    per_sample = (time.perf_counter() - start) / N_ENCRYPTED
    record_property("xgb_fhe_seconds_per_sample", per_sample)
    print(f"xgb_cancer encrypted: {per_sample:.2f} s per sample")
    assert np.array_equal(got, model.run(q, backend="reference"))
