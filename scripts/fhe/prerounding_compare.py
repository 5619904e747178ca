"""The digits MLP on the fhe target with pre-rounding sized from the proven (worst-case) range and
from the calibrated range (QuantConfig.lookup_range): accuracy on every test image, the circuit in
clear mode on every image and in simulation on a few against the reference, then fresh keys and a
few encrypted images (fresh keys; wall and CPU seconds). One JSON line per variant (docs/fhe.md).

    .venv-fhe/bin/python scripts/fhe/prerounding_compare.py --encrypted 2 --ranges proven,calibrated,calibrated:7
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import mrt
from cvm.interp import fhe as F
from mrt.evaluate import evaluate

ROOT = Path(__file__).parents[2] / "fixtures"
ONNX = ROOT / "models" / "digits_mlp.onnx"


def measure(lookup_range: str, lut_bits: int, encrypted: int, simulated: int, fhe_bits: int | None = None) -> dict:
    """fhe_bits: the backend's lookup budget (default lut_bits); one bit more lets the calibrated
    model's rounded values (one bit wider than lut_bits on digits) take one wider table instead of
    the split, for comparison."""
    fhe_bits = fhe_bits or lut_bits
    with np.load(ROOT / "data" / "digits_mlp_calib.npz") as c, np.load(ROOT / "data" / "digits_mlp_test.npz") as t:
        calib, x, y = c["x"], t["x"], t["y"]
    model = mrt.convert(ONNX, calib, target="fhe", lut_input_bits=lut_bits, lookup_range=lookup_range,
                        progress=False)
    res = evaluate(ONNX, model, x, y, layers=False, backend="reference")
    xq, out = model.quantize_input(x), model.graph.outputs[0]
    want = model.run(xq, backend="reference")
    inputset = model.quantize_input(calib)
    runner = F.prepare(model.graph, model.analysis, lookup_bits=fhe_bits, inputset=inputset)
    t0 = time.process_time()
    clear_ok = bool(np.array_equal(runner({"x": xq}, mode="clear")[out], want))
    sim_ok = bool(np.array_equal(runner({"x": xq[:simulated]}, mode="simulate")[out], want[:simulated]))
    row = {"lookup_range": lookup_range, "lut_input_bits": lut_bits, "fhe_lookup_bits": fhe_bits, "test_images": len(y),
           "float_accuracy": round(res.float_accuracy, 4), "int_accuracy": round(res.int_accuracy, 4),
           "agreement": round(res.agreement, 4), "cosine": round(res.cosine, 5),
           "clear_equals_reference": clear_ok, f"simulate_equals_reference_{simulated}": sim_ok,
           "clear_and_simulate_cpu_s": round(time.process_time() - t0, 1),
           "lookups": {k: (v["shift"], v["table_bits"]) for k, v in runner.lookup_report().items()}}
    if encrypted:
        row.update(encrypted_cost(model, xq[:encrypted], want[:encrypted], fhe_bits, inputset))
    return row


def encrypted_cost(model, xq, want, lut_bits: int, inputset) -> dict:
    """Fresh keys and encrypted runs, in wall and CPU seconds (this process, all its threads)."""
    out = model.graph.outputs[0]
    with tempfile.TemporaryDirectory(prefix="cvm-fhe-cmp-") as tmp:
        runner = F.prepare(model.graph, model.analysis, lookup_bits=lut_bits, inputset=inputset, key_dir=tmp)
        circuit = runner._ensure_compiled()
        circuit.enable_fhe_execution()
        w, c = time.perf_counter(), time.process_time()
        runner.keygen(force=True)
        keygen = (time.perf_counter() - w, time.process_time() - c)
        w, c = time.perf_counter(), time.process_time()
        got = runner({"x": xq}, mode="execute")[out]
        run = ((time.perf_counter() - w) / len(xq), (time.process_time() - c) / len(xq))
    return {"encrypted_samples": len(xq), "encrypted_equals_reference": bool(np.array_equal(got, want)),
            "keygen_wall_s": round(keygen[0], 1), "keygen_cpu_s": round(keygen[1], 1),
            "sample_wall_s": round(run[0], 2), "sample_cpu_s": round(run[1], 2),
            "evaluation_key_bytes": int(circuit.size_of_bootstrap_keys + circuit.size_of_keyswitch_keys),
            "pbs_count": int(circuit.programmable_bootstrap_count),
            "circuit_bit_width": int(circuit.graph.maximum_integer_bit_width())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lut-bits", type=int, default=6)
    p.add_argument("--encrypted", type=int, default=2, help="encrypted images per variant (0: none)")
    p.add_argument("--simulated", type=int, default=8)
    p.add_argument("--ranges", default="proven,calibrated,calibrated:7,channels",
                   help="lookup_range values; RANGE:BITS runs the backend with a lookup budget of BITS")
    a = p.parse_args(argv)
    for spec in a.ranges.split(","):
        lookup_range, _, bits = spec.partition(":")
        print(json.dumps(measure(lookup_range, a.lut_bits, a.encrypted, a.simulated, int(bits) if bits else None)),
              flush=True)


if __name__ == "__main__":
    main()
