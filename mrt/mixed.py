"""Mixed precision under a latency budget: wide (QuantConfig.wide_bits) activations (QuantConfig.wide_tensors) only where
the per-layer measurement says the error enters, as long as the numba backend stays within the
user's budget. Gas does not price activation width (a 12-bit tensor costs the gas of an 8-bit one),
so the budget is the measured latency; the report gives both.

The conversion's front stages (import .. calibrate) run once; each trial re-runs quantize + verify."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

import cvm
from mrt import pipeline
from mrt.layer_report import LayerError, layer_errors

TRIALS = 8  # widest layers tried, worst first
LATENCY_RUNS = 7  # a latency is the fastest of these runs of one calibration batch
BATCH = 64  # calibration samples timed
ERROR_SAMPLES = 256  # calibration samples the errors are measured on


@dataclass(frozen=True)
class Step:
    tensor: str  # the float tensor given wide activations ("" for the 8-bit start)
    injected: float  # its error increase over its input's (relative L2), when ranked
    kept: bool  # within the budget, so kept
    latency_ms: float
    gas: int
    output_rel_l2: float  # of the model's output after this step


@dataclass(frozen=True)
class MixedResult:
    model: cvm.Model
    budget: float
    steps: list[Step]

    @property
    def wide(self) -> list[str]:
        return [s.tensor for s in self.steps if s.kept and s.tensor]


def injected_error(layers: list[LayerError], graph) -> list[tuple[str, float]]:
    """Each tensor's error minus its first float input's: where quantization adds error, worst first."""
    err = {e.name: e.rel_l2 for e in layers}
    producer = {n.outputs[0]: n for n in graph.nodes}
    gains = []
    for e in layers:
        node = producer.get(e.name)
        before = max((err.get(i, 0.0) for i in node.inputs if i in err), default=0.0) if node else 0.0
        gains.append((e.name, e.rel_l2 - before))
    return sorted(gains, key=lambda g: -g[1])


def latency_ms(model: cvm.Model, x: np.ndarray) -> float:
    xq = model.quantize_input(x)
    model.run(xq, backend="numba")  # compile and bind once
    times = []
    for _ in range(LATENCY_RUNS):
        t0 = time.perf_counter()
        model.run(xq, backend="numba")
        times.append(time.perf_counter() - t0)
    return 1000 * min(times)


def convert_mixed(onnx_model, calibration, latency_budget: float, **options) -> MixedResult:
    """Convert at 8 bits, then widen the tensors that inject the most error, one at a time, keeping
    each that leaves the numba latency within (1 + latency_budget) x the 8-bit model's."""
    c = pipeline.prepare(onnx_model, calibration, progress=False, **options)
    data = next(iter(c.data.values()))
    x, xe = data[:BATCH], data[:ERROR_SAMPLES]
    model = pipeline.finish(c, wide_tensors=tuple(c.options.overrides.get("wide_tensors", ())))  # the 8-bit start (no
    # measured width: mrt.width_choice applies only where the caller fixed no tensor widths)
    base = latency_ms(model, x)
    layers = layer_errors(model, xe, c.graph)
    out_err = _output_error(layers)
    steps = [Step("", 0.0, True, base, model.gas, out_err)]
    wide: list[str] = []
    already = tuple(c.options.overrides.get("wide_tensors", ()))  # a recurrent model's cells (mrt.recurrent_precision)
    ranked = [(n, g) for n, g in injected_error(layers, c.graph) if n not in already][:TRIALS]
    wide_thr = pipeline.wide_thresholds(c, [n for n, _ in ranked])  # each trial's tensor calibrated at its new bits
    for name, gain in ranked:
        tried = wide + [name]
        trial = pipeline.finish(replace(c, thresholds={**c.thresholds, **{t: wide_thr[t] for t in tried if t in wide_thr}}),
                                wide_tensors=already + tuple(tried))
        lat = latency_ms(trial, x)
        trial_err = _output_error(layer_errors(trial, xe, c.graph))
        kept = lat <= base * (1 + latency_budget) and trial_err < out_err
        steps.append(Step(name, gain, kept, lat, trial.gas, trial_err))
        if kept:
            wide.append(name)
            model, out_err = trial, trial_err
    return MixedResult(model, latency_budget, steps)


def _output_error(layers: list[LayerError]) -> float:
    return layers[-1].rel_l2 if layers else 0.0


def report(result: MixedResult) -> str:
    """The steps as a table: which tensor was tried, whether it was kept, and what it cost."""
    from cvm.report import table
    base = result.steps[0]
    rows = [[s.tensor or "(start: no wide tensor)", f"{s.injected:.4f}" if s.tensor else "-",
             "kept" if s.kept and s.tensor else ("over budget" if s.latency_ms > base.latency_ms * (1 + result.budget)
                                                  else ("no gain" if s.tensor else "start")),
             f"{s.latency_ms:.2f}", f"{s.latency_ms / base.latency_ms:.2f}x", str(s.gas), f"{s.output_rel_l2:.5f}"]
            for s in result.steps]
    head = ["tensor (wide activations)", "injected error", "decision", "latency ms", "vs 8-bit", "gas", "output rel. L2"]
    return (f"mixed precision: {len(result.wide)} tensor(s) at wide bits within a {100 * result.budget:.0f}% latency "
            f"budget (numba, batch {BATCH})\n" + table(head, rows, "lrlrrrr"))
