"""ONNX's own backend node tests (`onnx.backend.test`, rebuilt offline by `collect_testcases()`) end to end
through the integer pipeline: each case's model is converted by `mrt.pipeline.convert` with the case's inputs
as calibration data (one sample), run on CVM's reference interpreter, and compared with the expected outputs.

A case is
- passed: every integer or boolean output exact; every float output with cosine >= COSINE_MIN and a relative
  L2 error <= ORT_FACTOR x onnxruntime int8's (quantize_static on the same model and data, where it inserts
  QuantizeLinear for the case; never a bound under REL_L2_FLOOR, one 8-bit rounding); where onnxruntime does
  not quantize the case, the cosine alone (an expected output of zeros: max |got| <= ZERO_ATOL);
- refused: the converter's one-line UnsupportedOp / BadInput / QuantizeError (its first line is kept);
- failed: wrong numbers or shapes, any other exception, a crash, or more than --timeout seconds;
- not applicable: what one deterministic sample cannot express (NOT_APPLICABLE's reasons).

One sample is the unit (issue 30): an input of ONNX shape S is calibrated and run as a CVM batch of one
(mrt.onnx_import.one_sample.as_batch: its unit axis, a size-1 axis, becomes the batch axis; (1, *S) where it has
none). Inputs that every real export writes as initializers (PARAMETERS: a layer's weights, and the
values that fix an output's shape such as Reshape's shape or Slice's starts) are made initializers first.

    nice -n 19 .venv/bin/python scripts/models/node_tests.py [-j 2] [--timeout 60] [NAME_PART ...]
    .venv/bin/python scripts/models/node_tests.py --render     # docs/models.md from the committed JSON only
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
import warnings
from functools import lru_cache
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from node_tests_doc import DOC, RESULTS, load_results, save_results, totals, write_doc  # noqa: E402

COSINE_MIN = 0.999
ORT_FACTOR = 2.0
REL_L2_FLOOR = 0.01  # the relative error of rounding a Gaussian signal to 8 bits is about 0.007
ZERO_ATOL = 1e-3
TIMEOUT_S = 60
RULE = {"cosine_min": COSINE_MIN, "ort_factor": ORT_FACTOR, "rel_l2_floor": REL_L2_FLOOR, "zero_atol": ZERO_ATOL}
STATUSES = ("passed", "refused", "failed", "not applicable")

PARAMETERS = {  # op -> input positions that real exports write as initializers (weights, shape-fixing values)
    "Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2), "BatchNormalization": (1, 2, 3, 4),
    "InstanceNormalization": (1, 2), "LayerNormalization": (1, 2), "GroupNormalization": (1, 2),
    "RMSNormalization": (1,), "PRelu": (1,), "LSTM": (1, 2, 3, 4, 7), "GRU": (1, 2, 3, 4), "RNN": (1, 2, 3, 4),
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Pad": (1, 2, 3), "Slice": (1, 2, 3, 4), "Clip": (1, 2),
    "Resize": (1, 2, 3), "Upsample": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "Trilu": (1,),
    "CumSum": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,), "OneHot": (1, 2), "Dropout": (1, 2),
    "CenterCropPad": (1,), "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2), "CausalConvWithState": (1, 2),
    "CastLike": (1,), "Loop": (0, 1), "MatMulInteger": (2, 3), "ConvInteger": (1, 2, 3),
    "QLinearMatMul": (1, 2, 3, 4, 5, 6, 7), "QLinearConv": (1, 2, 3, 4, 5, 6, 7, 8), "CumProd": (1,), "Col2Im": (1, 2), "DFT": (1, 2), "STFT": (1, 2, 3),
    **{f"Reduce{k}": (1,) for k in ("L1", "L2", "LogSum", "LogSumExp", "Max", "Mean", "Min", "Prod", "Sum",
                                    "SumSquare")},
}
SHAPE_READERS = {"Shape", "Size"}  # ops that read an input's shape, never its values
FLOAT_TYPES = {getattr(onnx.TensorProto, t) for t in dir(onnx.TensorProto) if t.startswith(("FLOAT", "DOUBLE", "BFLOAT"))}
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"}
TRAINING_DOMAIN = "ai.onnx.preview.training"
NOT_APPLICABLE = {
    "training": "a training op (ai.onnx.preview.training): it updates weights, it is not an inference",
    "random": "a random op: the expected output is one draw, not a function of the inputs",
    "dropout": "Dropout in training mode with a nonzero ratio: a random mask",
    "no input": "the graph has no input: its output is a constant, there is no sample to calibrate or run",
    "parameters only": "every input is a weight or fixes a shape (PARAMETERS): the graph is a constant",
    "sequence": "a sequence, optional or map value: a CVM sample is a set of tensors",
    "string": "a string tensor",
}


@lru_cache(maxsize=1)
def cases() -> dict:
    """{case name: onnx.backend.test TestCase}, in collect_testcases()'s order."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases()}


def op_of(name: str) -> str:
    """The op a case tests: its node's op type; an `_expanded` case (the op's function body) is `Op (expanded)`."""
    base = name.split("_expanded")[0]
    nodes = cases()[base].model.graph.node
    domain = nodes[0].domain if nodes[0].domain not in ("", "ai.onnx") else ""
    op = f"{domain + '.' if domain else ''}{nodes[0].op_type}"
    return op + (" (expanded)" if base != name else "")


def not_applicable(case) -> str | None:
    """The NOT_APPLICABLE key of a case that one deterministic sample cannot express, else None."""
    g = case.model.graph
    if any(n.domain == TRAINING_DOMAIN for n in g.node):
        return "training"
    if any(n.op_type in RANDOM_OPS for n in g.node):
        return "random"
    if "training_dropout" in case.name and "zero_ratio" not in case.name:
        return "dropout"
    if not g.input:
        return "no input"
    values = list(g.input) + list(g.output)
    if any(v.type.WhichOneof("value") != "tensor_type" for v in values):
        return "sequence"
    if any(v.type.tensor_type.elem_type == onnx.TensorProto.STRING for v in values):
        return "string"
    return None


def prepared(case) -> tuple[onnx.ModelProto, dict, list]:
    """(model with its PARAMETERS inputs as initializers, {runtime input: array}, expected outputs). An input
    is a parameter where every node reading it reads it at a PARAMETERS position (CastLike's `like` is also the
    data of other nodes in an expanded function); Shape and Size read only its shape."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    values = {v.name: as_array(a) for v, a in zip(model.graph.input, inputs)}
    uses = [(n.input[k], k in PARAMETERS.get(n.op_type, ()) or n.op_type in SHAPE_READERS)
            for n in model.graph.node for k in range(len(n.input))]
    params = set(values) - {name for name, fixed in uses if not fixed}  # (an input nothing reads, too)
    keep = [v for v in model.graph.input if v.name not in params]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.graph.initializer.extend(numpy_helper.from_array(values[p], p) for p in sorted(params))
    return model, {v.name: values[v.name] for v in keep}, [as_array(o) for o in outputs]


def as_array(a) -> np.ndarray:
    """A test value as numpy: the cases hold types numpy lacks (int4, float8, ...) as TensorProtos."""
    return numpy_helper.to_array(a) if isinstance(a, onnx.TensorProto) else np.asarray(a)


def is_float(value_info) -> bool:
    return value_info.type.tensor_type.elem_type in FLOAT_TYPES


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def classify(name: str) -> dict:
    """The case's result: {"op", "status", "reason"} plus the measured errors of float outputs."""
    from mrt.errors import BadInput, UnsupportedOp
    from mrt.quantize import QuantizeError
    from mrt.onnx_import import import_onnx
    from mrt.onnx_import.one_sample import as_batch, as_sample
    from mrt.pipeline import convert
    case = cases()[name]
    out = {"op": op_of(name)}
    key = not_applicable(case)
    if key:
        return {**out, "status": "not applicable", "reason": NOT_APPLICABLE[key]}
    model, feeds, want = prepared(case)
    if not feeds:
        return {**out, "status": "not applicable", "reason": NOT_APPLICABLE["parameters only"]}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = import_onnx(model)
            batch = {k: as_batch(v, graph.unit_axis(k)) for k, v in feeds.items()}
            m = convert(model, batch, softmax="integer", progress=False)
    except (UnsupportedOp, BadInput, QuantizeError) as e:
        return {**out, "status": "refused", "reason": first_line(e)}
    try:
        got = run_cvm(m, batch, len(model.graph.output))
        got = [as_sample(g, graph.unit_axis(o)) for g, o in zip(got, graph.outputs)]
        return {**out, **compare(model, feeds, got, want)}
    except Exception as e:  # noqa: BLE001 - any error after conversion is the pipeline's failure
        return {**out, "status": "failed", "reason": first_line(e)}


def run_cvm(m, batch: dict, count: int) -> list:
    """The model's float outputs for a batch of one sample, in its outputs' order (the ONNX graph's, renamed
    NAME.out), row 0 of each."""
    x = {s.name: m.quantize_input(batch[s.name], s.name) for s in m.inputs}
    y = m.run(x, backend="reference")
    y = y if isinstance(y, dict) else {m.outputs[0].name: y}
    if len(m.outputs) != count:
        raise ValueError(f"CVM has {len(m.outputs)} outputs, ONNX {count}")
    return [m.dequantize_output(y[s.name], s.name)[0] for s in m.outputs]


def compare(model, feeds: dict, got: list, want: list) -> dict:
    """passed or failed, by the module docstring's rule, with the float outputs' measurements."""
    measured, ort = {}, None
    for i, (g, w, info) in enumerate(zip(got, want, model.graph.output)):
        if w.shape == () and g.shape == (1,):
            g = g.reshape(())  # a rank-0 output: CVM has no rank-0 sample, and gives it as one entry
        if g.shape != w.shape:
            return {"status": "failed", "reason": f"output {i}: shape {g.shape}, expected {w.shape}"}
        if not is_float(info):
            if not np.array_equal(g, w.astype(np.float64)):
                bad = int(np.count_nonzero(g != w.astype(np.float64)))
                return {"status": "failed", "reason": f"output {i}: {bad} of {w.size} integers differ"}
            continue
        cos, rel = errors(g, w)
        measured[f"output {i}"] = {"cosine": round(cos, 6), "rel_l2": round(rel, 6)}
        if cos < COSINE_MIN:
            return {"status": "failed", "reason": f"output {i}: cosine {cos:.4f} < {COSINE_MIN}", **_m(measured)}
        if ort is None:
            ort = ort_int8(model, feeds)
        if ort is not None:
            _, ort_rel = errors(np.asarray(ort[i], np.float64), w)
            bound = max(ORT_FACTOR * ort_rel, REL_L2_FLOOR)
            measured[f"output {i}"]["ort_int8_rel_l2"] = round(ort_rel, 6)
            if rel > bound:
                return {"status": "failed", "reason": f"output {i}: relative L2 {rel:.4f} > {ORT_FACTOR:g} x "
                        f"onnxruntime int8's {ort_rel:.4f}", **_m(measured)}
    return {"status": "passed", "reason": "", **_m(measured)}


def _m(measured: dict) -> dict:
    return {"measured": measured} if measured else {}


def errors(got, want) -> tuple[float, float]:
    """(cosine, relative L2) of got against want; an all-zero want counts as exact within ZERO_ATOL."""
    g, w = np.ravel(got).astype(np.float64), np.ravel(want).astype(np.float64)
    nw = float(np.linalg.norm(w))
    if not np.isfinite(g).all() or not np.isfinite(w).all():
        same = bool(np.array_equal(g, w, equal_nan=True))
        return (1.0, 0.0) if same else (0.0, float("inf"))
    if nw == 0:
        ok = not g.size or float(np.abs(g).max()) <= ZERO_ATOL
        return (1.0, 0.0) if ok else (0.0, float("inf"))
    ng = float(np.linalg.norm(g))
    cos = float(g @ w / (ng * nw)) if ng else 0.0
    return cos, float(np.linalg.norm(g - w) / nw)


def ort_int8(model, feeds: dict) -> list | None:
    """onnxruntime's outputs after quantize_static (QDQ, int8) calibrated on the sample; None where it inserts no
    QuantizeLinear (it does not quantize the case's op) or cannot quantize or run the model."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, quantize_static
    ort.set_default_logger_severity(3)  # its warnings about unused initializers, once per case

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = [feeds]

        def get_next(self):
            return self.left.pop() if self.left else None

    try:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
            onnx.save(model, src)
            quantize_static(str(src), str(dst), Reader())
            q = onnx.load(dst)
            if not any(n.op_type == "QuantizeLinear" for n in q.graph.node):
                return None
            session = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
            return session.run(None, feeds)
    except Exception:  # noqa: BLE001 - onnxruntime cannot quantize this case: the fallback rule applies
        return None


def _child(name: str, conn) -> None:
    logging.disable(logging.WARNING)  # onnxruntime.quantization's advice to pre-process, once per case
    try:
        conn.send(classify(name))
    except BaseException as e:  # noqa: BLE001 - reported as the case's failure
        conn.send({"op": op_of(name), "status": "failed", "reason": first_line(e),
                   "trace": traceback.format_exc(limit=-3)})
    conn.close()


def run_all(names: list, jobs: int = 2, timeout: float = TIMEOUT_S, progress: bool = True) -> dict:
    """{name: result} of each case, each in a forked process killed after `timeout` seconds."""
    from mrt.progress import bar
    import mrt.pipeline  # noqa: F401 - imported and collected once here, inherited by every fork
    import onnxruntime.quantization  # noqa: F401
    unknown = sorted(set(names) - set(cases()))
    if unknown:
        raise KeyError(f"no node test named {unknown}")
    ctx = multiprocessing.get_context("fork")
    todo, running, results = list(names), {}, {}
    with bar(total=len(names), desc="node tests", unit="case", enabled=progress) as pbar:
        while todo or running:
            while todo and len(running) < jobs:
                name = todo.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child, args=(name, send), daemon=True)
                p.start()
                send.close()
                running[recv] = (name, p, time.monotonic())
            for conn in wait(list(running), timeout=1.0):
                name, p, start = running.pop(conn)
                results[name] = _received(conn, name, p, time.monotonic() - start)
                pbar.update(1)
            for conn, (name, p, start) in list(running.items()):
                if time.monotonic() - start > timeout:
                    p.kill()
                    p.join()
                    del running[conn]
                    results[name] = {"op": op_of(name), "status": "failed", "reason": f"timed out after {timeout:g} s",
                                     "seconds": round(timeout, 1)}
                    pbar.update(1)
    return {n: results[n] for n in names}


def _received(conn, name: str, p, seconds: float) -> dict:
    try:
        result = conn.recv()
    except EOFError:
        p.join()
        result = {"op": op_of(name), "status": "failed", "reason": f"the process died (exit code {p.exitcode})"}
    p.join()
    conn.close()
    return {**result, "seconds": round(seconds, 1)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="*", help="run only the cases whose name holds one of these (results merged)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds a case may take")
    ap.add_argument("--render", action="store_true", help="only rewrite docs/models.md from the results JSON")
    a = ap.parse_args(argv)
    if not a.render:
        names = [n for n in cases() if not a.parts or any(p in n for p in a.parts)]
        start = time.monotonic()
        new = run_all(names, a.jobs, a.timeout)
        wall = time.monotonic() - start
        data = load_results() if RESULTS.exists() and a.parts else {"meta": {}, "cases": {}}
        data["cases"].update(new)
        if not a.parts:
            data["meta"] = {"onnx": onnx.__version__, "wall_s": round(wall, 1), "jobs": a.jobs,
                            "cores": os.cpu_count(), "timeout_s": a.timeout, "rule": RULE}
        save_results(data)
        print(f"{len(new)} cases in {wall:.0f} s: {dict(totals(new))}")
    write_doc(load_results())
    print(f"wrote {DOC.relative_to(ROOT)} from {RESULTS.relative_to(ROOT)}: {dict(totals(load_results()['cases']))}")


if __name__ == "__main__":
    main()
