"""all-MiniLM-L6-v2 (or any model with token-id inputs) beside onnxruntime float, int8 static and int8 dynamic, in one
process: one thread each, thread CPU time, interleaved rounds, batch 1 and 8.

    .venv/bin/python scripts/perf/minilm_vs_ort.py MODEL.cvm HELD.npz FLOAT.onnx INT8_STATIC.onnx INT8_DYNAMIC.onnx

HELD.npz: an array per model input, named after it (input_ids, attention_mask). The MiniLM export and its
onnxruntime models are made by scripts/models/minilm_export.py and minilm_eval.py (.cache/models/minilm)."""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

import cvm
from cvm.interp import numba as nb


def main(path, held, *onnx_paths) -> None:
    m, data = cvm.load(path), np.load(held)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sessions = dict(zip(("ort float", "ort int8 static", "ort int8 dynamic"),
                        (ort.InferenceSession(p, so) for p in onnx_paths)))
    runner = nb.prepare(m.graph, m.analysis, isa="auto", threads=1)
    for batch, rounds in ((1, 20), (8, 6)):
        inputs = {s.name: m.quantize_input(data[s.name][:batch], s.name) for s in m.inputs}
        runner(inputs)
        feeds = {k: {i.name: data[i.name][:batch].astype(np.int64) for i in s.get_inputs()} for k, s in sessions.items()}
        times = {"cvm numba": []} | {k: [] for k in sessions}
        for _ in range(rounds):
            t = time.thread_time()
            runner(inputs)
            times["cvm numba"].append(time.thread_time() - t)
            for k, s in sessions.items():
                t = time.thread_time()
                s.run(None, feeds[k])
                times[k].append(time.thread_time() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"batch {batch}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in med.items())
              + "".join(f"; cvm / {k} {med['cvm numba'] / med[k]:.2f}" for k in sessions))


if __name__ == "__main__":
    main(*sys.argv[1:])
