"""Thread scaling of the numba backend: the same model at one batch size on 1, 2, 4, ... threads,
timed in interleaved rounds (one call of each configuration per round), wall clock, so that a
change in the machine's load affects every configuration alike. Two ways to use the threads:
"parts" (split="auto": the batch cut into parts that threads run whole) and "ops" (every large op's
output rows split between threads, synchronised per op). Outputs are checked equal first.

    python scripts/perf/scaling.py MODEL.cvm [MODEL.cvm ...] [--batch 64] [--threads 1 2] [--rounds 10]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def measure(path: str, batch: int, counts: list[int], rounds: int) -> list[dict]:
    import cvm
    from cvm.interp import numba as nb
    m = cvm.load(path)
    spec = m.inputs[0]
    mx = (1 << (spec.bits - 1)) - 1
    x = {spec.name: np.random.default_rng(0).integers(-mx, mx + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)}
    configs = {}
    for t in counts:
        configs[(t, "parts")] = nb.prepare(m.graph, m.analysis, threads=t)
        if t > 1:
            configs[(t, "ops")] = nb.prepare(m.graph, m.analysis, threads=t, split="ops")
    want = configs[(counts[0], "parts")](x)
    for key, runner in configs.items():
        got = runner(x)
        assert all(np.array_equal(got[n], want[n]) for n in want), f"{key}: outputs differ"
        runner(x)
    wall = {k: [] for k in configs}
    for _ in range(rounds):
        for key, runner in configs.items():
            t0 = time.perf_counter()
            runner(x)
            wall[key].append(time.perf_counter() - t0)
    base = np.median(wall[(counts[0], "parts")])
    return [{"model": os.path.basename(path), "batch": batch, "threads": t, "mode": mode,
             "median_ms": 1e3 * float(np.median(v)), "min_ms": 1e3 * min(v),
             "speedup": float(base / np.median(v))} for (t, mode), v in wall.items()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args(argv)
    from cvm.interp import numba as nb
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()}, isas {nb.available_isas()}")
    print(f"{'model':<24} {'batch':>5} {'threads':>7} {'mode':<6} {'median ms':>10} {'min ms':>9} {'speedup':>8}")
    for path in a.models:
        for r in measure(path, a.batch, a.threads, a.rounds):
            print(f"{r['model']:<24} {r['batch']:>5} {r['threads']:>7} {r['mode']:<6} {r['median_ms']:>10.2f} "
                  f"{r['min_ms']:>9.2f} {r['speedup']:>7.2f}x", flush=True)
    print(f"load after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
