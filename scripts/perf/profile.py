"""Per-step profile of the numba backend: where one model's run spends its time, one thread.

    .venv/bin/python scripts/perf/profile.py MODEL.cvm [--batch 1] [--reps 20] [--top 25] [--data DATA.npz]

Inputs: random integers within each input's bits, or with --data the first `batch` samples of DATA.npz's
arrays named after the inputs (token ids, which random values would send out of the vocabulary).

Each step of the plan (cvm.interp.numba_kernels.plan) is bound to buffers as a run binds it, and its
kernel calls are timed separately (median over reps of this thread's CPU time, so that other
processes on a shared machine do not count); steps are grouped by label (the op, the MAC
path and what its output step fused). Prints the share of each group and the slowest steps. The
sum of the steps is compared with a whole run: the difference is the per-call dispatch overhead.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np


def aligned_empty(shape, dtype) -> np.ndarray:
    """np.empty on a cache-line boundary, as the runner's buffers are (buffers.ALIGN): np.empty's large
    arrays start 16 bytes into a page, which splits the kernels' 64-byte stores across cache lines."""
    from cvm.interp.numba_kernels.buffers import ALIGN
    dtype = np.dtype(dtype)
    raw = np.empty(int(np.prod(shape)) * dtype.itemsize + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return np.ndarray(shape, dtype, buffer=raw, offset=start)


def bind_steps(runner, batch: int, inputs: dict):
    """[(step, calls)] for one batch size, with the inputs copied in (as numba._Bound does)."""
    p = runner.plan
    env = {i.name: aligned_empty((batch,) + p.values[i.name].stored, p.values[i.name].dtype) for i in p.graph.inputs}
    for name, x in inputs.items():
        np.copyto(env[name], x, casting="unsafe")
    out = []
    for step in p.steps:
        ins = [env[n] for n in step.inputs]
        if (v := step.bound_view(ins)) is not None:
            env[step.output] = v
            continue
        o = aligned_empty((batch,) + step.value.stored, step.value.dtype)
        out.append((step, step.bind(ins, o)))
        env[step.output] = o
    return out


def _inputs(model, batch: int, data: str | None) -> dict:
    if data is not None:
        with np.load(data) as d:
            return {s.name: model.quantize_input(d[s.name][:batch], s.name) for s in model.inputs}
    rng = np.random.default_rng(0)
    return {s.name: rng.integers(-(1 << (s.bits - 1)) + 1, 1 << (s.bits - 1), (batch,) + tuple(s.shape[1:])).astype(s.dtype)
            for s in model.inputs}


def profile(path: str, batch: int, reps: int, top: int, isa: str = "auto", data: str | None = None) -> None:
    import cvm
    from cvm.interp import numba as nb
    model = cvm.load(path)
    inputs = _inputs(model, batch, data)
    runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=1)
    runner(inputs)
    steps = bind_steps(runner, batch, inputs)
    times = np.zeros((reps, len(steps)))
    whole = []
    for r in range(reps):
        for i, (_, calls) in enumerate(steps):
            t = time.thread_time()
            for fn, args in calls:
                fn(*args)
            times[r, i] = time.thread_time() - t
        t = time.thread_time()
        runner(inputs)
        whole.append(time.thread_time() - t)
    med = np.median(times, axis=0)
    total = med.sum()
    groups = defaultdict(lambda: [0.0, 0])
    for (step, _), t in zip(steps, med):
        key = step.label.split("(")[0]
        groups[key][0] += t
        groups[key][1] += 1
    print(f"{path}: batch {batch}, {len(model.graph.nodes)} nodes, {len(steps)} steps, "
          f"{sum(len(c) for _, c in steps)} calls; sum of steps {total * 1e3:.3f} ms, "
          f"whole run median {np.median(whole) * 1e3:.3f} ms")
    print(f"{'group':<48} {'steps':>5} {'ms':>9} {'share':>6}")
    for key, (t, n) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{key:<48} {n:>5} {t * 1e3:>9.3f} {100 * t / total:>5.1f}%")
    print("slowest steps:")
    for i in np.argsort(-med)[:top // 2]:
        step = steps[i][0]
        print(f"  {med[i] * 1e3:8.3f} ms  {str(step)[:110]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--top", type=int, default=24)
    ap.add_argument("--isa", default="auto")
    ap.add_argument("--data", help="DATA.npz with an array per model input (default: random inputs)")
    a = ap.parse_args(argv)
    profile(a.model, a.batch, a.reps, a.top, a.isa, a.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
