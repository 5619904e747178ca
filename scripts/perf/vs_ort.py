"""Before/after against onnxruntime int8 in one run: the numba backend of the working tree ("new")
and of an older commit ("old", in a child process: its cvm/ extracted with `git archive`), and
onnxruntime int8 (quantize_static as `cvm bench` does), all one thread, timed in interleaved rounds
(one call of each per round), process CPU time per call, so that the shared machine's load affects
every side alike. Prints old/int8 and new/int8 (medians) per model and batch.

    python scripts/perf/vs_ort.py OLD_COMMIT MODEL.cvm [MODEL.cvm ...] --data calib.npz [--onnx X.onnx]
        [--batches 1 8] [--seconds 3]

The int8 model is cached under .cache/perf/ort_int8/ (quantization takes minutes on ImageNet models).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CHILD = r"""
import sys, time, numpy as np
sys.path.insert(0, sys.argv[1])
import cvm
from cvm.interp import numba as nb
m = cvm.load(sys.argv[2])
r = nb.prepare(m.graph, m.analysis, threads=1)
name = m.inputs[0].name
x = None
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "input":
        x = {name: np.load(cmd[1])}
        r(x); r(x)
        print("ok", flush=True)
    elif cmd[0] == "run":
        c = time.process_time(); r(x); print(time.process_time() - c, flush=True)
"""


class OldRunner:
    """The old commit's numba backend in a child process, one call per request."""

    def __init__(self, src: str, model: str):
        self.p = subprocess.Popen([sys.executable, "-c", CHILD, src, model], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd="/")

    def ask(self, line: str) -> str:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def main(argv=None) -> int:
    from cvm.tools.bench import _ort_session, quantize_ort_int8
    from cvm.tools.bench_models import load_bench_model
    from cvm.interp import numba as nb
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("commit")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--data", required=True)
    ap.add_argument("--onnx")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    cache = ROOT / ".cache" / "perf" / "ort_int8"
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'model':<24} {'batch':>5} {'old ms':>8} {'new ms':>8} {'int8 ms':>8} {'old/int8':>8} {'new/int8':>8} "
          f"{'rounds':>6}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cvm-vs-ort-") as tmp:
        archive = subprocess.run(["git", "archive", a.commit, "cvm"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        for model in a.models:
            path = str(Path(model).resolve())
            bm = load_bench_model(path, a.data, a.onnx)
            sess = _ort_session(quantize_ort_int8(bm.onnx_path, bm.calib[:512], cache), 1)  # (reused when cached)
            runner = nb.prepare(bm.model.graph, bm.model.analysis, threads=1)
            old = OldRunner(tmp, path)
            name = bm.model.inputs[0].name
            try:
                for batch in a.batches:
                    xi = bm.batch(bm.int_inputs, batch)
                    np.save(Path(tmp) / "x.npy", xi)
                    assert old.ask(f"input {Path(tmp) / 'x.npy'}") == "ok"
                    feed = {sess.get_inputs()[0].name: bm.batch(bm.float_inputs, batch)}
                    x = {name: xi}
                    for _ in range(2):
                        runner(x)
                        sess.run(None, feed)
                    t = {"old": [], "new": [], "int8": []}
                    start = time.perf_counter()
                    while len(t["new"]) < 5 or time.perf_counter() - start < a.seconds * 3:
                        t["old"].append(float(old.ask("run")))
                        c = time.process_time()
                        runner(x)
                        t["new"].append(time.process_time() - c)
                        c = time.process_time()
                        sess.run(None, feed)
                        t["int8"].append(time.process_time() - c)
                    med = {k: float(np.median(v)) * 1e3 for k, v in t.items()}
                    row = {"model": Path(model).stem, "batch": batch, **{f"{k}_ms": v for k, v in med.items()},
                           "rounds": len(t["new"])}
                    rows.append(row)
                    print(f"{row['model']:<24} {batch:>5} {med['old']:>8.3f} {med['new']:>8.3f} {med['int8']:>8.3f} "
                          f"{med['old'] / med['int8']:>7.2f}x {med['new'] / med['int8']:>7.2f}x {len(t['new']):>6}", flush=True)
            finally:
                old.close()
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
