"""Which real transformer / timm architectures MRT converts, at batch 1 and at a symbolic batch, and how faithful
the integer models are to float: the zoo that scripts/models/zoo_export.py writes to .cache/models/zoo/.

For each model and each export (b1: fixed batch 1, dyn: symbolic batch) one subprocess (a timeout each, so one
hang does not stop the rest) converts it with mrt.pipeline.convert and its default options on the 32 calibration
samples, runs the CVM model (backend --backend) on the 8 held-out samples one at a time, and compares the
dequantized outputs with torch's float outputs: cosine similarity per sample (each output flattened), mean and
minimum over the samples. MRT imports a graph as what it computes for one sample: each ONNX sample (1, *S) becomes
a CVM batch row by mrt.onnx_import.one_sample.as_batch on its input's unit axis (Graph.unit_axis), and a CVM
output row goes back by as_sample. Another subprocess quantizes the same export with onnxruntime's static int8
quantization (QDQ, per channel, uint8 activations, int8 weights: cvm.tools.bench.quantize_ort_int8's settings) on
the same calibration samples, for comparison.

    nice -n 19 .venv/bin/python scripts/models/zoo_convert.py [NAME ...] [--timeout 900] [--backend reference]

Prints a table and writes scripts/models/results/zoo.json (results for the names run are replaced, others kept).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ZOO = ROOT / ".cache" / "models" / "zoo"
RESULTS = ROOT / "scripts" / "models" / "results" / "zoo.json"
VARIANTS = ("b1", "dyn")


def first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sample (axis 0), every other axis flattened."""
    a = got.reshape(len(got), -1).astype(np.float64)
    b = want.reshape(len(want), -1).astype(np.float64)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1), np.nan)


def summary(got: list, want: list, names: list) -> dict:
    out = {}
    for g, w, n in zip(got, want, names):
        if g.shape != w.shape:
            out[n] = {"error": f"shape {list(g.shape)}, expected {list(w.shape)}"}
            continue
        c = cosines(g, w)
        mu = w.mean(0, keepdims=True)  # the part of the float output that no sample changes
        cc = cosines(g - mu, w - mu)
        rel = np.linalg.norm((g - w).reshape(len(g), -1), axis=1) / np.linalg.norm(w.reshape(len(w), -1), axis=1)
        out[n] = {"cosine_mean": round(float(np.mean(c)), 6), "cosine_min": round(float(np.min(c)), 6),
                  "centered_cosine_mean": round(float(np.mean(cc)), 6),
                  "centered_cosine_min": round(float(np.min(cc)), 6), "rel_l2_mean": round(float(np.mean(rel)), 6)}
    return out


def load(name: str, variant: str):
    data = np.load(ZOO / f"{name}_data.npz")
    split = lambda p: {k[len(p):]: data[k] for k in data.files if k.startswith(p)}  # noqa: E731
    held_out = split("held_out_")
    held = {k: v for k, v in split("held_").items() if not k.startswith("out_")}
    return ZOO / f"{name}_{variant}.onnx", split("calib_"), held, held_out


def mrt_version() -> str:
    """The commit MRT is at, with '+ N files modified' where the work tree's mrt/ or cvm/ differs from it (another
    engineer may be editing while this runs: each result records the version it ran on)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "mrt", "cvm"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    n = sum(1 for ln in dirty if ln.strip())
    return f"{head} + {n} files modified in mrt/ or cvm/" if n else head


# ------------------------------------------------------------------ children (one conversion or quantization each)

def child_mrt(name: str, variant: str, backend: str) -> dict:
    import onnx
    from mrt.onnx_import import import_onnx
    from mrt.onnx_import.importer import HANDLERS
    from mrt.onnx_import.inputs import unit_axis
    from mrt.onnx_import.one_sample import as_batch, as_sample
    from mrt.pipeline import convert
    path, calib, held, held_out = load(name, variant)
    proto = onnx.load(str(path))
    out_names = [o.name for o in proto.graph.output]
    ops = sorted({(n.domain or "", n.op_type) for n in proto.graph.node})
    # ONNX ops with no import handler: refused unless every input is a constant (then folded)
    missing = [op if not d else f"{d}.{op}" for d, op in ops if (d, op) not in HANDLERS]
    r = {"mrt_version": mrt_version(), "ops_without_handler": missing}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = import_onnx(str(path))
    except Exception:  # noqa: BLE001 - convert fails at import too and says why, on its one line
        graph = None
    # each input's unit axis: the imported graph's, or (where the import fails) the rule the importer applies
    axes = {vi.name: graph.unit_axis(vi.name) if graph is not None else unit_axis(vi, proto.graph)
            for vi in proto.graph.input if vi.name in calib}
    r["input_unit_axes"] = axes
    rows = lambda x, ax: np.concatenate([as_batch(x[i:i + 1], ax) for i in range(len(x))])  # noqa: E731
    batch = {k: rows(v, axes[k]) for k, v in calib.items()}
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = convert(str(path), batch, progress=False)
    except Exception as e:  # noqa: BLE001
        r.update(status="refused", error=first_line(e), convert_s=round(time.perf_counter() - t, 1))
        if not type(e).__module__.startswith("mrt") or "internal error" in str(e):
            r["traceback"] = _tail(e)
        return r
    r.update(convert_s=round(time.perf_counter() - t, 1), cvm_nodes=len(m.graph.nodes), opset=m.graph.opset)
    try:
        r["gas_per_sample"] = int(m.gas)
    except Exception:  # noqa: BLE001 - gas is informative only
        pass
    try:
        out_axes = [graph.unit_axis(o) for o in out_names]
        r["output_unit_axes"] = dict(zip(out_names, out_axes))
        if len(m.outputs) != len(out_names):
            raise ValueError(f"CVM has {len(m.outputs)} outputs, ONNX {len(out_names)}")
        got = [[] for _ in out_names]
        t = time.perf_counter()
        for i in range(len(next(iter(held.values())))):
            x = {s.name: m.quantize_input(as_batch(held[s.name][i:i + 1], axes[s.name]), s.name) for s in m.inputs}
            y = m.run(x, backend=backend)
            y = y if isinstance(y, dict) else {m.outputs[0].name: y}
            for k, (s, ax) in enumerate(zip(m.outputs, out_axes)):
                got[k].append(as_sample(m.dequantize_output(y[s.name], s.name)[0], ax))
        r["run_s_per_sample"] = round((time.perf_counter() - t) / len(got[0]), 3)
        r["outputs"] = summary([np.concatenate(g) for g in got], [held_out[n] for n in out_names], out_names)
        bad = [n for n, v in r["outputs"].items() if "error" in v]
        r["status"] = f"wrong output shape ({', '.join(bad)})" if bad else "converted"
    except Exception as e:  # noqa: BLE001 - a failure after conversion is the pipeline's
        r.update(status="run failed", error=first_line(e), traceback=_tail(e))
    return r


def child_ort(name: str, variant: str) -> dict:
    import logging
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    path, calib, held, held_out = load(name, variant)
    ort.set_default_logger_severity(3)
    n = len(next(iter(calib.values())))

    class Reader(CalibrationDataReader):  # one sample a batch: the b1 export takes no other
        def __init__(self):
            self.it = iter([{k: v[i:i + 1] for k, v in calib.items()} for i in range(n)])

        def get_next(self):
            return next(self.it, None)

    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        q = Path(tmp) / "int8.onnx"
        try:
            quantize_static(str(path), str(q), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            s = ort.InferenceSession(str(q), providers=["CPUExecutionProvider"])
            names = [o.name for o in s.get_outputs()]
            k = len(next(iter(held.values())))
            runs = [s.run(None, {a: v[i:i + 1] for a, v in held.items()}) for i in range(k)]
            got = [np.concatenate(parts) for parts in zip(*runs)]
        except Exception as e:  # noqa: BLE001
            return {"status": "failed", "error": first_line(e)}
    return {"status": "quantized", "outputs": summary(got, [held_out[o] for o in names], names)}


def _tail(e: BaseException, frames: int = 4) -> list[str]:
    """The innermost frames of the original exception (its __cause__ where MRT wrapped it), one line each."""
    while e.__cause__ is not None:
        e = e.__cause__
    tb = traceback.extract_tb(e.__traceback__)[-frames:]
    return [f"{Path(f.filename).relative_to(ROOT) if f.filename.startswith(str(ROOT)) else f.filename}:{f.lineno} "
            f"{f.name}: {f.line}" for f in tb] + [first_line(e)]


# ------------------------------------------------------------------ the driver

def spawn(kind: str, name: str, variant: str, timeout: float, backend: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    cmd = [sys.executable, __file__, "--child", kind, name, variant, "--out", str(out), "--backend", backend]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        r = json.loads(out.read_text()) if out.stat().st_size else None
        if r is None:
            tail = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()][-3:]
            r = {"status": "crashed", "error": f"exit {p.returncode}: {' | '.join(tail)}"}
    except subprocess.TimeoutExpired:
        r = {"status": "timeout", "error": f"no result within {timeout:.0f} s"}
    finally:
        out.unlink(missing_ok=True)
    r["wall_s"] = round(time.perf_counter() - t, 1)
    return r


def spread(want: np.ndarray) -> float:
    """Mean cosine between the float outputs of different held-out samples: near 1, the output hardly depends on
    the input (a constant part dominates) and its plain cosine says little; the centered cosine then tells more."""
    c = want.reshape(len(want), -1).astype(np.float64)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    s = c @ c.T
    return round(float(s[~np.eye(len(s), dtype=bool)].mean()), 4)


def cos_text(r: dict | None, key: str = "cosine") -> str:
    """mean/min per output, outputs in the model's order; the status where nothing was measured."""
    if not r:
        return "-"
    if "outputs" not in r:
        return "-" if r.get("status") in ("converted", "refused", None) else r["status"]
    return "; ".join(f"{v[key + '_mean']:.4f}/{v[key + '_min']:.4f}" if "error" not in v else "shape?"
                     for v in r["outputs"].values())


def status_text(r: dict | None) -> str:
    if not r:
        return "no export"
    return "ok" if r["status"] == "converted" else r["status"].upper()


def table(results: dict) -> str:
    """Cosine columns: mean/min over the held-out samples, per output ('; ' between outputs, in the model's order);
    centered: both outputs less the float outputs' mean over the samples; spread: the mean cosine between different
    samples' float outputs (near 1: the output hardly depends on the input)."""
    cols = ["architecture", "exporter b1 / dyn", "b1", "dyn", "MRT cosine b1", "MRT cosine dyn", "MRT centered b1",
            "ort int8 cosine b1", "ort int8 cosine dyn", "ort int8 centered b1", "float spread"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        if name.startswith("_"):
            continue
        exp = " / ".join(str((r.get("export", {}).get(v) or {}).get("exporter")) for v in VARIANTS)
        mrt = {v: (r.get(v) or {}).get("mrt") for v in VARIANTS}
        ort = {v: (r.get(v) or {}).get("ort_int8") for v in VARIANTS}
        spread_ = "; ".join(f"{x:.3f}" for x in r.get("float_cross_sample_cosine", {}).values())
        row = [name, exp, status_text(mrt["b1"]), status_text(mrt["dyn"]), cos_text(mrt["b1"]), cos_text(mrt["dyn"]),
               cos_text(mrt["b1"], "centered_cosine"), cos_text(ort["b1"]), cos_text(ort["dyn"]),
               cos_text(ort["b1"], "centered_cosine"), spread_]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def failures(results: dict) -> str:
    out = []
    for name, r in results.items():
        if name.startswith("_"):
            continue
        for v in VARIANTS:
            for kind in ("mrt", "ort_int8"):
                x = (r.get(v) or {}).get(kind) or {}
                if x.get("error"):
                    out.append(f"{name} {v} {kind}: {x['error']}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="default: every model of the manifest")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per conversion (default 900)")
    ap.add_argument("--backend", default="reference", help="CVM backend for the held-out runs (reference, numba)")
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime's int8 comparison")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "NAME", "VARIANT"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, name, variant = a.child
        r = child_mrt(name, variant, a.backend) if kind == "mrt" else child_ort(name, variant)
        a.out.write_text(json.dumps(r))
        return
    manifest = json.loads((ZOO / "manifest.json").read_text())
    names = a.names or [k for k in manifest if not k.startswith("_")]
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    import onnx
    import onnxruntime
    results["_about"] = {
        "what": __doc__.split("\n\n")[0].replace("\n", " "),
        "versions": {**manifest.get("_versions", {}), "onnx": onnx.__version__,
                     "onnxruntime (int8)": onnxruntime.__version__},
        "convert": "mrt.pipeline.convert(path, calibration, progress=False): default options",
        "backend": a.backend, "calibration_samples": 32, "held_out_samples": 8,
        "cosine": "per held-out sample, each output flattened, against torch's float outputs; mean and min over "
                  "samples; centered: both less the float outputs' mean over the held-out samples",
        "float_cross_sample_cosine": spread.__doc__.split(": ", 1)[1].replace("\n    ", " "),
        "date": time.strftime("%Y-%m-%d"), "timeout_s": a.timeout,
        "mrt_version_at_start": mrt_version()}
    t0 = time.perf_counter()
    for name in names:
        entry = manifest[name]
        res = {"kind": entry.get("kind"), "params": entry.get("params"),
               "export": {v: {k: entry[v].get(k) for k in ("exporter", "default_exporter_error", "errors", "opset",
                                                           "nodes", "external_data", "ops") if k in entry[v]}
                          for v in VARIANTS if v in entry}}
        if "timm" in entry:
            res["timm"] = entry["timm"]
        if (ZOO / f"{name}_data.npz").exists():
            res["float_cross_sample_cosine"] = {k: spread(v) for k, v in load(name, "b1")[3].items()}
        if "error" in entry:
            res["export_error"] = entry["error"]
        for v in VARIANTS:
            if not (entry.get(v) or {}).get("exporter"):
                res[v] = None
                continue
            res[v] = {"mrt": spawn("mrt", name, v, a.timeout, a.backend)}
            if not a.no_ort:
                res[v]["ort_int8"] = spawn("ort", name, v, a.timeout, a.backend)
            m = res[v]["mrt"]
            print(f"{name:16s} {v:3s} {m['status']:10s} {m.get('wall_s', 0):6.1f}s  {cos_text(m)}  "
                  f"ort int8 {cos_text(res[v].get('ort_int8'))}  {m.get('error', '')}", flush=True)
        results[name] = res
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    results["_about"]["mrt_version_at_end"] = mrt_version()
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\n{time.perf_counter() - t0:.0f} s, mrt {results['_about']['mrt_version_at_start']} .. "
          f"{results['_about']['mrt_version_at_end']}\n")
    print(table(results))
    fails = failures(results)
    if fails:
        print("\nerrors:\n" + fails)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
