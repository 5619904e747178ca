"""Gas of models under schedule v1 (opsets 1, 2) and v2 (opset 3, cvm.gas_v2), and what fits a block.

    python scripts/perf/gas_report.py MODEL.cvm ... [--block 30000000] [--markdown] [--time]
    python scripts/perf/gas_report.py --adversarial [--markdown]   # cvm/tools/adversarial.py's catalogue, timed

Per model: nodes, gas per sample under v1 and v2 (the model's own gas if it is in opset 3, else
cvm.gas_v2.model_gas: the gas `mrt convert --opset 3` would give it), what one call of one sample pays
through the precompile under each schedule (cvm.gas.call_gas), the v2 gas in seconds on the reference
path at the anchor rate (60 Mgas/s: the portable one-thread time it prices), and whether one call fits
a block of --block gas (a synchronous call through the precompile in one transaction; the transaction's
own 21,000 and calldata gas are left aside). The largest model that fits is printed last.

--time also runs each model on the reference path (numba portable kernels, one thread, batch 1, thread
CPU time, median of >= 3 calls after a warm-up) and prints the rate at which what a call pays under
v2 (call v2) pays for that time, in Mgas/s, twice: as measured here, and at the reference machine's
speed (the time scaled by REFERENCE_BASELINE_S / the calibration's baseline probe timed here before and
after the models, as the calibration scales its ratios). At least the anchor (60) at reference speed
means the call is paid for at the anchor rate; the raw rate also moves with this machine's load.
"""
from __future__ import annotations

import argparse
import os
import sys


def portable_seconds(model, min_calls: int = 3, min_seconds: float = 1.0) -> float:
    """Median thread CPU seconds of one batch-1 call, portable kernels, one thread."""
    import time

    import numpy as np
    from cvm.interp import numba as nb
    runner = nb.prepare(model.graph, model.analysis, isa="portable", threads=1,
                        wholeplan="never")  # the per-step path: the slowest, which v2 is priced on
    rng = np.random.default_rng(0)
    feed = {}
    for spec in model.inputs:
        m = (1 << (spec.bits - 1)) - 1
        lo = 0 if any(n.op == "gather" and spec.name in n.inputs for n in model.graph.nodes) else -m
        feed[spec.name] = rng.integers(lo, m + 1, (1, *spec.shape[1:])).astype(spec.dtype)
    runner(feed)
    times, start = [], time.thread_time()
    while len(times) < min_calls or time.thread_time() - start < min_seconds and len(times) < 50:
        t = time.thread_time()
        runner(feed)
        times.append(time.thread_time() - t)
    return float(np.median(times))


def _catalogue():
    """(name, model) of every case of cvm/tools/adversarial.py's catalogue."""
    from cvm.tools.adversarial import CATALOGUE, build
    for name in CATALOGUE:
        yield name, build(name)[0]


def rows(paths, timed: bool = False):
    import cvm
    from cvm import gas_v2
    from cvm.gas import SCHEDULE_V1, sample_io_bytes
    for path in paths:
        name, model = path if isinstance(path, tuple) else (os.path.basename(path), cvm.load(path))
        io = sample_io_bytes(model)
        if model.graph.opset == 3:
            v2 = model.gas
            v1 = None
        else:
            v1, v2 = model.gas, gas_v2.model_gas(model)
        call_v1 = None if v1 is None else SCHEDULE_V1.call + v1 + SCHEDULE_V1.io_gas(io)
        call_v2 = gas_v2.SCHEDULE_V2.call + v2 + gas_v2.SCHEDULE_V2.io_gas(io)
        yield {"model": name, "opset": model.graph.opset, "nodes": len(model.graph.nodes),
               "v1": v1, "v2": v2, "call_v1": call_v1, "call_v2": call_v2,
               "seconds": gas_v2.seconds_at_anchor(v2),
               "measured_s": portable_seconds(model) if timed else None}
        del model


def _g(v) -> str:
    return "-" if v is None else (f"{v:,}" if v < 10_000_000 else f"{v:.3g}")


def baseline_seconds() -> float:
    """The calibration's baseline probe (gas_calibration.BASELINE) timed here like the models (median)."""
    import numpy as np
    from gas_calibration import BASELINE, PROBES, Timed, _input, _probe
    shape, make = PROBES[BASELINE][:2]
    model = _probe(make, shape)
    timed = Timed(model, _input(model, 8), 0.004)
    return float(np.median([timed.sample() for _ in range(15)]))


def print_table(paths, block: int = 30_000_000, markdown: bool = False, timed: bool = False) -> list[dict]:
    scale = 1.0
    if timed:
        from gas_calibration import REFERENCE_BASELINE_S
        before = baseline_seconds()
    out = list(rows(paths, timed))
    if timed:
        here = (before + baseline_seconds()) / 2
        scale = REFERENCE_BASELINE_S / here
        print(f"baseline probe here {here * 1e6:.1f} us (reference {REFERENCE_BASELINE_S * 1e6:.1f} us): "
              f"times x {scale:.3f} at reference speed\n")
    head = ["model", "opset", "nodes", "gas v1", "gas v2", "v2/v1", "call v1", "call v2", "v2 ms at 60 Mgas/s",
            f"fits {block / 1e6:g}M (v1 / v2)"] + (["portable ms here", "call v2 Mgas/s here", "at reference speed"] if timed else [])
    lines = []
    for r in out:
        fits = (f"{'-' if r['call_v1'] is None else ('yes' if r['call_v1'] <= block else 'no')} / "
                f"{'yes' if r['call_v2'] <= block else 'no'}")
        ratio = "-" if r["v1"] is None else f"{r['v2'] / r['v1']:.3f}"
        lines.append([r["model"], str(r["opset"]), str(r["nodes"]), _g(r["v1"]), _g(r["v2"]), ratio,
                      _g(r["call_v1"]), _g(r["call_v2"]), f"{r['seconds'] * 1e3:.3g}", fits]
                     + ([f"{r['measured_s'] * 1e3:.3g}", f"{r['call_v2'] / r['measured_s'] / 1e6:.0f}",
                        f"{r['call_v2'] / (r['measured_s'] * scale) / 1e6:.0f}"] if timed else []))
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
        print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
        for line in lines:
            print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
    for key, name in (("call_v1", "v1"), ("call_v2", "v2")):
        fit = [r for r in out if r[key] is not None and r[key] <= block]
        best = max(fit, key=lambda r: r[key], default=None)
        print(f"largest model one {block:,}-gas block runs synchronously under {name}: "
              + (f"{best['model']} ({best[key]:,} gas a call)" if best else "none of these"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--adversarial", action="store_true", help="the adversarial catalogue instead, timed")
    ap.add_argument("--block", type=int, default=30_000_000)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--time", action="store_true", help="also time each model on the portable path (see above)")
    a = ap.parse_args(argv)
    if a.adversarial:
        print_table(list(_catalogue()), a.block, a.markdown, True)
        return 0
    if not a.models:
        ap.error("name models, or --adversarial")
    print_table(a.models, a.block, a.markdown, a.time)
    return 0


if __name__ == "__main__":
    sys.exit(main())
