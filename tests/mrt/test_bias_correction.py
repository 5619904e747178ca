"""Bias correction: the corrected bias cancels the mean output shift that rounding the weights adds."""
import numpy as np
import pytest

from mrt.graph import Graph
from mrt.quantize import config_for
from mrt.quantize.rules import _rounding_shift, _weights_and_bias
from mrt.quantize.state import Quantizer


def _qz(**overrides):
    return Quantizer(Graph([], [], {}, []), {}, config_for("cvm", weight_bits=4, **overrides))


def test_dense_mean_error_vanishes():
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(8, 32)), rng.normal(size=8)
    x = rng.normal(loc=2.0, size=(20000, 32))
    xs = 1e-3  # the input's scale: the bias is rounded to the accumulator's step xs * sw
    qw, qb, acc = _weights_and_bias(_qz(bias_correction=True), w, b, xs, x.mean(axis=0))
    plain_w, plain_b, _ = _weights_and_bias(_qz(), w, b, xs, x.mean(axis=0))
    err = (x @ (qw * acc[:, None] / xs).T + qb * acc) - (x @ w.T + b)
    plain = (x @ (plain_w * acc[:, None] / xs).T + plain_b * acc) - (x @ w.T + b)
    assert np.abs(err.mean(axis=0)).max() < 0.01 < np.abs(plain.mean(axis=0)).max()


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_conv_shift_sums_each_group_over_its_channels(groups):
    rng = np.random.default_rng(groups)
    err, mean = rng.normal(size=(8, 8 // groups, 3, 3)), rng.normal(size=8)
    cg = 8 // groups
    want = [sum(err[o, c].sum() * mean[(o // (8 // groups)) * cg + c] for c in range(cg)) for o in range(8)]
    assert np.allclose(_rounding_shift(err, mean, groups), want)


def test_on_for_fhe_off_for_cvm():
    assert config_for("fhe").bias_correction and not config_for("cvm").bias_correction
