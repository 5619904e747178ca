"""Adversarial benchmark: gas per second of models built to be cheap in gas but expensive to run.

Gas is a function of shapes alone (docs/spec.md section 8) and should track run time: a model that
runs much longer than its gas says lets its publisher buy compute below price. This module builds a
catalogue of accepted (verified) models at the corners of the gas schedule and the verifier's
bounds, times them on the numba and the reference backends (a warm loop of `Model.run`, batch 1 and
optionally 64), and compares each one's gas per second with the median of the fixture models on the
same backend. docs/performance.md, "Adversarial models: gas per second", records a run.

    cvm bench --adversarial [--seconds 0.2] [--batches 1 64] [--only NAME ...] [--json out.json]
    python -m cvm.tools.bench_adversarial

The catalogue is cvm/tools/adversarial.py. API: CATALOGUE (name -> Case), build(name) -> (model, x),
run_adversarial(...) -> rows, print_table(rows).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .adversarial import CATALOGUE, Case, build  # noqa: F401 - the catalogue, re-exported for the bench's users
from .bench_models import DEFAULT_MODELS, load_bench_model
from .timing import machine, time_calls
from ..errors import CVMError

FIXTURE_MODELS = ("cancer_linear", "digits_mlp", "digits_mlp_fhe", "mnist_cnn", "resnet_cifar")
BACKENDS = ("numba", "reference")
BATCH_BYTES = 1 << 28  # a (model, batch) whose inputs and activations exceed this is skipped (batch 64 of 2^24 inputs)
FLOOR = 0.1  # a case passes when its gas/s is at least this fraction of the backend's fixture median


def fixture_input(name: str, opset: int | None = None):
    from ..repricing import repriced
    bm = load_bench_model(name)
    return (bm.model if opset is None else repriced(bm.model, opset)), bm.int_inputs[:1]


# ------------------------------------------------------------------ timing and table

def measure(model, x, backend: str, batch: int, seconds: float) -> dict:
    xb = np.resize(x, (batch,) + x.shape[1:])
    t = time_calls(lambda: model.run(xb, backend=backend), seconds, min_reps=3, max_reps=100_000)
    s, cold = float(np.median(t)), cold_seconds(model, xb, backend)
    return {"batch": batch, "backend": backend, "gas": model.gas, "seconds": s, "reps": len(t),
            "gas_per_s": model.gas * batch / s, "charged_per_s": model.call_gas(batch) / s,
            "cold_seconds": cold, "cold_per_s": model.call_gas(batch) / cold}


def cold_seconds(model, xb, backend: str, reps: int = 3) -> float:
    """A call of a model that is not in the store: decode and verify its bytes (Model.from_bytes), prepare
    the backend and run once; median of `reps` in this warm process (kernels compiled and imports done
    once per process, as on a node that has served other models)."""
    from ..model import Model
    data, times = model.to_bytes(), []
    for _ in range(reps):
        t = time.perf_counter()
        Model.from_bytes(data).run(xb, backend=backend)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def run_adversarial(names=None, backends=BACKENDS, batches=(1,), seconds: float = 0.2, fixtures=FIXTURE_MODELS,
                    log=print, opset: int | None = None) -> list[dict]:
    """Rows for the fixtures (kind "fixture") and the catalogue (kind "adversarial"), each with
    gas/s and, for adversarial rows, the ratio to the median fixture gas/s of the backend and batch
    (warm, and cold: a model not in the store, against the warm median). `opset`: every model moved
    to that repricing opset first (a case the opset refuses is a "refused" row)."""
    rows = []
    for name in fixtures:
        model, x = fixture_input(name, opset)
        for batch in batches:
            for backend in backends:
                rows.append({"kind": "fixture", "model": name, **measure(model, x, backend, batch, seconds)})
        log(f"[adversarial] fixture {name}: done")
    medians = {key: {k: float(np.median([r[k] for r in rows if (r["backend"], r["batch"]) == key]))
                     for k in ("gas_per_s", "charged_per_s", "cold_per_s")}
               for key in {(r["backend"], r["batch"]) for r in rows}}
    for r in rows:
        _ratios(r, medians.get((r["backend"], r["batch"])))
    for name in names or list(CATALOGUE):
        t = time.perf_counter()
        try:
            model, x = build(name, opset=opset)
        except CVMError as e:
            rows.append({"kind": "refused", "model": name, "why": CATALOGUE[name].why, "error": str(e)})
            log(f"[adversarial] {name}: refused in opset {opset}: {e}")
            continue
        built = time.perf_counter() - t
        for batch in batches:
            nbytes = batch * (model.analysis.activation_bytes + x.nbytes)  # activations exclude the inputs
            if batch > 1 and nbytes > BATCH_BYTES:
                log(f"[adversarial] {name}: batch {batch} skipped ({nbytes} bytes of inputs and activations "
                    f"> {BATCH_BYTES})")
                continue
            for backend in backends:
                r = {"kind": "adversarial", "model": name, "why": CATALOGUE[name].why, "build_s": built,
                     **measure(model, x, backend, batch, seconds)}
                rows.append(_ratios(r, medians.get((backend, batch))))
        log(f"[adversarial] {name}: done")
    return rows


def _ratios(r: dict, medians: dict | None) -> dict:
    """The row's gas/s over the fixture median of the same kind: its model gas, what a call pays, and
    what a cold call pays (the model not in the store: its decoding, verification and planning counted,
    as they are for the fixtures' cold median)."""
    for ratio, key in (("ratio", "gas_per_s"), ("charged_ratio", "charged_per_s"), ("cold_ratio", "cold_per_s")):
        r[ratio] = r[key] / medians[key] if medians else None
    return r


def floors(rows: list[dict], ratio: str = "ratio") -> list[dict]:
    """Per (backend, batch): the lowest adversarial ratio, its model, and whether it is >= FLOOR.
    `ratio`: "ratio" (the model's gas) or "charged_ratio" (what a call pays, Model.call_gas)."""
    gas_per_s = {"ratio": "gas_per_s", "charged_ratio": "charged_per_s", "cold_ratio": "cold_per_s"}[ratio]
    out = []
    keys = sorted({(r["backend"], r["batch"]) for r in rows if r["kind"] == "adversarial"},
                  key=lambda k: (k[1], BACKENDS.index(k[0]) if k[0] in BACKENDS else 9))
    for backend, batch in keys:
        adv = [r for r in rows if r["kind"] == "adversarial" and r["backend"] == backend and r["batch"] == batch
               and r[ratio] is not None]
        fix = [r[gas_per_s] for r in rows if r["kind"] == "fixture" and r["backend"] == backend and r["batch"] == batch]
        if not adv:
            continue
        worst = min(adv, key=lambda r: r[ratio])
        out.append({"backend": backend, "batch": batch, "median": float(np.median(fix)) if fix else None,
                    "floor": worst[ratio], "model": worst["model"], "ok": worst[ratio] >= FLOOR,
                    "below": sorted(r["model"] for r in adv if r[ratio] < FLOOR), "basis": ratio})
    return out


def print_table(rows: list[dict], out=None) -> None:
    out = out or sys.stdout
    print(f"{'model':<22} {'batch':>5} {'backend':<9} {'gas':>13} {'s/run':>10} {'gas/s':>9} {'vs median':>9} "
          f"{'charged/s':>9} {'vs median':>9} {'cold s':>10} {'cold':>9}", file=out)

    def ratio_text(r, key):
        if r.get(key) is None:
            return f"{'-':>9}  "
        flag = " <" if r["kind"] == "adversarial" and r[key] < FLOOR else "  "
        return f"{r[key]:>9.3g}{flag}"

    for kind in ("fixture", "adversarial"):
        for r in (r for r in rows if r["kind"] == kind):
            print(f"{r['model']:<22} {r['batch']:>5} {r['backend']:<9} {r['gas']:>13,} {r['seconds']:>10.3e} "
                  f"{r['gas_per_s']:>9.2e} {ratio_text(r, 'ratio')}{r['charged_per_s']:>9.2e} "
                  f"{ratio_text(r, 'charged_ratio')}{r['cold_seconds']:>10.3e} {ratio_text(r, 'cold_ratio')}".rstrip(),
                  file=out)
    for r in (r for r in rows if r["kind"] == "refused"):
        print(f"{r['model']:<22} refused: {r['error']}", file=out)
    print("(gas/s: the model's gas; charged/s: what a call through the chain pays, Model.call_gas (the call's fixed "
          "charge, the model's gas, the input and output bytes, and in opset 4 the constant bytes); vs median: over "
          "the median of the fixture models on the same backend and batch; cold: a call of a model not in the store "
          "(decode, verify, prepare, run once) over the fixtures' cold median; '<' marks a case below "
          f"{FLOOR})", file=out)
    for basis, label in (("ratio", "model gas"), ("charged_ratio", "charged gas"), ("cold_ratio", "cold call")):
        for f in floors(rows, basis):
            verdict = ">=" if f["ok"] else "<"
            below = f"; below {FLOOR}: {', '.join(f['below'])}" if f["below"] else ""
            med = f"{f['median']:.2e}" if f["median"] else "-"
            print(f"floor ({label}) {f['backend']} batch {f['batch']}: {f['floor']:.3g} of the fixture median "
                  f"{med} gas/s ({f['model']}), {verdict} {FLOOR}{below}", file=out)


# ------------------------------------------------------------------ CLI

def run_cli(names=None, backends=BACKENDS, batches=(1,), seconds: float = 0.2, fixtures=FIXTURE_MODELS,
            json_path=None, out=None, opset: int | None = None) -> list[dict]:
    out = out or sys.stdout
    before = machine()["loadavg"]
    rows = run_adversarial(names, backends, batches, seconds, fixtures, log=lambda s: print(s, file=sys.stderr),
                           opset=opset)
    info = machine()
    info["loadavg_before"] = before
    load = f"; load average before {before[0]:.2f}, after {info['loadavg'][0]:.2f}" if before else ""
    print(f"CPU: {info['cpu']} ({info['cpus']} CPUs){load}; batch {', '.join(map(str, batches))}, "
          f">= {seconds} s per measurement; opset {opset or 'as built'}", file=out)
    print_table(rows, out)
    if json_path:
        Path(json_path).write_text(json.dumps({"machine": info, "rows": rows,
                                               "floors": floors(rows) + floors(rows, "charged_ratio")
                                               + floors(rows, "cold_ratio")}, indent=1))
    return rows


def run_from_bench(args) -> int:
    """`cvm bench --adversarial`: MODEL arguments that name catalogue entries select them (the
    default fixture list runs the whole catalogue); --batches, --backends, --seconds, --json apply."""
    models = args.models if args.models != list(DEFAULT_MODELS) else []
    unknown = [m for m in models if m not in CATALOGUE]
    if unknown:
        print(f"cvm bench --adversarial: unknown catalogue model(s) {', '.join(unknown)}; "
              f"choose from {', '.join(CATALOGUE)}", file=sys.stderr)
        return 2
    backends = tuple(b for b in args.backends if b in BACKENDS)
    if not backends:
        print("cvm bench --adversarial: --backends must include numba or reference", file=sys.stderr)
        return 2
    run_cli(models or None, backends, tuple(args.batches or (1,)), args.seconds or 0.2, FIXTURE_MODELS, args.json)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.tools.bench_adversarial", description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="catalogue models to run (default: all; --list names them)")
    p.add_argument("--batches", type=int, nargs="+", default=[1])
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--seconds", type=float, default=0.2, help="minimum timing per (model, backend, batch)")
    p.add_argument("--no-fixtures", action="store_true", help="skip the fixture models (ratios then '-')")
    p.add_argument("--json", default=None, help="also write the rows, the floors and the machine to this file")
    p.add_argument("--opset", type=int, default=None, help="move every model to this repricing opset (3 or 4) first")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    args = p.parse_args(argv)
    unknown = [m for m in args.models if m not in CATALOGUE]
    if unknown:
        p.error(f"unknown catalogue model(s) {', '.join(unknown)}; choose from {', '.join(CATALOGUE)}")
    if args.list:
        for c in CATALOGUE.values():
            print(f"{c.name:<22} {c.why}")
        return 0
    run_cli(args.models or None, tuple(args.backends), tuple(args.batches), args.seconds,
            () if args.no_fixtures else FIXTURE_MODELS, args.json, opset=args.opset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
