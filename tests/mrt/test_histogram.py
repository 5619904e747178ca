"""mrt.histogram.abs_histogram counts exactly what np.histogram(|x|, bins, range=(0, top)) counts,
values on the bin edges, at the top, NaN and infinities included."""
import numpy as np
import pytest

from mrt.histogram import abs_histogram, abs_max


def _cases():
    rng = np.random.default_rng(0)
    top = np.float32(3.7)
    edges = np.linspace(0, top, 2049, dtype=np.float32)
    yield "normal", rng.standard_normal(200_003).astype(np.float32), None
    yield "exponential", rng.exponential(5, (64, 3, 17, 5)).astype(np.float32), None
    yield "on every edge and beside it", np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 9),
                                                          -edges]).astype(np.float32), float(top)
    yield "zeros, top 1", np.zeros(1000, np.float32), 1.0
    yield "tiny", (rng.standard_normal(5000) * 1e-40).astype(np.float32), None
    yield "huge", (rng.standard_normal(5000) * 1e37).astype(np.float32), None
    yield "outside the range", np.array([np.nan, np.inf, -np.inf, 5.0, 1.0, -2.0], np.float32), 2.0
    yield "a strided view", rng.standard_normal((40, 50)).astype(np.float32)[:, ::3], None


@pytest.mark.parametrize("bins", [2048, 7])
@pytest.mark.parametrize("name, x, top", list(_cases()), ids=[c[0] for c in _cases()])
def test_same_counts_as_numpy(name, x, top, bins):
    top = float(np.max(np.abs(x))) if top is None else top
    want = np.histogram(np.abs(x), bins=bins, range=(0, top))[0]
    got = abs_histogram(x, bins, top)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("name, x, top", list(_cases()), ids=[c[0] for c in _cases()])
def test_abs_max_is_numpys(name, x, top):
    want = float(np.max(np.abs(x)))
    got = abs_max(x)
    assert got == want or (np.isnan(got) and np.isnan(want))
    assert abs_max(np.zeros(0, np.float32)) == 0.0
