"""A/B of one model's numba run with backend switches off and on, in one process: each side is
prepared with the module flags set (they are read when a batch size is bound), checked equal to the
reference interpreter (or, with --no-ref, to each other), then timed in interleaved rounds, one
thread, this thread's CPU time, so that a shared machine's load affects both sides alike.

    python scripts/perf/ab_flags.py MODEL.cvm MODULE.FLAG[,MODULE.FLAG...] [--isa auto] [--batches 1 8]
        [--calls 2000 500] [--rounds 7] [--no-ref] [--data inputs.npz [--prefix P]]

e.g. the whole-plan runner's small-call twins (rows_lean.py):

    python scripts/perf/ab_flags.py /tmp/lstm.cvm cvm.interp.numba_kernels.rows_lean.LEAN
"""
from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("flags", help="comma-separated module.attribute booleans, all False (A) or all True (B)")
    ap.add_argument("--isa", default="auto")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--calls", type=int, nargs="+", default=[2000, 500], help="calls a round, per batch")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-ref", action="store_true", help="compare A and B with each other only (large models)")
    ap.add_argument("--data", help="npz of float inputs by name (quantized; models of several inputs); default: random")
    ap.add_argument("--prefix", default="", help="the npz names are PREFIX + input name (e.g. held_)")
    a = ap.parse_args()
    import cvm
    from cvm.interp import numba as nb
    targets = []
    for spec in a.flags.split(","):
        mod, _, attr = spec.rpartition(".")
        if not mod:
            raise SystemExit(f"flag {spec!r}: expected module.attribute")
        m = importlib.import_module(mod)
        if not hasattr(m, attr):
            raise SystemExit(f"flag {spec!r}: module {mod} has no attribute {attr}")
        targets.append((m, attr))
    model = cvm.load(a.model)
    inp = model.inputs[0]
    lim = (1 << (inp.bits - 1)) - 1
    for i, batch in enumerate(a.batches):
        if a.data:
            data = np.load(a.data)
            feed = {s.name: model.quantize_input(data[a.prefix + s.name][:batch], s.name) for s in model.inputs}
        else:
            feed = {inp.name: np.random.default_rng(batch).integers(-lim, lim + 1, (batch,) + tuple(inp.shape[1:]))
                    .astype(inp.dtype)}
        sides = []
        for flag in (False, True):
            for m, attr in targets:
                setattr(m, attr, flag)
            r = nb.prepare(model.graph, model.analysis, isa=a.isa, threads=1)
            sides.append((r, r(feed)))
        want = sides[0][1] if a.no_ref else model.runner("reference")(feed)
        equal = all(np.array_equal(out[k], want[k]) for _, out in sides for k in want)
        n = a.calls[min(i, len(a.calls) - 1)]
        times = [[], []]
        for _ in range(a.rounds):
            for side, (r, _) in enumerate(sides):
                t = time.thread_time()
                for _ in range(n):
                    r(feed)
                times[side].append((time.thread_time() - t) / n * 1e6)
        off, on = np.median(times[0]), np.median(times[1])
        print(f"{Path(a.model).name} isa={a.isa} batch {batch}: off {off:.1f} us, on {on:.1f} us, "
              f"ratio {on / off:.3f}, equal {'(A, B)' if a.no_ref else 'to reference'}: {equal}")


if __name__ == "__main__":
    main()
