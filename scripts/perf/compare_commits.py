"""Before/after: one model's numba run time under two commits of this repository, in alternating
fresh processes (the same machine state for both), one thread, batch B; thread CPU time per run
(median over reps), so that other processes on a shared machine do not count.

    python scripts/perf/compare_commits.py OLD_COMMIT MODEL.cvm [MODEL.cvm ...] [--batch 1] [--rounds 3]

OLD_COMMIT's cvm/ is extracted with `git archive` into a temporary directory (the working tree is
not touched); the new side is the working tree.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CHILD = r"""
import sys, time, json, numpy as np
sys.path.insert(0, sys.argv[1])
import cvm
from cvm.interp import numba as nb
m = cvm.load(sys.argv[2]); s = m.inputs[0]; batch, reps = int(sys.argv[3]), int(sys.argv[4])
mx = (1 << (s.bits - 1)) - 1
x = {s.name: np.random.default_rng(0).integers(-mx, mx + 1, (batch,) + tuple(s.shape[1:])).astype(s.dtype)}
r = nb.prepare(m.graph, m.analysis, threads=1)
r(x); r(x)
t = []
for _ in range(reps):
    c = time.thread_time(); r(x); t.append(time.thread_time() - c)
print(json.dumps({"cvm": cvm.__file__, "median": float(np.median(t)), "steps": len(r.plan.steps)}))
"""


def run(src: str, model: str, batch: int, reps: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, src, model, str(batch), str(reps)], capture_output=True,
                         text=True, check=True, cwd="/")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("commit")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cvm-old-") as tmp:
        archive = subprocess.run(["git", "archive", a.commit, "cvm"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        print(f"{'model':<28} {'batch':>5} {'steps old':>9} {'steps new':>9} {'old ms':>9} {'new ms':>9} {'new/old':>8}")
        for model in a.models:
            path = str(Path(model).resolve())
            old, new = [], []
            for _ in range(a.rounds):
                o, n = run(tmp, path, a.batch, a.reps), run(str(ROOT), path, a.batch, a.reps)
                old.append(o["median"])
                new.append(n["median"])
            mo, mn = float(np.median(old)), float(np.median(new))
            print(f"{Path(model).stem:<28} {a.batch:>5} {o['steps']:>9} {n['steps']:>9} {mo * 1e3:>9.3f} {mn * 1e3:>9.3f} "
                  f"{mn / mo:>7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
