"""Calibration: run the float graph over ALL calibration batches and reduce every tensor to a
clipping threshold. Results are plain data ({tensor name: threshold}) so they can be saved,
diffed and reused; the methods are absmax, percentile and entropy (KL divergence)."""
from __future__ import annotations

import numpy as np
from eth_hash.auto import keccak
from tqdm.auto import tqdm

from mrt.float_exec import run_float

METHODS = ("absmax", "percentile", "entropy")
HIST_BINS = 2048


def data_hash(data: dict[str, np.ndarray]) -> str:
    """keccak256 over the calibration arrays (name, dtype, shape, little-endian bytes), sorted by name."""
    h = b""
    for name in sorted(data):
        a = np.ascontiguousarray(data[name], np.dtype(data[name].dtype).newbyteorder("<"))
        h += name.encode() + str(a.dtype).encode() + str(a.shape).encode() + keccak(a.tobytes())
    return "0x" + keccak(h).hex()


def _batches(data: dict[str, np.ndarray], batch_size: int):
    n = len(next(iter(data.values())))
    for start in range(0, n, batch_size):
        yield {k: v[start:start + batch_size] for k, v in data.items()}


def _kl_threshold(hist: np.ndarray, edges: np.ndarray, levels: int) -> float:
    """TensorRT-style entropy calibration on a histogram of |x|: the threshold whose quantized
    distribution (into `levels` bins) is closest in KL divergence to the clipped reference."""
    best, best_kl = edges[-1], np.inf
    total = hist.sum()
    if total == 0:
        return float(edges[-1])
    for i in range(levels, len(hist) + 1, max(1, len(hist) // 256)):
        ref = hist[:i].astype(np.float64).copy()
        ref[i - 1] += hist[i:].sum()  # clipped mass goes to the last bin
        chunks = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for idx in chunks:
            nz = hist[idx] > 0
            if nz.any():
                q[idx[nz]] = hist[idx].sum() / nz.sum()
        p = ref / ref.sum()
        qs = q.sum()
        if qs == 0:
            continue
        q = q / qs
        mask = p > 0
        kl = np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12)))
        if kl < best_kl:
            best_kl, best = kl, edges[i]
    return float(best)


def calibrate(graph, data: dict[str, np.ndarray] | np.ndarray, *, method: str = "absmax",
              batch_size: int = 64, percentile: float = 99.99, bits: int = 8,
              progress: bool = True) -> dict[str, float]:
    """Threshold of every batched tensor of `graph` over every batch of `data`."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; choose from {METHODS}")
    if isinstance(data, np.ndarray):
        data = {graph.inputs[0].name: data}
    n = len(next(iter(data.values())))
    total = (n + batch_size - 1) // batch_size
    absmax: dict[str, float] = {}
    for batch in tqdm(_batches(data, batch_size), total=total, desc="calibrate", disable=not progress, leave=False):
        _, values = run_float(graph, batch, capture=True)
        for name, v in values.items():
            absmax[name] = max(absmax.get(name, 0.0), float(np.max(np.abs(v))) if v.size else 0.0)
    if method == "absmax":
        return absmax

    hists = {k: np.zeros(HIST_BINS, np.int64) for k in absmax}
    for batch in tqdm(_batches(data, batch_size), total=total, desc=f"calibrate ({method})",
                      disable=not progress, leave=False):
        _, values = run_float(graph, batch, capture=True)
        for name, v in values.items():
            top = absmax[name] or 1.0
            hists[name] += np.histogram(np.abs(v), bins=HIST_BINS, range=(0, top))[0]
    out = {}
    for name, hist in hists.items():
        edges = np.linspace(0, absmax[name] or 1.0, HIST_BINS + 1)
        if method == "percentile":
            cdf = np.cumsum(hist) / max(hist.sum(), 1)
            i = int(np.searchsorted(cdf, percentile / 100.0))
            out[name] = float(edges[min(i + 1, HIST_BINS)])
        else:
            out[name] = _kl_threshold(hist, edges, levels=2 ** (bits - 1))
        out[name] = min(out[name], absmax[name]) or absmax[name]
    return out
