"""A/B in one process: one model's numba plan with the int16 VNNI paths (dense16.py: dense and matmul "vnni16")
and the same plan without them (the portable int32 kernels), checked equal, timed in interleaved rounds, thread
CPU time, one thread. --dense-only keeps the int16 matmul in both.

    .venv/bin/python scripts/perf/ab_dense16.py MODEL.cvm DATA.npz BATCH ROUNDS

DATA.npz holds one array per model input, named after it (integer inputs such as token ids as they are)."""
import statistics
import sys
import time

import numpy as np

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import dense16, matmul
dense_only = "--dense-only" in sys.argv
args = [a for a in sys.argv if a != "--dense-only"]
m = cvm.load(args[1]); data = np.load(args[2]); batch = int(args[3]); rounds = int(args[4])
inputs = {s.name: m.quantize_input(data[s.name][:batch], s.name) for s in m.inputs}
new = nb.prepare(m.graph, m.analysis, isa="vnni", threads=1)
orig = dense16.eligible, dense16.matmul_vnni16
dense16.eligible = lambda *a, **k: False
if not dense_only:
    dense16.matmul_vnni16 = matmul.matmul_i32
old = nb.prepare(m.graph, m.analysis, isa="vnni", threads=1)
dense16.eligible, dense16.matmul_vnni16 = orig
a, b = old(inputs), new(inputs)
assert all(np.array_equal(a[k], b[k]) for k in a)
print("vnni16 steps:", sum("vnni16" in str(s) for s in new.plan.steps), "of", len(new.plan.steps))
t = {"old": [], "new": []}
for _ in range(rounds):
    for name, r in (("old", old), ("new", new)):
        c = time.thread_time(); r(inputs); t[name].append(time.thread_time() - c)
o, n = statistics.median(t["old"]) * 1e3, statistics.median(t["new"]) * 1e3
print(f"{args[1]} batch {batch}: without vnni16 {o:.3f} ms, with {n:.3f} ms, ratio {n / o:.3f}")
