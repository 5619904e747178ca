"""A converted model's bound buffer sets: the bytes its activations would take with one buffer a step,
against the set the numba backend binds (activations packed by liveness, numba_kernels/buffers.py, plus
the whole-plan program's arena with its copy of the constants), and whether that set runs as a program.

    python scripts/perf/set_sizes.py MODEL.cvm [BATCH ...]
"""
from __future__ import annotations

import sys

import numpy as np


def main(argv=None) -> int:
    import cvm
    from cvm.interp import numba as nb
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    model = cvm.load(argv[0])
    runner = nb.prepare(model.graph, model.analysis, threads=1)
    p = runner.plan
    one = sum(int(np.prod(s.value.stored)) * np.dtype(s.value.dtype).itemsize + s.scratch for s in p.steps)
    for batch in [int(b) for b in argv[1:]] or [1, 8]:
        b = nb._Bound(p, runner.outputs, batch, "auto")
        print(f"batch {batch}: one buffer a step {one * batch / 2**20:.0f} MiB, bound set {b.nbytes / 2**20:.0f} MiB, "
              f"whole-plan segments {b.segments}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
