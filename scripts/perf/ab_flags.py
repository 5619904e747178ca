"""A/B of one model's numba run with Tuning fields changed, in one process: side A is prepared with the
fields given (a switch named alone: False; FIELD=VALUE: that value), side B with the defaults
(cvm.interp.numba_kernels.tuning.DEFAULT_TUNING); each is checked equal to the reference interpreter (or,
with --no-ref, to each other), then timed in interleaved rounds, one thread, this thread's CPU time, so
that a shared machine's load affects both sides alike.

    python scripts/perf/ab_flags.py MODEL.cvm FIELD[=VALUE][,FIELD[=VALUE]...] [--isa auto] [--batches 1 8]
        [--calls 2000 500] [--rounds 7] [--no-ref] [--data inputs.npz [--prefix P]]

e.g. the whole-plan runner's small-call twins (rows_lean.py), or a threshold:

    python scripts/perf/ab_flags.py /tmp/lstm.cvm lean
    python scripts/perf/ab_flags.py /tmp/lstm.cvm gemv_max_rows=16
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np


def side_a(spec: str):
    """The Tuning of side A: the defaults with the fields of spec (comma-separated FIELD[=VALUE]) changed."""
    from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING, Tuning
    kinds = {f.name: f.type for f in dataclasses.fields(Tuning)}
    changes = {}
    for item in spec.split(","):
        name, eq, value = item.partition("=")
        if name not in kinds:
            raise SystemExit(f"{name!r} is no Tuning field; choose from {', '.join(kinds)}")
        if kinds[name] == "bool":
            if eq and value not in ("0", "1", "False", "True"):
                raise SystemExit(f"{name}: a switch takes 0/1 or False/True, got {value!r}")
            changes[name] = value in ("1", "True")
        elif not eq:
            raise SystemExit(f"{name}: a threshold needs a value ({name}=N)")
        else:
            changes[name] = int(value, 0)
    return dataclasses.replace(DEFAULT_TUNING, **changes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("fields", help="comma-separated FIELD[=VALUE] of Tuning for side A (a switch alone: False)")
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
    tunings = (side_a(a.fields), nb.DEFAULT_TUNING)
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
        for tuning in tunings:
            r = nb.prepare(model.graph, model.analysis, isa=a.isa, threads=1, tuning=tuning)
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
        print(f"{Path(a.model).name} isa={a.isa} batch {batch}: A ({a.fields}) {off:.1f} us, B (defaults) {on:.1f} us, "
              f"ratio B/A {on / off:.3f}, equal {'(A, B)' if a.no_ref else 'to reference'}: {equal}")


if __name__ == "__main__":
    main()
