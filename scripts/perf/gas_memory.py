"""Gas schedule v3 calibration: the evidence behind cvm/gas_v3.py's LARGE, EDGE and LOAD constants (which are
normative and never recomputed from this script at run time).

Method as for schedule v2 (scripts/perf/gas_calibration.py): every probe is timed relative to the baseline
probe (a typical 3x3 conv layer) timed alternately with it in the same run, on the slowest conforming path
(numba portable kernels, one thread, the per-step runner; thread CPU time), and the ratios become seconds
on the reference machine through gas_calibration.REFERENCE_BASELINE_S, then gas at EIP-7904's anchor:

    LARGE[row] = MEMORY_MARGIN x max over the row's probes of seconds_ref x anchor x FACTOR_SCALE / v1 units

The probes are data-movement nodes over tensors of 64 MiB (far larger than any cache), each with its row's
worst access pattern: gathers of random rows (one cache line or one element a row), transposes that read
one element a cache line, slices stepping past every line, concats and pads of 64 MiB, an upsampling
resize. The reference backend is timed beside (reported, not priced: the floor bench checks it).

EDGE and LOAD are measured the same way from what a call of a model that is not in the store does once:
verify and plan a node listing MAX_NODE_INPUTS inputs (per edge), decode, hash and verify 64 MiB of
constants (per byte).

    python scripts/perf/gas_memory.py measure --json out.json [--rounds 5]
    python scripts/perf/gas_memory.py constants out.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gas_calibration as cal  # noqa: E402  (the baseline probe, the timer, the reference machine)

MIB64 = 1 << 26
ROWS = 1 << 20  # a table's rows: the dimension limit


def _gather(width: int, dtype: str, chain: int = 1):
    def make(b, x, rng):
        hi = (1 << 31) - 1 if dtype == "int32" else 127
        table = rng.integers(-hi, hi, (ROWS, width)) if width > 1 else rng.permutation(ROWS)
        t = b.const(np.asarray(table), dtype=dtype)
        y = b.op("clip", x, lo=0, hi=ROWS - 1)
        for _ in range(chain):  # a chain looks up the looked-up values again (rows of one element)
            y = b.op("gather", y, t)
        return y
    return (1 << 16,), make, 21


def _probe_rows():
    """name -> (row, per-sample shape, builder, input bits)."""
    s8 = int(math.isqrt(MIB64))  # 8192: an 8192 x 8192 int8 tensor is 64 MiB
    return {
        "gather_line_rows": ("gather", *_gather(16, "int32")),  # 2^20 rows of one 64-byte line
        "gather_one_element": ("gather", *_gather(1, "int32")),  # 2^20 rows of one int32 (4 MiB)
        "gather_chain16": ("gather", *_gather(1, "int32", 16)),  # the attacker's: 16 chained lookups
        "transpose_2d": ("transpose", (s8, s8), lambda b, x, r: b.op("transpose", x, perm=(1, 0)), 8),
        "transpose_rank4": ("transpose", (64, 64, 64, 256), lambda b, x, r: b.op("transpose", x, perm=(3, 2, 1, 0)), 8),
        "slice_step_line": ("slice", (4096, 16384), lambda b, x, r: b.op(
            "slice", x, starts=(0, 0), ends=(4096, 16384), steps=(1, 64)), 8),
        "slice_step_rows": ("slice", (16384, 4096), lambda b, x, r: b.op(
            "slice", x, starts=(0, 0), ends=(16384, 4096), steps=(3, 67)), 8),
        "concat_axis1": ("concat", (s8, s8 // 2), lambda b, x, r: b.op("concat", x, x, axis=1), 8),
        "concat_axis0": ("concat", (s8 // 2, s8), lambda b, x, r: b.op("concat", x, x, axis=0), 8),
        "pad_last_axis": ("pad", (s8, s8 - 2), lambda b, x, r: b.op("pad", x, pads=(0, 1, 0, 1), value=5), 8),
        "resize_nearest_up": ("resize2d", (16, 1024, 1024), lambda b, x, r: b.op(
            "resize2d", x, size=(2048, 2048), mode=0, coord_h=(1, 0, 2), coord_w=(1, 0, 2), frac_bits=0), 8),
        "resize_linear_up": ("resize2d", (4, 1024, 1024), lambda b, x, r: b.op(
            "resize2d", x, size=(2048, 2048), mode=1, coord_h=(1, 0, 2), coord_w=(1, 0, 2), frac_bits=8), 8),
        "reshape_big": ("reshape", (s8, s8), lambda b, x, r: b.op("reshape", x, shape=(s8 // 2, s8 * 2)), 8),
        "flatten_big": ("flatten", (1024, 1024), lambda b, x, r: b.op("flatten", x), 32),  # the dimension limit
    }


def _build(shape, make, bits):
    import cvm
    b = cvm.GraphBuilder(opset=4)
    x = b.input("x", shape, bits)
    return b.build(make(b, x, np.random.default_rng(0)))


def _units(model, row: str) -> int:
    """v1 units of the probe's nodes of op `row` (a gather chain has 16), without the per-node charge."""
    from cvm.gas import SCHEDULE_V1
    from cvm.verify import Verifier
    v = Verifier(2)
    for i in model.graph.inputs:
        v.add_input(i)
    for name, values in model.graph.constants.items():
        v.add_constant(name, values)
    units = 0
    for node in model.graph.nodes:
        v.add_node(node)
        units += (v.costs[-1] - SCHEDULE_V1.node) if node.op == row else 0
    return units


def _reference_seconds(model, x) -> float:
    model.run(x, backend="reference")
    t = time.thread_time()
    model.run(x, backend="reference")
    return time.thread_time() - t


def measure(rounds: int, log=print) -> dict:
    base_model, base_x = next((m, x) for n, m, x in cal._rows() if n == cal.BASELINE)
    base = cal.Timed(base_model, base_x, 0.02)
    out = {}
    for name, (row, shape, make, bits) in _probe_rows().items():
        model = _build(shape, make, bits)
        x = cal._input(model, 1)
        probe = cal.Timed(model, x, 0.02)
        ratios = [probe.sample() / base.sample() for _ in range(rounds)]
        ref = _reference_seconds(model, x) / base.sample()
        out[name] = {"row": row, "units": _units(model, row), "ratio": float(np.median(ratios)), "reference_ratio": ref}
        log(f"[gas_memory] {name}: {out[name]['ratio']:.3f} x baseline (reference {ref:.3f})")
        del model, probe
    out.update(_cold(base, log))
    return {"baseline": cal.BASELINE, "reference_baseline_s": cal.REFERENCE_BASELINE_S, "probes": out}


def _cold(base, log) -> dict:
    """Per-edge and per-constant-byte times of loading a model that is not in the store."""
    import cvm
    from cvm.interp import numba as nb
    from cvm.limits import MAX_NODE_INPUTS
    b = cvm.GraphBuilder(opset=4)
    x = b.input("x", (1,), 8)
    pool = [b.op("relu", x) for _ in range(MAX_NODE_INPUTS)]  # distinct listings: each its own Arg, shape, copy
    outs = [b.op("concat", *pool, axis=0) for _ in range(64)]
    data = b.build(b.op("concat", *outs, axis=0)).to_bytes()
    big = cvm.GraphBuilder(opset=4)
    y = big.op("clip", big.input("x", (1,), 8), lo=0, hi=1023)
    table = np.random.default_rng(0).integers(-127, 128, (1024, MIB64 // 1024))
    heavy = big.build(big.op("gather", y, big.const(table, dtype="int8"))).to_bytes()

    def cold(blob):
        t = time.thread_time()
        m = cvm.Model.from_bytes(blob)
        nb.prepare(m.graph, m.analysis, isa="portable", threads=1, wholeplan="never")
        return time.thread_time() - t
    cold(data), cold(heavy)  # warm the kernels and imports once: a store reloads models, not the process
    per_edge = float(np.median([cold(data) for _ in range(3)])) / (65 * MAX_NODE_INPUTS) / base.sample()
    per_byte = float(np.median([cold(heavy) for _ in range(3)])) / MIB64 / base.sample()
    per_call = _call_seconds() / base.sample()
    log(f"[gas_memory] edge: {per_edge:.3e}, constant byte: {per_byte:.3e}, call: {per_call:.3e} x baseline")
    return {"edge": {"row": "EDGE", "units": 1, "ratio": per_edge},
            "constant_byte": {"row": "LOAD", "units": 1, "ratio": per_byte},
            "call": {"row": "CALL", "units": 1, "ratio": per_call}}


def _call_seconds(calls: int = 2000) -> float:
    """Thread seconds of one Model.run of a one-node model (a relu of one element): what every call pays
    whatever it runs (input checks, a buffer set, the kernel call, the output), as the precompile calls it.
    Schedule v2's CALL timed the prepared runner alone, without Model.run's checks."""
    import cvm
    b = cvm.GraphBuilder(opset=4)
    model = b.build(b.op("relu", b.input("x", (1,), 8)))
    x = np.ones((1, 1), np.int8)
    model.run(x)
    t = time.thread_time()
    for _ in range(calls):
        model.run(x)
    return (time.thread_time() - t) / calls


def derive(result: dict, anchor: float | None = None) -> dict:
    """{row: (gas per FACTOR_SCALE units of a LARGE row with its MEMORY_MARGIN, or gas per edge / per
    constant byte / per call, the probe that set it)}."""
    from cvm import gas_v2, gas_v3
    anchor = anchor or gas_v2.ANCHOR_GAS_PER_SECOND
    ref = result["reference_baseline_s"]
    rows: dict = {}
    for name, p in result["probes"].items():
        seconds = p["ratio"] * ref
        scale = 1 if p["row"] in ("EDGE", "LOAD", "CALL") else gas_v2.FACTOR_SCALE
        margin = gas_v3.MEMORY_MARGIN if p["row"] in gas_v3.LARGE or p["row"] == "CALL" else 1
        need = margin * seconds * anchor * scale / p["units"]
        if need > rows.get(p["row"], (0, ""))[0]:
            rows[p["row"]] = (need, name)
    return rows


def cmd_constants(path: str) -> int:
    from cvm import gas_v3
    rows = derive(json.loads(Path(path).read_text()))
    committed = {**gas_v3.LARGE, "EDGE": gas_v3.EDGE, "LOAD": gas_v3.LOAD_NUM / gas_v3.LOAD_DEN, "CALL": gas_v3.CALL}
    for row, (need, probe) in sorted(rows.items()):
        print(f"{row:<10} needs {need:10.4g} (probe {probe}); committed {committed.get(row)}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--json", required=True)
    m.add_argument("--rounds", type=int, default=5)
    c = sub.add_parser("constants")
    c.add_argument("path")
    args = p.parse_args(argv)
    if args.cmd == "measure":
        Path(args.json).write_text(json.dumps(measure(args.rounds), indent=1))
        return cmd_constants(args.json)
    return cmd_constants(args.path)


if __name__ == "__main__":
    sys.exit(main())
