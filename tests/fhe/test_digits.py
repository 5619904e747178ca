"""The sklearn-digits MLP converted for the fhe target (`mrt.convert(..., target="fhe")`), run
encrypted: 20 test images identical across reference, clear, simulation and execution, and the
accuracy of the fhe-target model against the float model."""
import json
from pathlib import Path

import numpy as np
import pytest

from cvm.interp import fhe as F

mrt = pytest.importorskip("mrt")

ROOT = Path(__file__).parents[2] / "fixtures"
ONNX = ROOT / "models" / "digits_mlp.onnx"
BITS = 6  # activations, weights and every table input: 6-bit tables keep keys near 2 GB (docs/fhe.md)
N_ENCRYPTED = 20


@pytest.fixture(scope="module")
def digits():
    with np.load(ROOT / "data" / "digits_mlp_calib.npz") as c, np.load(ROOT / "data" / "digits_mlp_test.npz") as t:
        calib, x, y = c["x"], t["x"], t["y"]
    model = mrt.convert(ONNX, calib, target="fhe", bits=BITS, lut_input_bits=BITS, progress=False)
    runner = F.prepare(model.graph, model.analysis, lookup_bits=BITS, inputset=model.quantize_input(calib))
    return model, runner, x, y


def test_accuracy_against_float(digits, record_property):
    from mrt.evaluate import evaluate

    model, runner, x, y = digits
    res = evaluate(ONNX, model, x, y, layers=False, backend="reference")
    xq = model.quantize_input(x)
    clear = runner({"x": xq}, mode="clear")[model.graph.outputs[0]]
    fhe_acc = float((clear.argmax(axis=1) == y).mean())
    report = {"float": res.float_accuracy, "fhe_target_int": res.int_accuracy, "fhe_circuit_clear": fhe_acc,
              "test_images": len(y)}
    record_property("digits_fhe_accuracy", json.dumps(report))
    print("digits fhe-target accuracy:", report)
    assert fhe_acc == res.int_accuracy  # the circuit computes the integer model, nothing else
    assert res.int_accuracy >= res.float_accuracy - 0.04


@pytest.mark.slow
def test_twenty_images_bit_exact_in_every_mode(digits):
    model, runner, x, _ = digits
    xq = model.quantize_input(x[:N_ENCRYPTED])
    out = model.graph.outputs[0]
    want = model.run(xq, backend="reference")
    assert np.array_equal(runner({"x": xq}, mode="clear")[out], want)
    assert np.array_equal(runner({"x": xq}, mode="simulate")[out], want)
    assert np.array_equal(runner({"x": xq}, mode="execute")[out], want)


def test_committed_fhe_fixture_compiles_with_mrt_defaults():
    """fixtures/models/digits_mlp_fhe.cvm (MRT's fhe defaults: 6-bit tables): clear and simulated
    circuits equal the reference (the encrypted check is the slow test above, on the same settings)."""
    import cvm

    model = cvm.load(ROOT / "models" / "digits_mlp_fhe.cvm")
    xq = np.load(ROOT / "models" / "digits_mlp_fhe_input.npy")
    runner = F.prepare(model.graph, model.analysis)
    want = model.run(xq, backend="reference")
    assert np.array_equal(runner({"x": xq}, mode="clear")["logits.out"], want)
    assert np.array_equal(runner({"x": xq}, mode="simulate")["logits.out"], want)
    assert max(v["table_bits"] for v in runner.lookup_report().values()) == 6
