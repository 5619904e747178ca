"""fhe_bench: what an encrypted inference of a CVM model costs (docs/fhe.md, "Measured").

    .venv-fhe/bin/python -m cvm.tools.fhe_bench fixtures/models/digits_mlp_fhe.cvm --lookup-bits 8
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from ..interp.fhe import DEFAULT_LOOKUP_BITS, FHERunner, prepare


def fhe_bench(model, x, *, lookup_bits: int = DEFAULT_LOOKUP_BITS, inputset=None, samples: int = 1,
              key_dir: str | None = None) -> dict:
    """Compile, generate fresh keys (timed, not loaded from the cache), run `samples` encrypted
    inferences of x (an integer batch) and check them against the reference interpreter."""
    x = np.asarray(x)
    name = model.inputs[0].name
    with tempfile.TemporaryDirectory(prefix="cvm-fhe-bench-") as tmp:
        runner: FHERunner = prepare(model.graph, model.analysis, lookup_bits=lookup_bits, inputset=inputset,
                                    key_dir=key_dir or tmp)
        t0 = time.perf_counter()
        circuit = runner._ensure_compiled()
        circuit.enable_fhe_execution()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        key_path = runner.keygen(force=True)
        keygen_s = time.perf_counter() - t0
        key_file_bytes = os.path.getsize(key_path)
        batch = x[:samples]
        ref = model.run(batch, backend="reference")
        t0 = time.perf_counter()
        out = runner({name: batch}, mode="execute")
        latency = (time.perf_counter() - t0) / len(batch)
    out = out[model.graph.outputs[0]]
    return {
        "lookup_bits": lookup_bits,
        "compile_s": round(compile_s, 3),
        "keygen_s": round(keygen_s, 3),
        "latency_s": round(latency, 3),
        "samples": len(batch),
        "bit_exact": bool(np.array_equal(out, np.asarray(ref).reshape(out.shape))),
        "key_bytes": int(circuit.size_of_secret_keys + circuit.size_of_bootstrap_keys + circuit.size_of_keyswitch_keys),
        "evaluation_key_bytes": int(circuit.size_of_bootstrap_keys + circuit.size_of_keyswitch_keys),
        "key_file_bytes": int(key_file_bytes),
        "circuit_bit_width": int(circuit.graph.maximum_integer_bit_width()),
        "max_table_bits": max((lk.plan.tlu_bits for lk in runner.lookups.values()), default=0),
        "pbs_count": int(circuit.programmable_bootstrap_count),
        "global_p_error": float(circuit.global_p_error),
        "input_bytes": int(circuit.size_of_inputs),
        "output_bytes": int(circuit.size_of_outputs),
    }


def main(argv=None) -> None:
    import cvm

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a .cvm file")
    p.add_argument("--input", help=".npy integer batch (default: all-zero samples)")
    p.add_argument("--lookup-bits", type=int, default=DEFAULT_LOOKUP_BITS)
    p.add_argument("--samples", type=int, default=1)
    a = p.parse_args(argv)
    model = cvm.load(a.model)
    if a.input:
        x = np.load(a.input)
    else:
        spec = model.inputs[0]
        x = np.zeros((a.samples,) + spec.shape[1:], spec.dtype)
    print(json.dumps(fhe_bench(model, x, lookup_bits=a.lookup_bits, samples=a.samples), indent=2))


if __name__ == "__main__":
    main()
