"""Measure the tree fixtures and a 100-tree depth-6 XGBoost model: decision agreement with the float
model (near-ties apart), regression error against float, gas per sample, and latency of the integer model
(numba) against onnxruntime on the same ONNX file and against the library's own predict.

    .venv/bin/python scripts/trees/measure.py [--quick] [--data NAME]

Writes .cache/models/trees_table.md (inserted into docs/models.md by scripts/models/models_md.py) and
prints the same table plus the 100-tree model's figures. Timings are medians of repeated runs on this
machine; --quick measures fewer repetitions.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "fixtures" / "train"))

import onnxruntime as ort  # noqa: E402

from cvm.tools.bench import time_calls  # noqa: E402
from mrt.pipeline import convert  # noqa: E402
from mrt.trees.agreement import compare  # noqa: E402
from mrt.trees.datasets import split  # noqa: E402

FIXTURES = ROOT / "fixtures" / "trees"
CACHE = ROOT / ".cache" / "models"
LAST = CACHE / "trees_measure.json"  # the last full run's figures, which a --data run updates


def median_us(fn, reps: int) -> float:
    return float(np.median(time_calls(fn, 0.0, reps, reps))) * 1e6


def pre_transform(transform, probs):
    """onnxruntime's probabilities back in the integer model's units (before the client's sigmoid/softmax)."""
    if transform == "sigmoid":
        p = np.clip(probs.astype(np.float64), 1e-12, 1 - 1e-12)
        return np.log(p) - np.log1p(-p)
    if transform == "softmax":
        return np.log(np.clip(probs.astype(np.float64), 1e-30, None))
    return probs


def measure(onnx_bytes: bytes, xtr, xte, library, reps: int) -> dict:
    sess = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    ref = sess.run(None, {name: xte})[-1].reshape(len(xte), -1)
    model = convert(onnx_bytes, xtr, progress=False)
    q = model.quantize_input(xte)
    y = model.run(q, backend="numba")
    assert np.array_equal(y, model.run(q, backend="reference"))
    got = model.dequantize_output(y).reshape(ref.shape)
    step = float(np.max(model.outputs[0].scale))
    row = {"gas": model.gas, "nodes": len(model.graph.nodes), "step": step}
    if ref.shape[1] > 1:
        row.update(compare(pre_transform(model.meta.get("output_transform"), ref), got, 2 * step))
    else:
        row.update(samples=len(xte), max_err=float(np.abs(got - ref).max()))
    one, q1 = xte[:1], q[:1]
    row["numba_us"] = median_us(lambda: model.run(q1, backend="numba"), reps)
    row["numba_batch_us"] = median_us(lambda: model.run(q, backend="numba"), max(3, reps // 10)) / len(xte)
    row["encode_us"] = median_us(lambda: model.quantize_input(one), reps)
    row["ort_us"] = median_us(lambda: sess.run(None, {name: one}), reps)
    row["ort_batch_us"] = median_us(lambda: sess.run(None, {name: xte}), max(3, reps // 10)) / len(xte)
    if library is not None:
        predict = library.predict_proba if hasattr(library, "predict_proba") else library.predict
        row["lib_us"] = median_us(lambda: predict(one), max(3, reps // 10))
        row["lib_batch_us"] = median_us(lambda: predict(xte), max(3, reps // 10)) / len(xte)
    return row


def fixtures(reps: int, data: str | None = None) -> dict:
    from trees import _families  # fixtures/train/trees.py: the same estimators, refitted (same seeds)
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    rows = {}
    for key, entry in sorted(manifest.items()):
        if data and entry["data"] != data:
            continue
        xtr, xte, ytr, yte = split(entry["data"])
        classify = entry["task"] == "classification"
        library = None
        if entry["family"] in _families(classify, 10 if entry["data"] == "digits" else 3):
            library = _families(classify, len(np.unique(ytr)) if classify else 1)[entry["family"]].fit(xtr, ytr)
        rows[key] = {**entry, **measure((FIXTURES / entry["file"]).read_bytes(), xtr, xte, library, reps)}
        if not classify:
            rows[key]["float_mae"] = entry["float_test_mae"]
        print(key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[key].items()}, flush=True)
    return rows


def table(rows: dict) -> str:
    lines = ["Integer models use opset-1 ops only (inputs as threshold codes). Agreement: test samples whose "
             "argmax equals onnxruntime's (a near-tie: the float top-2 margin is within 2 output steps); "
             "regressors: max |integer - float| against the float model's own MAE. Latency per sample at batch 1 "
             "(and per sample at the test split's batch), medians on this machine (2 cores).", "",
             "| model | data | gas/sample | agreement (near-ties) | error vs float | numba us | onnxruntime us | "
             "library predict us |", "|---|---|---|---|---|---|---|---|"]
    for key, r in rows.items():
        if "agree" in r:
            agree = f"{r['agree']}/{r['samples']} ({r['near_ties']} near-ties, {r['disagree']} other misses)"
            err = "-"
        else:
            agree, err = "-", f"{r['max_err']:.3g} (MAE {r['float_mae']:.3g})"
        lib = f"{r['lib_us']:.0f} ({r['lib_batch_us']:.2f})" if "lib_us" in r else "-"
        lines.append(f"| {key} | {r['data']} | {r['gas']:,} | {agree} | {err} | {r['numba_us']:.0f} "
                     f"({r['numba_batch_us']:.2f}) | {r['ort_us']:.0f} ({r['ort_batch_us']:.2f}) | {lib} |")
    return "\n".join(lines)


def big_models(reps: int) -> dict:
    """100 trees of depth 6, the case the lowering was chosen on: XGBoost on cancer (binary; its trees stop
    splitting early on 426 samples) and a RandomForest on digits (10 classes; full-depth trees)."""
    import xgboost as xgb
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.ensemble import RandomForestClassifier
    from trees import export
    out = {}
    xtr, xte, ytr, _ = split("cancer")
    m = xgb.XGBClassifier(n_estimators=100, max_depth=6, random_state=0, n_jobs=1).fit(xtr, ytr)
    onx = convert_xgboost(m, initial_types=[("x", FloatTensorType([None, xtr.shape[1]]))], target_opset=15)
    out["xgb100_depth6"] = {**measure(onx.SerializeToString(), xtr, xte, m, reps), "data": "cancer",
                            "native_traversal_us": native_traversal_us(onx, xtr, xte, reps)}
    xtr, xte, ytr, _ = split("digits")
    m = RandomForestClassifier(n_estimators=100, max_depth=6, random_state=0, n_jobs=1).fit(xtr, ytr)
    onx = export(m, "rf", xtr.shape[1])
    out["rf100_depth6"] = {**measure(onx.SerializeToString(), xtr, xte, m, reps), "data": "digits",
                           "native_traversal_us": native_traversal_us(onx, xtr, xte, reps)}
    return out


def native_traversal_us(onx, xtr, xte, reps: int) -> float:
    """What a dedicated tree op would do: walk each tree on the integer codes (numba, one sample). A
    prototype for the comparison only, not an op."""
    import numba
    from mrt.onnx_import import import_onnx
    g = import_onnx(onx)
    node = next(n for n in g.nodes if n.op == "tree_ensemble")
    feature, threshold, strict, left, right, leaves, base = [g.initializers[i] for i in node.inputs[1:]]
    model = convert(onx.SerializeToString(), xtr, progress=False)
    codes = model.meta["input_thresholds"][model.inputs[0].name]
    k = np.zeros(feature.shape, np.int64)
    for t in range(feature.shape[0]):
        for n in range(feature.shape[1]):
            if feature[t, n] >= 0:
                k[t, n] = 2 * codes[feature[t, n]].index(float(threshold[t, n])) + 1 - strict[t, n]
    qleaves = np.round(leaves[..., 0] * 2 ** 20).astype(np.int64)  # one class: the walk's cost is per tree

    @numba.njit(cache=False)
    def walk(c, feature, k, left, right, qleaves):
        total = 0
        for t in range(feature.shape[0]):
            n = 0
            while n >= 0:
                n = left[t, n] if c[feature[t, n]] <= k[t, n] else right[t, n]
            total += qleaves[t, -n - 1]
        return total

    c = model.quantize_input(xte[:1])[0].astype(np.int64)
    return median_us(lambda: walk(c, feature, k, left, right, qleaves), reps)


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer timing repetitions (30, not 300)")
    ap.add_argument("--data", help="measure only this data set's fixtures; the other rows and the 100-tree "
                    "models are kept from the last full run (.cache/models/trees_measure.json)")
    args = ap.parse_args()
    reps = 30 if args.quick else 300
    if args.data and not LAST.exists():
        return partial_run(args.data, reps)
    if args.data:
        last = json.loads(LAST.read_text())
        rows = dict(sorted({**last.pop("fixtures"), **fixtures(reps, args.data)}.items()))
        big = last
    else:
        rows = fixtures(reps)
        big = big_models(reps)
    text = table(rows) + "\n\n100 trees of depth 6:\n\n" + table(big).split("\n", 2)[2]
    text += "\n\nA dedicated tree op walking the trees on the same codes (numba prototype, batch 1, one class): " + \
        ", ".join(f"{k} {v['native_traversal_us']:.1f} us" for k, v in big.items()) + "."
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "trees_table.md").write_text(text + "\n")
    LAST.write_text(json.dumps({"fixtures": rows, **big}, indent=1))
    print(text)


def partial_run(data: str, reps: int) -> int:
    """--data before any full run (a fresh clone): that data set's rows alone, printed; nothing is written, since
    docs/models.md's table needs every row and the 100-tree models."""
    rows = fixtures(reps, data)
    if not rows:
        print(f"no tree fixture uses data set {data!r} (fixtures/trees/manifest.json)", file=sys.stderr)
        return 2
    print(table(rows))
    print(f"\n{LAST.relative_to(ROOT)} does not exist yet, so only {data}'s rows were measured and nothing was "
          f"written; the table for docs/models.md needs one full run first: {Path(__file__).relative_to(ROOT)} "
          "[--quick]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
