"""What the model-table scripts share: onnxruntime sessions on one thread, batched runs, and batch-1
latency of CVM numba beside onnxruntime float and int8, timed in interleaved rounds (cvm bench's
method, so a change in the machine's load hits all three alike)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

MIN_SECONDS = 2.0  # of timing per backend
TORCHVISION = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0",
               "squeezenet1_1", "densenet121", "vgg16", "regnet_y_400mf", "convnext_tiny", "vit_b_16")  # the vision issue's list


def write_table(path: Path, head: list[str], rows: dict[str, str]) -> None:
    """head (text, blank line, header, separator) and one row per model, keeping the rows of models an
    earlier run measured and this one did not, in their order."""
    lines = path.read_text().splitlines() if path.exists() else []
    earlier = {line.split("|")[1].strip(): line for line in lines[len(head):] if line.startswith("| ")}
    merged = [rows.pop(name, row) for name, row in earlier.items()] + list(rows.values())
    path.write_text("\n".join(head + merged) + "\n")


def session(path: Path, threads: int = 1):
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def run_ort(sess, x: np.ndarray, batch: int = 8) -> np.ndarray:
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def run_cvm(model, x: np.ndarray, batch: int = 8) -> np.ndarray:
    """Dequantized outputs, with the output transform the converter left to the client applied."""
    from mrt.evaluate import client_transform
    outs = [model.run(model.quantize_input(x[i:i + batch])) for i in range(0, len(x), batch)]
    return client_transform(model.meta, model.dequantize_output(np.concatenate(outs)))


def latency_ms(model, float_sess, int8_sess, x1: np.ndarray) -> dict[str, float]:
    """Median ms at batch 1 of CVM numba, ort float and ort int8, one thread each."""
    from cvm.tools.bench import interleaved
    from cvm.interp import numba as nb
    runner = nb.prepare(model.graph, model.analysis, threads=1)
    xq = {model.inputs[0].name: model.quantize_input(x1)}
    feed = {float_sess.get_inputs()[0].name: x1}
    fns = {"numba": lambda: runner(xq), "ort float": lambda: float_sess.run(None, feed),
           "ort int8": lambda: int8_sess.run(None, feed)}
    times = interleaved(fns, MIN_SECONDS)
    return {k: 1e3 * float(np.median(times[k][0])) for k in fns}


def measure_table(path: Path, head: list[str], names, measure) -> None:
    """One row per name from measure(name), printed as it is made, then written with write_table."""
    rows = {}
    for name in names:
        rows[name] = measure(name)
        print(rows[name], flush=True)
    write_table(path, head, rows)
    print(f"wrote {path}")
