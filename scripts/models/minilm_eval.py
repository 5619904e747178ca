"""all-MiniLM-L6-v2 converted by MRT and measured against the float model (onnxruntime) and onnxruntime's
int8 dynamic quantization, on held-out stdlib-docstring sentences (.cache/models/minilm, written by
scripts/models/minilm_export.py): cosine of the sentence embeddings, nearest-neighbour agreement (each
held-out sentence's nearest other sentence, as float finds it), gas, batch-1 latency.

    .venv/bin/python scripts/models/minilm_eval.py [--length 64] [--calib 32] [--wide-gelu]

--wide-gelu gives the GELU tables' inputs and outputs 12 bits (QuantConfig.wide_tensors)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.pipeline import convert

DIR = Path(__file__).resolve().parents[2] / ".cache" / "models" / "minilm"
CHUNK = 32  # samples per run: a 64-token batch of 256 is beyond opset 2's run_bytes


def cosine(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def nn_agreement(a, b) -> float:
    sims = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in (a, b)]
    sims = [s @ s.T for s in sims]
    for s in sims:
        np.fill_diagonal(s, -np.inf)
    return float((sims[0].argmax(1) == sims[1].argmax(1)).mean())


def latency(fn, n=5) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def gelu_tensors(path) -> tuple[str, ...]:
    g = run_pipeline(import_onnx(str(path)), DEFAULT_PIPELINE)
    return tuple(sorted({t for n in g.nodes if n.op == "univariate" and "erf" in str(n.attrs["program"])
                         for t in (n.inputs[0], n.outputs[0])}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--calib", type=int, default=32)
    ap.add_argument("--wide-gelu", action="store_true")
    a = ap.parse_args()
    path, data = DIR / f"minilm_L{a.length}.onnx", np.load(DIR / f"text_L{a.length}.npz")
    calib = {k: data[f"calib_{k}"][:a.calib] for k in ("input_ids", "attention_mask")}
    held = {k: data[f"held_{k}"] for k in ("input_ids", "attention_mask")}
    extra = {"wide_tensors": gelu_tensors(path)} if a.wide_gelu else {}
    t = time.perf_counter()
    model = convert(str(path), calib, progress=False, **extra)
    print(f"convert {time.perf_counter() - t:.0f} s, opset {model.graph.opset}, {len(model.graph.nodes)} nodes, "
          f"gas {model.gas} per sample")
    ints = {s.name: model.quantize_input(held[s.name], s.name) for s in model.inputs}
    y = np.concatenate([model.run({k: v[i:i + CHUNK] for k, v in ints.items()}, backend="numba")
                        for i in range(0, len(held["input_ids"]), CHUNK)])
    y = y.astype(np.float64) * float(next(iter(model.meta["output_scales"].values())))
    ref = ort.InferenceSession(str(path)).run(None, held)[0]
    one = {k: v[:1] for k, v in ints.items()}
    c = cosine(y, ref)
    print(f"mrt: cosine mean {c.mean():.4f} min {c.min():.4f}, NN agreement {nn_agreement(y, ref):.3f}, numba batch-1 "
          f"{latency(lambda: model.run(one, backend='numba')) * 1e3:.1f} ms")
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(path), str(DIR / "minilm_dynamic.onnx"), weight_type=QuantType.QInt8)
    for name, p in (("ort int8 dynamic", DIR / "minilm_dynamic.onnx"), ("ort float", path)):
        s = ort.InferenceSession(str(p))
        z = s.run(None, held)[0]
        c = cosine(z, ref)
        print(f"{name}: cosine mean {c.mean():.4f} min {c.min():.4f}, NN agreement {nn_agreement(z, ref):.3f}, batch-1 "
              f"{latency(lambda s=s: s.run(None, {k: v[:1] for k, v in held.items()}), 20) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
