"""Gas schedule v2 calibration: the evidence behind cvm/gas_v2.py's constants (which are normative and
never recomputed from this script's output at run time).

Each probe (cvm.tools.adversarial's catalogue of shapes built to be cheap in gas and slow, and typical layers
of real models, PROBES) is timed on the slowest conforming path: the numba backend's portable kernels,
one thread, thread CPU time. Times are measured RELATIVE to one fixed baseline probe (BASELINE, a
typical 3x3 conv layer) timed alternately with each probe in the same run, so that a loaded or slower
machine reproduces the ratios; the ratios become seconds on the reference machine through the
baseline's time there (REFERENCE_BASELINE_S, measured on a quiet 16-core Xeon), and gas at EIP-7904's
anchor (new_gas = anchor_rate x worst-case runtime, anchor 60 million gas per second):

    seconds_ref(probe) = ratio(probe) * REFERENCE_BASELINE_S
    node gas = NODE + OP_NODE[op] + ceil(units * FACTOR[op] / FACTOR_SCALE)   (cvm.gas_v2)

Units of a node: its v1 cost without the per-node charge (the v1 formulas: MACs, elements, compares,
requants, lookups, divisions with their v1 weights). NODE = anchor * (s per node of the tiny-node
chains); OP_NODE[op]: an op's fixed part beyond NODE (its probes of few units); FACTOR[op]: the largest
(s per unit) any probe of op needs beyond its fixed part; CALL: a one-node call; IO: s per input byte
of the probes that move a large input for almost no units.

    python scripts/perf/gas_calibration.py measure --json out.json [--rounds 9] [--min-sample 0.004]
    python scripts/perf/gas_calibration.py constants out.json      # derived constants vs cvm.gas_v2
    python scripts/perf/gas_calibration.py table MODEL.cvm ...     # gas v1 vs v2 (committed constants)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import defaultdict

import numpy as np

LARGE_UNITS = 1 << 15  # a probe with at least this many units per node measures an op's time per unit
BASELINE = "conv3x3_64"  # every probe is timed relative to this one, in the same run
# The baseline's portable one-thread time per call (its 8-sample batch) on the reference machine: the
# project's 2-vCPU AMD EPYC (Zen 4, AVX-512) development VM, thread CPU time, median of 3 runs of 64
# probes x 7 alternations at load average ~4.9 (other engineers' jobs), November 2026:
# scripts/perf/results/gas_v2_calibration_epyc2_run{1,2,3}.json. (The same probe took 11,111 us on the
# 16-core Xeon device machine at commit a67c52c, scripts/perf/results/gas_v2_calibration_xeon16.json:
# that run's vectorizable kernels were ~5x slower than here, its per-node overheads ~1.5-2.5x, so its
# ratios differ; it is kept as evidence, not as the reference.)
REFERENCE_BASELINE_S = 2245.4e-6


def _probe(make, shape, bits=8):
    import cvm
    b = cvm.GraphBuilder()
    x = b.input("x", shape, bits)
    return b.build(make(b, x, np.random.default_rng(0)))


def _conv(cin, cout, k, groups=1, stride=1):
    def make(b, x, rng):
        w = rng.integers(-127, 128, (cout, cin // groups, k, k))
        return b.op("conv2d", x, b.const(w), pads=(k // 2,) * 4, groups=groups, strides=(stride, stride))
    return make


def _resize(mode):
    def make(b, x, rng):
        return b.op("resize2d", x, size=(64, 64), mode=mode, coord_h=(1, 0, 2), coord_w=(1, 0, 2),
                    frac_bits=8 if mode else 0)
    return make


def _matmul(b, x, rng):
    return b.op("matmul", x, b.op("transpose", x, perm=(0, 2, 1)))


PROBES = {  # name -> (per-sample input shape, builder[, input bits]): typical layers, 8-bit input
    "conv3x3_64": ((64, 16, 16), _conv(64, 64, 3)),
    "conv1x1_128": ((128, 14, 14), _conv(128, 128, 1)),
    "conv7x7_stem": ((3, 56, 56), _conv(3, 32, 7, stride=2)),
    "depthwise3x3": ((96, 28, 28), _conv(96, 96, 3, groups=96)),
    "conv_transpose4x4": ((64, 16, 16), lambda b, x, r: b.op(
        "conv_transpose2d", x, b.const(r.integers(-127, 128, (64, 32, 4, 4))), strides=(2, 2), pads=(1, 1, 1, 1))),
    "dense_512": ((512,), lambda b, x, r: b.op("dense", x, b.const(r.integers(-127, 128, (512, 512))))),
    "matmul_attention": ((4, 64, 32), _matmul),
    "add": ((64, 32, 32), lambda b, x, r: b.op("add", x, b.const(r.integers(-9, 9, (64, 1, 1))))),
    "sub": ((64, 32, 32), lambda b, x, r: b.op("sub", x, b.const(r.integers(-9, 9, (64, 1, 1))))),
    "mul": ((64, 32, 32), lambda b, x, r: b.op("mul", x, x)),
    "requant": ((64, 32, 32), lambda b, x, r: b.op("requant", x, b.const([12345]), shift=9, bits=8)),
    "lut": ((64, 32, 32), lambda b, x, r: b.op("lut", x, b.const(r.integers(-127, 128, 255)), offset=-127)),
    "relu": ((64, 32, 32), lambda b, x, r: b.op("relu", x)),
    "clip": ((64, 32, 32), lambda b, x, r: b.op("clip", x, lo=-50, hi=60)),
    "div": ((64, 32, 32), lambda b, x, r: b.op("div", x, b.const([7]))),
    "isqrt": ((64, 32, 32), lambda b, x, r: b.op("isqrt", x), 16),
    "gather_embedding": ((128,), lambda b, x, r: b.op("gather", b.op("relu", x), b.const(
        r.integers(-127, 128, (1000, 384)), dtype="int8"))),
    "resize_nearest": ((64, 32, 32), _resize(0)),
    "resize_linear": ((64, 32, 32), _resize(1)),
    "max_pool3x3": ((64, 32, 32), lambda b, x, r: b.op("max_pool2d", x, kernel=(3, 3), strides=(2, 2))),
    "sum_global": ((64, 32, 32), lambda b, x, r: b.op("sum", x, axes=(1, 2), keepdims=0)),
    "max_global": ((64, 32, 32), lambda b, x, r: b.op("max", x, axes=(1, 2), keepdims=0)),
    "transpose": ((64, 32, 32), lambda b, x, r: b.op("transpose", x, perm=(1, 2, 0))),
    "reshape": ((64, 32, 32), lambda b, x, r: b.op("reshape", x, shape=(64, 1024))),
    "flatten": ((64, 32, 32), lambda b, x, r: b.op("flatten", x)),
    "concat": ((64, 32, 32), lambda b, x, r: b.op("concat", x, x, axis=1)),
    "pad": ((64, 32, 32), lambda b, x, r: b.op("pad", x, pads=(0, 1, 1, 0, 1, 1), value=0)),
    "slice": ((64, 32, 32), lambda b, x, r: b.op("slice", x, starts=(0, 0, 0), ends=(64, 32, 32), steps=(1, 2, 1))),
}


def _groups(groups, cg, og, hw, k=1):
    def make(b, x, rng):
        w = rng.integers(-1, 2, (groups * og, cg, k, k))
        return b.op("conv2d", x, b.const(w), groups=groups, pads=(k // 2,) * 4)
    return (groups * cg, hw, hw), make


def _groups_t(groups, cg, og, hw, k=1, stride=1):
    def make(b, x, rng):
        w = rng.integers(-1, 2, (groups * cg, og, k, k))
        return b.op("conv_transpose2d", x, b.const(w), groups=groups, strides=(stride, stride))
    return (groups * cg, hw, hw), make


# Probes of the per-lane terms (cvm.gas_v2.LANE_PIXEL, LANE_BLOCK), at batch 1: thin convs on large maps,
# thousands of groups on small maps, a one-channel depthwise conv, a grouped transposed conv.
LANE_PROBES = {
    "conv_thin_256": _groups(1, 1, 2, 256),
    "conv_groups_1x1": _groups(4096, 1, 2, 1),
    "conv_groups_8x8": _groups(240, 1, 2, 8),
    "conv_groups_cg4_16x16": _groups(64, 4, 4, 16, 3),
    "depthwise_1ch_256": _groups(1, 1, 1, 256, 3),
    "convT_groups_1x1": _groups_t(1024, 1, 2, 1),
    "convT_groups_8x8": _groups_t(64, 2, 2, 8),
    "convT_stride4_64": _groups_t(1, 1, 1, 64, 4, 4),
    "convT_depthwise_s2": _groups_t(32, 1, 1, 32, 2, 2),
}


def lane_counts(model) -> tuple[int, int]:
    """Lane pixels and lane blocks of a model per sample (cvm.gas_v2.lane_counts summed)."""
    from cvm import gas_v2
    a, pixels, blocks = model.analysis, 0, 0
    for node, attrs in zip(model.graph.nodes, a.attrs):
        p, b = gas_v2.lane_counts(node.op, a.tensors[node.inputs[0]].shape, a.tensors[node.output].shape, attrs)
        pixels, blocks = pixels + p, blocks + b
    return pixels, blocks


def _input(model, batch: int):
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    return np.random.default_rng(0).integers(-m, m + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)


class Timed:
    """A prepared portable one-thread runner and its input; `sample()` is thread CPU seconds per call,
    averaged over enough calls to last `min_sample` seconds (thread_time's resolution on a short call)."""

    def __init__(self, model, x, min_sample: float):
        from cvm.interp import numba as nb
        self.runner = nb.prepare(model.graph, model.analysis, isa="portable", threads=1,
                                 wholeplan="never")  # the per-step path: the slowest, which v2 is priced on
        self.feed = {model.inputs[0].name: x}
        self.runner(self.feed)
        t = time.thread_time()
        self.runner(self.feed)
        self.calls = max(1, min(10000, int(min_sample / max(time.thread_time() - t, 1e-7))))

    def sample(self) -> float:
        t = time.thread_time()
        for _ in range(self.calls):
            self.runner(self.feed)
        return (time.thread_time() - t) / self.calls


def units_by_op(model) -> tuple[dict, int]:
    """{pricing row (the op, or cvm.gas_v2.DEPTHWISE for a depthwise conv2d): v1 units (the v1 cost
    without the per-node charge)}, nodes: from the opset-2 formulas, whatever the model's opset."""
    from cvm import gas_v2
    from cvm.ops import OPSET_V2
    from cvm.verify import Verifier
    v = Verifier(2)
    for i in model.graph.inputs:
        v.add_input(i)
    for name, values in model.graph.constants.items():
        v.add_constant(name, values)
    per = defaultdict(int)
    for node in model.graph.nodes:
        v.add_node(node)
        row = gas_v2.price_row(node.op, v.tensors[node.inputs[0]].shape, v.tensors[node.output].shape, v.attrs[-1])
        per[row] += v.costs[-1] - v.node_gas
    assert set(per) <= set(OPSET_V2) | {gas_v2.DEPTHWISE}
    return dict(per), len(model.graph.nodes)


def current_units() -> dict:
    """{probe: (units by pricing row, nodes)} from the probe models as this code builds them: runs
    recorded before a row was split (the depthwise row) are re-read with today's rows."""
    call = _probe(lambda b, x, r: b.op("relu", x), (1,))
    return {name: units_by_op(model) for name, model, _ in [("one_node_call", call, None)] + _rows()}


def _rows():
    from cvm.tools.adversarial import CATALOGUE, build
    rows = [(name, *build(name)) for name in CATALOGUE]
    for name, (shape, make, *bits) in PROBES.items():
        model = _probe(make, shape, *bits)
        rows.append((name, model, _input(model, 8)))
    for name, (shape, make) in LANE_PROBES.items():
        model = _probe(make, shape)
        rows.append((name, model, _input(model, 1)))
    return rows


def measure(rounds: int, min_sample: float, log=print) -> dict:
    """Every probe's median time over `rounds` alternations with the baseline, as a ratio to it."""
    call_model = _probe(lambda b, x, r: b.op("relu", x), (1,))
    rows = [("one_node_call", call_model, _input(call_model, 1))] + _rows()
    base = next(Timed(m, x, min_sample) for n, m, x in rows if n == BASELINE)
    measured = []
    for name, model, x in rows:
        timed = Timed(model, x, min_sample)
        t_probe, t_base = [], []
        for _ in range(rounds):
            t_base.append(base.sample())
            t_probe.append(timed.sample())
        ratio = float(np.median(t_probe) / np.median(t_base))
        per, nodes = units_by_op(model)
        io = int(x.nbytes) + sum(int(np.prod(o.shape[1:], dtype=np.int64)) * o.dtype.itemsize
                                 for o in model.outputs) * int(x.shape[0])
        lane_pixels, lane_blocks = lane_counts(model)
        measured.append({"probe": name, "ratio": ratio, "local_s": float(np.median(t_probe)),
                         "lane_pixels": lane_pixels, "lane_blocks": lane_blocks, "lane_probe": name in LANE_PROBES,
                         "local_baseline_s": float(np.median(t_base)), "nodes": nodes, "units": per,
                         "batch": int(x.shape[0]), "io_bytes": io})
        log(f"{name:<22} ratio {ratio:10.6f}  ({np.median(t_probe) * 1e6:10.1f} us here)  nodes {nodes:>6}  "
            f"units {per}")
    return {"baseline": BASELINE, "reference_baseline_s": REFERENCE_BASELINE_S, "probes": measured,
            "machine": {"cpus": os.cpu_count(), "load": os.getloadavg(), "cpu": _cpu_name()},
            "rounds": rounds, "min_sample_s": min_sample}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        return "?"


def combine(cals: list[dict]) -> dict:
    """Several runs' measurements as one: each probe's largest ratio over the runs (the worst case,
    as EIP-7904 takes the slowest client: kernels that got faster between runs do not lower a price)."""
    out = dict(cals[0], runs=len(cals))
    by_name = defaultdict(list)
    for cal in cals:
        for r in cal["probes"]:
            by_name[r["probe"]].append(r)
    out["probes"] = [dict(rs[-1], ratio=float(max(r["ratio"] for r in rs)),
                          ratios=[r["ratio"] for r in rs]) for rs in by_name.values()]
    out["local_baseline_s"] = float(np.median([r["local_baseline_s"] for cal in cals for r in cal["probes"]]))
    return out


def derive(cal: dict, reference_s: float = None, anchor: float | None = None) -> dict:
    """The v2 constants a measurement implies (cvm.gas_v2's layout), with the probe that set each."""
    from cvm import gas_v2
    anchor = anchor or gas_v2.ANCHOR_GAS_PER_SECOND
    ref = reference_s or REFERENCE_BASELINE_S
    probes = [dict(r, seconds=r["ratio"] * ref) for r in cal["probes"]]
    t_call = next(r["seconds"] for r in probes if r["probe"] == "one_node_call")
    probes = [dict(r, seconds=max(0.0, r["seconds"] - t_call)) for r in probes if r["probe"] != "one_node_call"]
    # per node: the tiny-node chains (units per node <= 200 at batch 1), time per node
    chains = [r for r in probes if r["nodes"] >= 100 and sum(r["units"].values()) * r["batch"] <= 200 * r["nodes"]]
    t_node = max(r["seconds"] / r["nodes"] for r in chains)
    # per input/output byte: probes that move a large input for almost no units (a stride-2^20 conv,
    # a step-2^20 slice): the call pays these bytes, not the nodes
    io_bound = [r for r in probes if r["io_bytes"] >= (1 << 20) and sum(r["units"].values()) * r["batch"] <= 1000]
    t_byte = max(r["seconds"] / r["io_bytes"] for r in io_bound)
    # per op: each probe's time beyond its nodes' charge goes to its main op (the most units). The
    # factor is the dearest time per unit among probes of many units per node (LARGE_UNITS: there the
    # fixed part is negligible); the op's fixed part per node is what any probe needs beyond
    # nodes x (NODE + factor x units per node), so that every probe is paid for in full.
    split = []
    for r in probes:
        if r in io_bound or r.get("lane_probe"):
            continue
        units = {op: u * r["batch"] for op, u in r["units"].items()}
        op = max(units, key=units.get)
        split.append((r, op, units[op], max(0.0, r["seconds"] - r["nodes"] * t_node)))
    factor, worst, fixed, worst_fixed = defaultdict(float), {}, defaultdict(float), {}
    for r, op, u, rest in split:
        if u >= LARGE_UNITS * r["nodes"] and rest / u >= factor[op]:
            factor[op], worst[op] = rest / u, r["probe"]
    for r, op, u, rest in split:
        need = (rest - factor[op] * u) / r["nodes"]
        if need > fixed[op]:
            fixed[op], worst_fixed[op] = need, r["probe"]
    # per lane: what each lane probe needs beyond its nodes, factor x units and fixed parts; the pixel
    # term from probes of >= BLOCK_PIXELS pixels per lane (blocks then negligible), the block term the rest
    lane_need = []
    for r in probes:
        if not r.get("lane_probe"):
            continue
        units = {op: u * r["batch"] for op, u in r["units"].items()}
        op = max(units, key=units.get)
        need = r["seconds"] - r["nodes"] * t_node - factor[op] * units[op] - fixed[op] * r["nodes"]
        lane_need.append((r, max(0.0, need), r["lane_pixels"] * r["batch"], r["lane_blocks"] * r["batch"]))
    lane = {"lane_pixel": {}, "lane_block": {}, "lane_probe": {}}
    for op in sorted({max(r["units"], key=r["units"].get) for r, *_ in lane_need}):
        mine = [t for t in lane_need if max(t[0]["units"], key=t[0]["units"].get) == op]
        wide = [(n / p, r["probe"]) for r, n, p, b in mine if p >= gas_v2.BLOCK_PIXELS * b]
        pixel_s, pixel_probe = max(wide, default=(0.0, "-"))
        block_s, block_probe = max(((max(0.0, n - pixel_s * p) / b, r["probe"]) for r, n, p, b in mine),
                                   default=(0.0, "-"))
        lane["lane_pixel"][op] = math.ceil(anchor * pixel_s * gas_v2.FACTOR_SCALE)
        lane["lane_block"][op] = math.ceil(anchor * block_s * gas_v2.FACTOR_SCALE)
        lane["lane_probe"][op] = f"{pixel_probe} / {block_probe}"
    scale = gas_v2.FACTOR_SCALE
    return {**lane, "anchor": anchor, "reference_s": ref, "call": math.ceil(anchor * t_call), "node": math.ceil(anchor * t_node),
            "node_probe": max(chains, key=lambda r: r["seconds"] / r["nodes"])["probe"],
            "io_gas_per_byte": anchor * t_byte,
            "io_probe": max(io_bound, key=lambda r: r["seconds"] / r["io_bytes"])["probe"],
            "factor": {op: math.ceil(anchor * s * scale) for op, s in factor.items()},
            "op_node": {op: math.ceil(anchor * s) for op, s in fixed.items() if math.ceil(anchor * s) > 0},
            "worst_probe": worst, "worst_fixed_probe": worst_fixed}


def cmd_constants(paths: list[str], reference_s: float | None = None) -> int:
    """Derive the constants from one or more runs (each probe's median ratio) and print them beside
    the committed ones (cvm.gas_v2)."""
    from cvm import gas_v2
    cals = [json.load(open(p)) for p in paths]
    cal = combine(cals)
    units = current_units()
    cal["probes"] = [dict(r, units=units[r["probe"]][0], nodes=units[r["probe"]][1]) for r in cal["probes"]]
    d = derive(cal, reference_s)
    print(f"{len(cals)} run(s) on {cal['machine']['cpu']} ({cal['machine']['cpus']} CPUs, load "
          f"{', '.join('%.1f' % c['machine']['load'][0] for c in cals)}), {len(cal['probes'])} probes; baseline "
          f"{cal['baseline']}: {cal['local_baseline_s'] * 1e6:.1f} us here (median), "
          f"{d['reference_s'] * 1e6:.1f} us on the reference")
    print(f"{'constant':<24} {'derived':>10} {'committed':>10}  set by")
    print(f"{'CALL':<24} {d['call']:>10} {gas_v2.CALL:>10}  one_node_call")
    print(f"{'NODE':<24} {d['node']:>10} {gas_v2.NODE:>10}  {d['node_probe']}")
    print(f"{'IO gas per byte':<24} {d['io_gas_per_byte']:>10.4f} {gas_v2.IO_NUM / gas_v2.IO_DEN:>10.4f}  "
          f"{d['io_probe']}")
    for op in sorted(set(d["factor"]) | set(gas_v2.FACTOR)):
        print(f"{'FACTOR ' + op:<24} {d['factor'].get(op, '-'):>10} {gas_v2.FACTOR.get(op, '-'):>10}  "
              f"{d['worst_probe'].get(op, '')}")
    for op in sorted(d["lane_pixel"]):
        print(f"{'LANE_PIXEL ' + op:<24} {d['lane_pixel'][op]:>10} {gas_v2.LANE_PIXEL.get(op, '-'):>10}  "
              f"{d['lane_probe'][op].split(' / ')[0]}")
        print(f"{'LANE_BLOCK ' + op:<24} {d['lane_block'][op]:>10} {gas_v2.LANE_BLOCK.get(op, '-'):>10}  "
              f"{d['lane_probe'][op].split(' / ')[1]}")
    for op in sorted(set(d["op_node"]) | set(gas_v2.OP_NODE)):
        print(f"{'OP_NODE ' + op:<24} {d['op_node'].get(op, 0):>10} {gas_v2.OP_NODE.get(op, 0):>10}  "
              f"{d['worst_fixed_probe'].get(op, '')}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--json", required=True)
    m.add_argument("--rounds", type=int, default=9)
    m.add_argument("--min-sample", type=float, default=0.004, help="seconds of calls per timing sample")
    c = sub.add_parser("constants")
    c.add_argument("calibrations", nargs="+", help="measure outputs; each probe's median ratio over them")
    c.add_argument("--reference-s", type=float, help="the baseline's seconds on the reference machine "
                   "(default REFERENCE_BASELINE_S)")
    t = sub.add_parser("table")
    t.add_argument("models", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        cal = measure(a.rounds, a.min_sample)
        with open(a.json, "w") as f:
            json.dump(cal, f, indent=1)
        return cmd_constants([a.json])
    if a.cmd == "constants":
        return cmd_constants(a.calibrations, a.reference_s)
    from gas_report import print_table
    print_table(a.models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
