"""Calibration: run the float graph over ALL calibration batches and reduce every tensor to a
clipping threshold. Results are plain data ({tensor name: threshold}) so they can be saved,
diffed and reused; the methods are absmax, percentile and mse (the threshold that minimises the
expected squared quantization error of each tensor at the target's bits)."""
from __future__ import annotations

import math

import numpy as np
from eth_hash.auto import keccak

from mrt.errors import BadInput
from mrt.float_exec import run_float
from mrt.histogram import abs_histogram, abs_max
from mrt.progress import bar

METHODS = ("absmax", "percentile", "mse")
REMOVED = {"entropy": "entropy (KL) calibration was removed: on ReLU networks it clipped activations to 1/16 of "
                      "their range (17% top-1 agreement with float on the resnet_cifar fixture); use mse"}
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


def mse_threshold(hist: np.ndarray, edges: np.ndarray, levels: int) -> float:
    """The clipping threshold T that minimises the expected squared error of symmetric quantization
    to `levels` steps on each side, over a histogram of |x|: below T, rounding noise of step^2 / 12
    per value (step = T / levels); above T, the clipping error (|x| - T)^2 (tail sums, all candidates
    at once)."""
    centers = (edges[:-1] + edges[1:]) / 2
    h = hist.astype(np.float64)
    below = np.cumsum(h)  # values in bins [0, i)
    tail_n = below[-1] - np.concatenate(([0.0], below[:-1]))  # values in bins [i, end)
    tail_s = np.cumsum((h * centers)[::-1])[::-1]
    tail_ss = np.cumsum((h * centers ** 2)[::-1])[::-1]
    t = edges[1:]  # candidate i clips at edges[i + 1], keeping bins [0, i] whole
    kept = below
    clip_err = np.concatenate((tail_ss[1:] - 2 * t[:-1] * tail_s[1:] + t[:-1] ** 2 * tail_n[1:], [0.0]))
    err = kept * (t / levels) ** 2 / 12 + clip_err
    return float(t[int(np.argmin(err))])


def mac_inputs(graph) -> set[str]:
    """The tensors that conv and dense nodes read (their means drive bias correction)."""
    return {n.inputs[0] for n in graph.nodes if n.op in ("conv", "dense")}


def calibrate(graph, data: dict[str, np.ndarray] | np.ndarray, *, method: str = "absmax",
              batch_size: int = 64, percentile: float = 99.99, bits: int = 8,
              progress: bool = True, means: dict[str, np.ndarray] | None = None,
              wide: tuple[str, ...] = (), wide_bits: int | None = None, unsigned: bool = False,
              output_bits: int | None = None) -> dict[str, float]:
    """Threshold of every batched tensor of `graph` over every batch of `data`. With `means`, also
    fills it with the per-sample mean over the data of each tensor of `mac_inputs(graph)`. The
    tensors in `wide` (mixed precision) get the threshold of `wide_bits` activations: mse at 8 bits
    clips what 12 bits would keep (all-MiniLM-L6-v2: cosine 0.9933 -> 0.9978 with the same wide set).
    With `unsigned` (QuantConfig.unsigned_activations), a tensor that is never negative on the data
    gets the mse threshold of the 2^bits - 1 steps an unsigned activation holds, not the 2^(bits-1) - 1
    of a signed one: sized for half the steps, mse clipped ReLU outputs harder than their step
    warrants (VGG-16, 256 random images: centered logit cosine 0.903 -> 0.911 from this alone).
    With `output_bits`, the graph outputs get the threshold of that many bits (QuantConfig.output_bits:
    16-bit logits or forecasts): an 8-bit mse threshold clips the tail that is the answer (the top
    logit, the peak of a forecast).

    Streaming: each statistic is taken from a tensor as soon as the float run makes it, and the run
    frees the tensor after its last reader, so memory holds one batch's live activations, never all
    of them. A histogram's range is the tensor's absmax over ALL the data, so with several batches
    the histograms take a second run (the first finds the ranges); with one batch, one run."""
    if method in REMOVED:
        raise ValueError(REMOVED[method])
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; choose from {METHODS}")
    if batch_size < 1:
        raise ValueError(f"calibration batch size {batch_size} must be at least 1")
    if isinstance(data, np.ndarray):
        data = {graph.inputs[0].name: data}
    n = len(next(iter(data.values())))
    one_run = n <= batch_size  # the batch's absmax is the data's: histograms at once
    absmax: dict[str, float] = {}
    negative: set[str] = set()  # tensors that took a negative value on the data
    hists: dict[str, np.ndarray] = {}
    wanted = mac_inputs(graph) if means is not None else set()

    def first(name, v):
        absmax[name] = max(absmax.get(name, 0.0), _finite_abs_max(graph, name, v))
        if unsigned and name not in negative and v.size and v.min() < 0:
            negative.add(name)
        if name in wanted:
            means[name] = means.get(name, 0.0) + np.sum(v, axis=0, dtype=np.float64) / n
        if one_run and method != "absmax":
            hists[name] = abs_histogram(v, HIST_BINS, absmax[name] or 1.0)

    def second(name, v):
        hists[name] = hists.get(name, 0) + abs_histogram(v, HIST_BINS, absmax[name] or 1.0)

    _run(graph, data, batch_size, first, "calibrate", progress)
    if method == "absmax":
        return absmax
    if not one_run:
        _run(graph, data, batch_size, second, f"calibrate ({method})", progress)
    wide = set(wide)
    outputs = set(graph.outputs) if output_bits else set()
    return {name: _threshold(hist, absmax[name], method, percentile,
                             output_bits if name in outputs else wide_bits if name in wide and wide_bits else bits,
                             unsigned and name not in negative)
            for name, hist in hists.items()}


def _finite_abs_max(graph, name: str, v: np.ndarray) -> float:
    """abs_max(v), or BadInput for a NaN or infinite value: the tensor's ranges (and every scale after them)
    would be NaN or infinite, and a histogram has no bin for them. Named by tensor and node, as in the ONNX."""
    m = abs_max(v)
    if math.isfinite(m):
        return m
    node = graph.producer(name)
    where = f"node {node.name!r} ({node.op})" if node is not None else "a graph input"
    raise BadInput(f"calibration: tensor {name!r} of {where} is {'NaN' if m != m else 'infinite'} on the calibration "
                   "data (float32 overflow: are the data scaled as the model expects?)")


def _run(graph, data, batch_size: int, observe, desc: str, progress: bool) -> None:
    """Every batch through the float graph. The bar counts nodes, not batches: `observe` sees every input
    and node output once a batch, so one large batch moves too (PP-OCR: 2 minutes in one batch)."""
    n = len(next(iter(data.values())))
    batches = (n + batch_size - 1) // batch_size
    steps = len(graph.inputs) + len(graph.nodes)
    with bar(total=batches * steps, desc=f"{desc}, {batches} batch{'es' if batches > 1 else ''}", unit="node",
             enabled=progress) as b:
        def counted(name, v):
            observe(name, v)
            b.update(1)

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # `first` names the tensor instead
            for batch in _batches(data, batch_size):
                run_float(graph, batch, observe=counted)


def _threshold(hist: np.ndarray, absmax: float, method: str, percentile: float, bits: int,
               non_negative: bool = False) -> float:
    edges = np.linspace(0, absmax or 1.0, HIST_BINS + 1)
    if method == "percentile":
        cdf = np.cumsum(hist) / max(hist.sum(), 1)
        i = int(np.searchsorted(cdf, percentile / 100.0))
        t = float(edges[min(i + 1, HIST_BINS)])
    else:
        t = mse_threshold(hist, edges, levels=2 ** bits - 1 if non_negative else 2 ** (bits - 1) - 1)
    return min(t, absmax) or absmax
