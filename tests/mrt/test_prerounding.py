"""Pre-rounding before the fhe target's lookups (mrt.quantize.prerounding): sized from the proven
range (the default) or from the calibrated range, where the rounding requant's own bits clamp."""
from pathlib import Path

import numpy as np
import pytest

import mrt
from cvm.arith import round_shift
from mrt.quantize import config_for
from mrt.quantize.prerounding import calibrated_shift, proven_shift, saturation_reach

FIX = Path(__file__).parents[2] / "fixtures"


def test_lookup_range_selects_the_hook():
    assert config_for("fhe").pre_rounding == "lookup_budget"
    assert config_for("fhe", lookup_range="calibrated").pre_rounding == "lookup_calibrated"
    assert config_for("fhe", lookup_range="channels").pre_rounding == "lookup_channels"
    assert config_for("cvm", lookup_range="calibrated").pre_rounding == "none"  # no lookup budget, no rounding
    with pytest.raises(ValueError, match="lookup_range"):
        config_for("fhe", lookup_range="widest")


def test_reach_is_where_every_live_channel_saturates():
    scale = np.array([2.0, 1.0, 1e-9])  # the last channel rounds to 0 everywhere: left out
    reach = saturation_reach(scale, scale_out=64.0, bits=6, proven=20000)
    assert reach == int(np.ceil(31.5 * 64))  # the channel with the smallest ratio saturates last
    assert saturation_reach(np.array([1e-9]), 64.0, 6, 20000) == 0


def test_calibrated_shift_fits_the_reach_and_never_exceeds_the_proven_one():
    assert proven_shift(-19530, 19806, 6) == 10
    r = calibrated_shift(-19530, 19806, reach=2016, lut_input_bits=6)
    assert round_shift(2016, r) <= 31 < round_shift(2016, r - 1)
    assert calibrated_shift(-20, 20, reach=5000, lut_input_bits=6) == 0  # already narrow: no rounding


@pytest.fixture(scope="module")
def digits():
    with np.load(FIX / "data" / "digits_mlp_calib.npz") as c, np.load(FIX / "data" / "digits_mlp_test.npz") as t:
        return c["x"], t["x"][:64]


def _round_shifts(model):
    return [n.attrs["shift"] for n in model.graph.nodes if n.output.endswith(".round")]


@pytest.mark.parametrize("lookup_range", ["calibrated", "channels"])
def test_calibrated_rounding_is_narrower_clamped_and_identical_across_backends(digits, lookup_range):
    calib, x = digits
    onnx = FIX / "models" / "digits_mlp.onnx"
    proven = mrt.convert(onnx, calib, target="fhe", progress=False)
    model = mrt.convert(onnx, calib, target="fhe", lookup_range=lookup_range, progress=False)
    assert model.meta["quantization"]["lookup_range"] == lookup_range
    assert sum(_round_shifts(model)) < sum(_round_shifts(proven))  # finer steps inside the window
    rounds = [model.analysis.tensors[n.output] for n in model.graph.nodes if n.output.endswith(".round")]
    assert all(-31 <= t.lo and t.hi <= 31 for t in rounds)
    assert any((t.lo, t.hi) == (-31, 31) for t in rounds)  # the requant's bits clamp beyond the window
    xq = model.quantize_input(x)
    assert np.array_equal(model.run(xq, backend="reference"), model.run(xq, backend="numba"))
