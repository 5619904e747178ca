"""Streaming calibration gives exactly what calibrating over every captured tensor gave: the same
thresholds (absmax, mse, percentile) and means, with one batch (one run) or several (two runs)."""
from pathlib import Path

import numpy as np
import pytest

from mrt.calibrate import HIST_BINS, calibrate, mac_inputs, mse_threshold
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline

FIXTURES = Path(__file__).parents[2] / "fixtures"


def _captured(graph, data, method, batch_size, percentile=99.99, bits=8, means=None):
    """The calibration before streaming: every float tensor of every batch kept, then reduced."""
    x = data[graph.inputs[0].name]
    batches = [x[s:s + batch_size] for s in range(0, len(x), batch_size)]
    runs = [run_float(graph, b, capture=True)[1] for b in batches]
    absmax = {}
    for values in runs:
        for name, v in values.items():
            absmax[name] = max(absmax.get(name, 0.0), float(np.max(np.abs(v))) if v.size else 0.0)
            if means is not None and name in mac_inputs(graph):
                means[name] = means.get(name, 0.0) + v.astype(np.float64).sum(axis=0) / len(x)
    if method == "absmax":
        return absmax
    out = {}
    for name, top in absmax.items():
        hist = sum(np.histogram(np.abs(values[name]), bins=HIST_BINS, range=(0, top or 1.0))[0] for values in runs)
        edges = np.linspace(0, top or 1.0, HIST_BINS + 1)
        if method == "percentile":
            cdf = np.cumsum(hist) / max(hist.sum(), 1)
            t = float(edges[min(int(np.searchsorted(cdf, percentile / 100.0)) + 1, HIST_BINS)])
        else:
            t = mse_threshold(hist, edges, levels=2 ** (bits - 1) - 1)
        out[name] = min(t, top) or top
    return out


@pytest.fixture(scope="module")
def mnist():
    graph = run_pipeline(import_onnx(str(FIXTURES / "models" / "mnist_cnn.onnx")), DEFAULT_PIPELINE)
    with np.load(FIXTURES / "data" / "mnist_cnn_calib.npz") as f:
        x = f["x"][:96]
    return graph, {graph.inputs[0].name: x}


@pytest.mark.parametrize("method", ["absmax", "mse", "percentile"])
@pytest.mark.parametrize("batch_size", [96, 40])  # one batch; three (the last one short)
def test_streaming_equals_capturing_everything(mnist, method, batch_size):
    graph, data = mnist
    means, want_means = {}, {}
    got = calibrate(graph, data, method=method, batch_size=batch_size, progress=False, means=means)
    want = _captured(graph, data, method, batch_size, means=want_means)
    assert list(got) == list(want) and got == want
    assert sorted(means) == sorted(want_means) and means
    for name in means:
        assert np.array_equal(means[name], want_means[name])


def test_batch_size_does_not_change_the_thresholds(mnist):
    graph, data = mnist
    one = calibrate(graph, data, method="mse", batch_size=96, progress=False)
    assert calibrate(graph, data, method="mse", batch_size=7, progress=False) == one
