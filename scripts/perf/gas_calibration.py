"""Gas schedule v2 calibration: each op's run time per unit of its cost formula on the slowest
conforming path (the numba backend's portable kernels, one thread), turned into gas at a stated
gas-per-second anchor, as EIP-7904 prices the EVM (new_gas = anchor_rate * runtime, the anchor 60
million gas per second, the worst case across implementations and inputs).

    python scripts/perf/gas_calibration.py measure --json gas_v2.json [--seconds 0.3] [--anchor 60e6]
    python scripts/perf/gas_calibration.py table gas_v2.json MODEL.cvm ...   # gas v1 vs v2

Units of a node: its v1 cost without the per-node charge (cvm.gas: MACs, elements, compares,
requants, lookups, divisions, each with its v1 weight), so v2 keeps each op's formula and scales it:
    gas_v2(node) = NODE + NODE[op] + ceil(units(node) * FACTOR[op])     FACTOR[op] = anchor * (s per unit)
NODE = anchor * (s per node, tiny-node chains); NODE[op]: an op's own fixed part (its probes of few
units); CALL = anchor * (s of a one-node call); IO_BYTE = anchor * (s per input byte moved). The probes
are the adversarial catalogue (cvm/adversarial.py: the shapes built to be cheap in gas and slow)
and typical layers of real models (PROBES); each op's factor is the largest any probe needs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import defaultdict

import numpy as np

SMALL_UNITS = 1000  # a probe with fewer units per node than this measures an op's fixed part
ANCHOR = 60e6  # gas per second: EIP-7904's anchor rate (https://eips.ethereum.org/EIPS/eip-7904)


def _probe(op, shape, make):
    import cvm
    b = cvm.GraphBuilder()
    x = b.input("x", shape, 8)
    return b.build(make(b, x, np.random.default_rng(0))), op


def _conv(cin, cout, k, groups=1, stride=1):
    def make(b, x, rng):
        w = rng.integers(-127, 128, (cout, cin // groups, k, k))
        return b.op("conv2d", x, b.const(w), pads=(k // 2,) * 4, groups=groups, strides=(stride, stride))
    return make


PROBES = {  # name -> (op, per-sample input shape, builder): typical layers, 8-bit input
    "conv3x3_64": ("conv2d", (64, 16, 16), _conv(64, 64, 3)),
    "conv1x1_128": ("conv2d", (128, 14, 14), _conv(128, 128, 1)),
    "conv7x7_stem": ("conv2d", (3, 56, 56), _conv(3, 32, 7, stride=2)),
    "depthwise3x3": ("conv2d", (96, 28, 28), _conv(96, 96, 3, groups=96)),
    "dense_512": ("dense", (512,), lambda b, x, r: b.op("dense", x, b.const(r.integers(-127, 128, (512, 512))))),
    "add": ("add", (64, 32, 32), lambda b, x, r: b.op("add", x, b.const(r.integers(-9, 9, (64, 1, 1))))),
    "mul": ("mul", (64, 32, 32), lambda b, x, r: b.op("mul", x, x)),
    "requant": ("requant", (64, 32, 32), lambda b, x, r: b.op("requant", x, b.const([12345]), shift=9, bits=8)),
    "lut": ("lut", (64, 32, 32), lambda b, x, r: b.op("lut", x, b.const(r.integers(-127, 128, 255)), offset=-127)),
    "relu": ("relu", (64, 32, 32), lambda b, x, r: b.op("relu", x)),
    "div": ("div", (64, 32, 32), lambda b, x, r: b.op("div", x, b.const([7]))),
    "max_pool3x3": ("max_pool2d", (64, 32, 32), lambda b, x, r: b.op("max_pool2d", x, kernel=(3, 3), strides=(2, 2))),
    "sum_global": ("sum", (64, 32, 32), lambda b, x, r: b.op("sum", x, axes=(1, 2), keepdims=0)),
    "transpose": ("transpose", (64, 32, 32), lambda b, x, r: b.op("transpose", x, perm=(1, 2, 0))),
    "concat": ("concat", (64, 32, 32), lambda b, x, r: b.op("concat", x, x, axis=1)),
    "pad": ("pad", (64, 32, 32), lambda b, x, r: b.op("pad", x, pads=(0, 1, 1, 0, 1, 1), value=0)),
    "slice": ("slice", (64, 32, 32), lambda b, x, r: b.op("slice", x, starts=(0, 0, 0), ends=(64, 32, 32), steps=(1, 2, 1))),
}


def _time(model, x, seconds: float) -> float:
    """Median thread CPU seconds of a warm run of the numba backend's portable kernels, one thread."""
    from cvm.interp import numba as nb
    runner = nb.prepare(model.graph, model.analysis, isa="portable", threads=1)
    feed = {model.inputs[0].name: x}
    runner(feed)
    times, start = [], time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < seconds and len(times) < 20000):
        t = time.thread_time()
        runner(feed)
        times.append(time.thread_time() - t)
    return float(np.median(times))


def units_by_op(model) -> tuple[dict, int]:
    """{op: v1 units (cost minus the per-node charge)}, nodes."""
    from cvm import gas
    per = defaultdict(int)
    for node, cost in zip(model.graph.nodes, model.analysis.node_costs):
        per[node.op] += cost - gas.GAS_PER_NODE
    return dict(per), len(model.graph.nodes)


def _input(model, batch: int):
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    return np.random.default_rng(0).integers(-m, m + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)


def measure(seconds: float, anchor: float, log=print) -> dict:
    from cvm.adversarial import CATALOGUE, build
    call, _ = _probe("relu", (1,), lambda b, x, r: b.op("relu", x))
    t_call = _time(call, _input(call, 1), seconds)
    rows = []
    for name in CATALOGUE:
        model, x = build(name)
        rows.append((name, model, x))
    for name, (op, shape, make) in PROBES.items():
        model, _ = _probe(op, shape, make)
        rows.append((name, model, _input(model, 8)))
    measured = []
    for name, model, x in rows:
        t = max(0.0, _time(model, x, seconds) - t_call)
        per, nodes = units_by_op(model)
        io = int(x.nbytes) + sum(int(np.prod(o.shape[1:], dtype=np.int64)) * o.dtype.itemsize for o in model.outputs) * int(x.shape[0])
        measured.append({"probe": name, "seconds": t, "nodes": nodes, "units": per, "batch": int(x.shape[0]), "io_bytes": io})
        log(f"{name:<22} {t * 1e6:10.1f} us  nodes {nodes:>6}  units {per}")
    # per node: the tiny-node chains (units per node <= 200 at batch 1), time per node
    t_node = max(r["seconds"] / r["nodes"] for r in measured
                 if r["nodes"] >= 100 and sum(r["units"].values()) * r["batch"] <= 200 * r["nodes"])
    # per input/output byte: probes that move a large input for almost no units (a stride-2^20 conv,
    # a step-2^20 slice): the call pays these bytes (v1: GAS_PER_IO_BYTE), not the nodes
    io_bound = [r for r in measured if r["io_bytes"] >= (1 << 20) and sum(r["units"].values()) * r["batch"] <= 1000]
    t_byte = max(r["seconds"] / r["io_bytes"] for r in io_bound)
    # per op: a fixed part per node (probes of few units: what a node of that op costs beyond the
    # generic node, e.g. a conv's packing and path setup) and a part per unit (probes of many units)
    fixed, factor, worst = defaultdict(float), defaultdict(float), {}
    split = []
    for r in measured:
        if r in io_bound:  # priced per byte, by the call
            continue
        units = {op: u * r["batch"] for op, u in r["units"].items()}
        op = max(units, key=units.get)
        rest = max(0.0, r["seconds"] - r["nodes"] * t_node)
        split.append((r, op, units[op], rest))
        if units[op] < SMALL_UNITS * r["nodes"]:
            fixed[op] = max(fixed[op], rest / r["nodes"])
    for r, op, u, rest in split:
        if u >= SMALL_UNITS * r["nodes"] and (rest - fixed[op] * r["nodes"]) / u > factor[op]:
            factor[op], worst[op] = (rest - fixed[op] * r["nodes"]) / u, r["probe"]
    return {"anchor_gas_per_s": anchor, "seconds_per_call": t_call, "seconds_per_node": t_node,
            "seconds_per_io_byte": t_byte, "io_byte_gas": anchor * t_byte,
            "seconds_per_unit": dict(factor), "probes": measured,
            "call_gas": math.ceil(anchor * t_call), "node_gas": math.ceil(anchor * t_node),
            "factor": {op: anchor * s for op, s in factor.items()}, "worst_probe": worst,
            "op_node_gas": {op: math.ceil(anchor * s) for op, s in fixed.items()},
            "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}}


def gas_v2(model, cal: dict) -> int:
    """The model's gas under the calibrated v2 schedule (per sample, without the call charge)."""
    from cvm import gas
    total = 0
    for node, cost in zip(model.graph.nodes, model.analysis.node_costs):
        f = cal["factor"].get(node.op, max(cal["factor"].values()))  # an op no probe measured: the dearest
        node = cal["node_gas"] + cal["op_node_gas"].get(node.op, 0)
        total += node + math.ceil((cost - gas.GAS_PER_NODE) * f)
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--json", required=True)
    m.add_argument("--seconds", type=float, default=0.3)
    m.add_argument("--anchor", type=float, default=ANCHOR)
    t = sub.add_parser("table")
    t.add_argument("calibration")
    t.add_argument("models", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        cal = measure(a.seconds, a.anchor)
        with open(a.json, "w") as f:
            json.dump(cal, f, indent=1)
        print(f"call {cal['call_gas']} gas, node {cal['node_gas']} gas, io byte {cal['io_byte_gas']:.3f} gas; "
              f"factors (gas per v1 unit, the probe that set it):")
        for op, f in sorted(cal["factor"].items()):
            print(f"  {op:<12} {f:8.4f}  {cal['worst_probe'].get(op, '-'):<22} node +{cal['op_node_gas'].get(op, 0)}")
        return 0
    import cvm
    cal = json.load(open(a.calibration))
    print(f"{'model':<28} {'nodes':>6} {'gas v1':>14} {'gas v2':>14} {'v2/v1':>6} {'portable 1-thread s (v2 / anchor)':>34}")
    for path in a.models:
        model = cvm.load(path)
        v2 = gas_v2(model, cal)
        print(f"{os.path.basename(path):<28} {len(model.graph.nodes):>6} {model.gas:>14,} {v2:>14,} "
              f"{v2 / model.gas:>6.2f} {v2 / cal['anchor_gas_per_s']:>34.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
