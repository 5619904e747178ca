"""A/B in one process: one model's numba plan with the int16 VNNI dense path (dense16.py, "vnni16") and the same
plan without it (dense16.eligible -> False: the portable int32 GEMM), checked equal, timed in interleaved rounds,
thread CPU time, one thread.

    .venv/bin/python scripts/perf/ab_dense16.py MODEL.cvm DATA.npz BATCH ROUNDS

DATA.npz holds one array per model input, named after it (integer inputs such as token ids as they are)."""
import statistics
import sys
import time

import numpy as np

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import dense16
m = cvm.load(sys.argv[1]); data = np.load(sys.argv[2]); batch = int(sys.argv[3]); rounds = int(sys.argv[4])
inputs = {s.name: m.quantize_input(data[s.name][:batch], s.name) for s in m.inputs}
new = nb.prepare(m.graph, m.analysis, isa="vnni", threads=1)
orig = dense16.eligible
dense16.eligible = lambda *a, **k: False
old = nb.prepare(m.graph, m.analysis, isa="vnni", threads=1)
dense16.eligible = orig
a, b = old(inputs), new(inputs)
assert all(np.array_equal(a[k], b[k]) for k in a)
print("vnni16 steps:", sum("vnni16" in str(s) for s in new.plan.steps), "of", len(new.plan.steps))
t = {"old": [], "new": []}
for _ in range(rounds):
    for name, r in (("old", old), ("new", new)):
        c = time.thread_time(); r(inputs); t[name].append(time.thread_time() - c)
o, n = statistics.median(t["old"]) * 1e3, statistics.median(t["new"]) * 1e3
print(f"{sys.argv[1]} batch {batch}: without vnni16 {o:.3f} ms, with {n:.3f} ms, ratio {n / o:.3f}")
