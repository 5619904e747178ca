"""MSE calibration picks the threshold that minimises the squared quantization error; entropy is
refused with the reason."""
import numpy as np
import pytest

from mrt.calibrate import calibrate, mse_threshold


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mse_threshold_matches_brute_force_on_samples(seed):
    x = np.abs(np.random.default_rng(seed).standard_t(3, 100_000))
    hist, edges = np.histogram(x, bins=2048, range=(0, x.max()))
    t = mse_threshold(hist, edges, 127)

    def err(threshold):
        step = threshold / 127
        return np.mean((np.clip(np.round(x / step), 0, 127) * step - x) ** 2)

    brute = min(np.linspace(x.max() / 64, x.max(), 300), key=err)
    assert err(t) <= err(brute) * 1.01
    assert t < 0.9 * x.max()  # a heavy tail is clipped


def test_mse_keeps_a_bounded_tensor_whole():
    x = np.random.default_rng(3).uniform(-1, 1, 100_000)
    hist, edges = np.histogram(np.abs(x), bins=2048, range=(0, 1))
    assert mse_threshold(hist, edges, 127) > 0.98


def test_entropy_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="entropy .* was removed.*use mse"):
        calibrate(None, np.zeros((1, 1)), method="entropy")
