"""Benchmarks: CVM (numba and reference backends) against onnxruntime float32 and int8, start-up
times of the numba backend, and the int8 GEMM throughput of the dense kernel against the machine's
measured peak. docs/performance.md records the results and the machine.

    cvm bench [MODEL ...] [--batches 1 64] [--threads N ...] [--json out.json]
    python -m cvm.tools.bench resnet_cifar mnist_cnn
    cvm bench .cache/models/resnet50_224.cvm --data .cache/models/calib_224_64.npz --batches 1 8 --threads 1 2

A MODEL (cvm/tools/bench_models.py) is a fixture name (fixtures/models/NAME.cvm, compared with onnxruntime on NAME.onnx, the int8
model calibrated on fixtures/data/NAME_calib.npz), a path to a .cvm file, or one of the hand-built
integer models `lenet_int8` / `resnet_int8` (random int8 weights, same architectures as the
mnist_cnn / resnet_cifar fixtures, whose .onnx files onnxruntime then runs when present).

API: run_bench(models, batches=(1, 64), ...) -> rows (dicts), print_table(rows); for the CLI,
register(subparsers), or add_arguments(parser) + run(args), or main(argv).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import bench_adversarial
from .bench_models import (DEFAULT_MODELS, FIXTURES, SYNTHETIC, BenchModel, lenet_int8,  # noqa: F401
                           load_bench_model, resnet_int8)
from .timing import machine, time_calls

BACKENDS = ("numba", "reference", "ort-f32", "ort-int8")


def _ort_session(path, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # errors only (quantized graphs carry unused initializers)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def quantize_ort_int8(onnx_path: Path, calib: np.ndarray | dict, out_dir: Path, input_name: str = "x") -> Path:
    """onnxruntime static quantization: QDQ, per channel, activations uint8, weights int8. calib: the
    one input's array (named input_name) or {input name: array} for several."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    named = calib if isinstance(calib, dict) else {input_name: calib}
    samples = len(next(iter(named.values())))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{k: v[i:i + 32] for k, v in named.items()} for i in range(0, samples, 32)])

        def get_next(self):
            return next(self.batches, None)

    out = out_dir / f"{Path(onnx_path).stem}_int8.onnx"
    if out.exists():  # the same model timed again (another thread count)
        return out
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_static warns on the root logger about pre-processing
    try:
        quantize_static(str(onnx_path), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    finally:
        root.setLevel(level)
    return out


def _latency_row(name, batch, backend, times, threads, cpu=None):
    """Wall-clock median and minimum; cpu: process CPU seconds per call (all threads), whose median
    is the load-independent figure when the machine is shared."""
    med = float(np.median(times))
    row = {"kind": "latency", "model": name, "batch": batch, "backend": backend, "threads": threads,
           "median_ms": med * 1e3, "min_ms": min(times) * 1e3, "per_second": batch / med, "reps": len(times)}
    row["cpu_ms"] = float(np.median(cpu)) * 1e3 if cpu else None
    return row


def interleaved(fns: dict, min_seconds: float, min_rounds: int = 5, max_rounds: int = 5000) -> dict:
    """Per-call seconds of each callable, timed in rounds (one call of each per round), so that a
    change in the machine's load affects every backend alike."""
    for fn in fns.values():
        fn()
        fn()
    times, cpu = {k: [] for k in fns}, {k: [] for k in fns}
    start = time.perf_counter()
    while min(map(len, times.values())) < max_rounds and (
            min(map(len, times.values())) < min_rounds or time.perf_counter() - start < min_seconds * len(fns)):
        for k, fn in fns.items():
            c, t = time.process_time(), time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
    return {k: (times[k], cpu[k]) for k in fns}


def bench_latency(bm: BenchModel, batches, threads: int, backends, min_seconds: float, work: Path) -> list[dict]:
    from ..interp import numba as nb
    from ..interp import reference
    rows = []
    model, name = bm.model, bm.model.inputs[0].name
    runner = nb.prepare(model.graph, model.analysis, threads=threads)
    ort_models = {}
    if bm.onnx_path is not None and bm.float_inputs is not None:
        if "ort-f32" in backends:
            ort_models["ort-f32"] = bm.onnx_path
        if "ort-int8" in backends and bm.calib is not None:
            ort_models["ort-int8"] = quantize_ort_int8(bm.onnx_path, bm.calib[:512], work)
    sessions = {k: _ort_session(path, threads) for k, path in ort_models.items()}
    for batch in batches:
        x = {name: bm.batch(bm.int_inputs, batch)}
        fns = {}
        if "numba" in backends:
            fns["numba"] = lambda x=x: runner(x)
        for backend, sess in sessions.items():
            feed = {sess.get_inputs()[0].name: bm.batch(bm.float_inputs, batch)}
            fns[backend] = lambda sess=sess, feed=feed: sess.run(None, feed)
        for backend, (t, cpu) in interleaved(fns, min_seconds).items():
            rows.append(_latency_row(bm.name, batch, backend, t, threads, cpu))
        if "reference" in backends:
            t = time_calls(lambda x=x: reference.run(model.graph, model.analysis, x), min_seconds, min_reps=3, max_reps=50)
            rows.append(_latency_row(bm.name, batch, "reference", t, 1))
    order = {b: i for i, b in enumerate(BACKENDS)}
    return sorted(rows, key=lambda r: (r["batch"], order[r["backend"]]))


# ------------------------------------------------------------------ start-up

_STARTUP = """
import time
t0 = time.perf_counter()
import sys, json, numpy as np, cvm
from cvm.tools.bench_models import load_bench_model
bm = load_bench_model(sys.argv[1])
t1 = time.perf_counter()
bm.model.run(bm.int_inputs[:1], backend="numba")
t2 = time.perf_counter()
print(json.dumps({"imports_and_load": t1 - t0, "prepare_and_first_run": t2 - t1}))
"""


# The least any numba backend pays in a fresh process: numpy and numba imported, one trivial cached
# kernel loaded and called (numba then loads its typing registries).
_NUMBA_FLOOR = """
import time
t0 = time.perf_counter()
import sys, json, numpy as np, numba
t1 = time.perf_counter()

@numba.njit(cache=True)
def one(x):
    return x + 1

one(np.int64(1))
t2 = time.perf_counter()
print(json.dumps({"imports_and_load": t1 - t0, "prepare_and_first_run": t2 - t1}))
"""


def _children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _startup_runs(runs: list[tuple[str, str, list[str]]], cache_dir: Path) -> list[dict]:
    rows = []
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    for label, name, argv in runs:
        t, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=600)
        wall, cpu = time.perf_counter() - t, _children_cpu() - cpu
        if proc.returncode != 0:
            raise RuntimeError(f"start-up run failed: {proc.stderr[-2000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append({"kind": "startup", "model": name, "start": label, "process_s": wall, "process_cpu_s": cpu,
                     "imports_and_load_s": r["imports_and_load"], "prepare_and_first_run_s": r["prepare_and_first_run"],
                     "total_s": r["imports_and_load"] + r["prepare_and_first_run"]})
    return rows


def bench_startup(model_name: str, cache_dir: Path) -> list[dict]:
    """Fresh subprocesses: one with an empty NUMBA_CACHE_DIR (JIT cold start), then one with the cache
    it left (cached start). Times from the first line of the script (interpreter start-up excluded)."""
    argv = ["-c", _STARTUP, model_name]
    return _startup_runs([("cold", model_name, argv), ("cached", model_name, argv)], cache_dir)


def bench_numba_floor(cache_dir: Path) -> list[dict]:
    """The same two starts for a one-line kernel: what numba costs before any of this backend's work."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    script = cache_dir / "numba_floor.py"  # a file: numba caches only functions defined in one
    script.write_text(_NUMBA_FLOOR)
    return _startup_runs([("cold", "numba floor", [str(script)]), ("cached", "numba floor", [str(script)])], cache_dir)


# ------------------------------------------------------------------ GEMM

def bench_gemm(threads: int, m: int = 1024, k: int = 1024, n: int = 1024, min_seconds: float = 1.0) -> list[dict]:
    """The dense kernel (through the runner: uint8 packing + GEMM + requant) on an int8 m x k by k x n
    product, against the register-only vpdpbusd peak with the same threads. Two figures each: from
    wall-clock time, and from CPU time (ops / (CPU seconds / threads): what the threads do on cores
    of their own, the honest figure when other processes share the machine)."""
    import cvm
    from ..interp import numba as nb
    rng, b = np.random.default_rng(3), cvm.GraphBuilder()
    x = b.input("x", (k,), 8)
    y = b.op("dense", x, b.const(rng.integers(-127, 128, (n, k))), b.const(rng.integers(-999, 999, n)))
    model = b.build(b.op("requant", y, b.const(rng.integers(1 << 14, 1 << 15, n)), shift=30, bits=8, axis=0))
    xs = {"x": rng.integers(-127, 128, (m, k)).astype(np.int8)}
    rows, ops = [], 2 * m * k * n
    for isa in nb.available_isas():
        runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=threads)
        wall, cpu = interleaved({"dense": lambda runner=runner: runner(xs)}, min_seconds)["dense"]
        t, c = float(np.median(wall)), float(np.median(cpu))
        rows.append({"kind": "gemm", "isa": isa, "threads": threads, "m": m, "k": k, "n": n,
                     "gops": ops / t / 1e9, "gops_cpu": ops * threads / c / 1e9, "ms": t * 1e3})
    if "vnni" in nb.available_isas():
        from ..interp.numba_kernels.peak import vnni_peak_gops
        peak, peak_cpu = vnni_peak_gops(threads), vnni_peak_gops(1, clock=time.process_time) * threads
        for r in rows:
            r.update(peak_gops=peak, fraction_of_peak=r["gops"] / peak, peak_gops_cpu=peak_cpu,
                     fraction_of_peak_cpu=r["gops_cpu"] / peak_cpu)
    return rows


# ------------------------------------------------------------------ driver and table

def run_bench(models, batches=(1, 64), threads=None, backends=BACKENDS, startup: bool = True,
              gemm: bool = True, min_seconds: float = 1.0, log=print, data=None, onnx=None) -> list[dict]:
    """threads: one count or several (each model is timed with each; default: all CPUs); data, onnx:
    an npz of float inputs (and calibration) and the ONNX source, for .cvm paths (bench_models)."""
    from ..interp.numba_kernels.threads import default_threads
    counts = [threads] if isinstance(threads, int) else list(threads or [default_threads()])
    threads = counts[-1]
    rows = []
    with tempfile.TemporaryDirectory(prefix="cvm-bench-") as tmp:
        work = Path(tmp)
        for i, name in enumerate(models):
            bm = load_bench_model(name, data, onnx)
            for t in counts:
                log(f"[bench] {name}: latency, {t} thread(s)")
                rows += bench_latency(bm, batches, t, backends, min_seconds, work)
            if startup:
                log(f"[bench] {name}: start-up (subprocesses, NUMBA_CACHE_DIR empty then warm)")
                rows += bench_startup(name, work / f"numba-cache-{i}")
        if startup and models:
            log("[bench] numba floor: start-up of a one-line cached kernel")
            rows += bench_numba_floor(work / "numba-cache-floor")
        if gemm:
            log("[bench] int8 GEMM")
            rows += bench_gemm(threads, min_seconds=min_seconds)
    return rows


def print_table(rows: list[dict], out=sys.stdout) -> None:
    lat = [r for r in rows if r["kind"] == "latency"]
    if lat:
        ref = {(r["model"], r["batch"], r["threads"]): r["median_ms"] for r in lat if r["backend"] == "ort-int8"}
        cref = {(r["model"], r["batch"], r["threads"]): r["cpu_ms"] for r in lat if r["backend"] == "ort-int8"}
        print(f"{'model':<20} {'batch':>5} {'backend':<10} {'threads':>7} {'median ms':>10} {'min ms':>9} "
              f"{'samples/s':>10} {'vs ort-int8':>11} {'cpu ms':>9} {'cpu vs int8':>11}", file=out)
        for r in lat:
            key = (r["model"], r["batch"], r["threads"])
            base, cbase = ref.get(key), cref.get(key)
            ratio = f"{r['median_ms'] / base:.2f}x" if base else "-"
            cpu = f"{r['cpu_ms']:.3f}" if r.get("cpu_ms") is not None else "-"
            cratio = f"{r['cpu_ms'] / cbase:.2f}x" if cbase and r.get("cpu_ms") is not None else "-"
            print(f"{r['model']:<20} {r['batch']:>5} {r['backend']:<10} {r['threads']:>7} {r['median_ms']:>10.3f} "
                  f"{r['min_ms']:>9.3f} {r['per_second']:>10.0f} {ratio:>11} {cpu:>9} {cratio:>11}", file=out)
    st = [r for r in rows if r["kind"] == "startup"]
    if st:
        print(f"\n{'model':<14} {'start':<7} {'imports+load s':>14} {'prepare+1st run s':>17} {'total s':>8} "
              f"{'process s':>9} {'process cpu s':>13}", file=out)
        for r in st:
            print(f"{r['model']:<14} {r['start']:<7} {r['imports_and_load_s']:>14.2f} "
                  f"{r['prepare_and_first_run_s']:>17.2f} {r['total_s']:>8.2f} {r['process_s']:>9.2f} "
                  f"{r['process_cpu_s']:>13.2f}", file=out)
    gm = [r for r in rows if r["kind"] == "gemm"]
    if gm:
        print(f"\n{'int8 GEMM':<10} {'isa':<9} {'threads':>7} {'m x k x n':>16} {'GOPS':>7} {'peak':>7} {'of peak':>8}"
              f" {'GOPS(cpu)':>9} {'peak(cpu)':>9} {'of peak':>8}", file=out)
        for r in gm:
            has = "peak_gops" in r
            cols = [f"{r['peak_gops']:.0f}", f"{100 * r['fraction_of_peak']:.0f}%", f"{r['peak_gops_cpu']:.0f}",
                    f"{100 * r['fraction_of_peak_cpu']:.0f}%"] if has else ["-"] * 4
            dims = f"{r['m']}x{r['k']}x{r['n']}"
            print(f"{'dense':<10} {r['isa']:<9} {r['threads']:>7} {dims:>16} {r['gops']:>7.0f} {cols[0]:>7} "
                  f"{cols[1]:>8} {r['gops_cpu']:>9.0f} {cols[2]:>9} {cols[3]:>8}", file=out)


# ------------------------------------------------------------------ CLI

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="*", default=list(DEFAULT_MODELS),
                   help="fixture names, .cvm paths, or lenet_int8 / resnet_int8 (default: resnet_cifar mnist_cnn)")
    p.add_argument("--batches", type=int, nargs="+", default=None, help="default: 1 64 (--adversarial: 1)")
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="threads for numba and onnxruntime, one count or several (default: all CPUs)")
    p.add_argument("--data", default=None, help="npz of float inputs and calibration data for .cvm paths")
    p.add_argument("--onnx", default=None, help="the ONNX source of a .cvm path (default: NAME.onnx beside it)")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--seconds", type=float, default=None,
                   help="minimum timing per measurement (default 1.0; --adversarial: 0.2)")
    p.add_argument("--no-startup", action="store_true", help="skip the cold/cached start-up subprocesses")
    p.add_argument("--no-gemm", action="store_true", help="skip the GEMM throughput measurement")
    p.add_argument("--json", default=None, help="also write the rows and the machine to this file")
    p.add_argument("--adversarial", action="store_true",
                   help="instead: gas per second of models cheap in gas but expensive to run, numba and reference, "
                        "against the fixture models (cvm.tools.bench_adversarial; MODEL names catalogue entries)")


def run(args) -> int:
    if args.adversarial:
        return bench_adversarial.run_from_bench(args)
    before = machine()["loadavg"]
    rows = run_bench(args.models, tuple(args.batches or (1, 64)), args.threads, tuple(args.backends),
                     not args.no_startup, not args.no_gemm, args.seconds or 1.0,
                     log=lambda s: print(s, file=sys.stderr), data=args.data, onnx=args.onnx)
    info = machine()
    print(f"CPU: {info['cpu']} ({info['cpus']} CPUs); flags: {' '.join(info['flags'])}")
    if before:
        print(f"load average (1, 5, 15 min) before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}; "
              f"after: {info['loadavg'][0]:.2f} {info['loadavg'][1]:.2f} {info['loadavg'][2]:.2f}")
    info["loadavg_before"] = before
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    return 0


def register(subparsers) -> None:
    s = subparsers.add_parser("bench", help="numba vs reference vs onnxruntime f32/int8; start-up; int8 GEMM")
    add_arguments(s)
    s.set_defaults(func=run)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cvm bench", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
