"""Seconds per MB of file for the worst models we can construct, at each stage a node pays for before
any gas: loading (decode + verify: Model.from_bytes), numba planning (cvm.interp.numba.prepare) and the
reference interpreter's first run (prepare + one call, batch 1). Each case is built to make one part
as slow as its bytes allow: nodes listing many inputs (unbounded in opsets 1-3, limits.node_inputs in
opset 4), many distinct inputs, many small nodes, attribute lists, rank-6 shapes, constants, names.

    .venv/bin/python scripts/perf/verify_per_mb.py [--only NAME ...] [--skip-run]

Times are wall clock, one measurement each (the machine may be shared: compare runs made alike).
"nb call s" is besides: the first call of a new numba runner, its kernels already compiled (binding
buffers, the whole-plan program); s/MB counts verify + plan + reference run.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from cvm.errors import CVMError
from cvm.format import encode_file, encode_graph
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.ir import Graph, Input, Node
from cvm.model import Model
from cvm.ops import OPSETS

EDGES = 10 ** 6  # listings of the widest cases (a 2 MB file of one-letter names)
OPSET4 = 4 if 4 in OPSETS else None  # opset 4 bounds the inputs of a node (cvm.limits.MAX_NODE_INPUTS)
RANK6 = (1, 1, 1, 1, 1, 1)


def short(i: int, prefix: str = "") -> str:
    """A short unique name (base 62: 3 characters name 238,328 tensors)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    s = ""
    while True:
        i, r = divmod(i, 62)
        s = digits[r] + s
        if not i:
            return prefix + s


def _file(inputs, constants, nodes, outputs, opset=3) -> bytes:
    return encode_file(encode_graph(Graph(inputs, constants, nodes, outputs, opset)), {})


def concat_repeat() -> bytes:
    """One concat listing one 1-element input 10^6 times (issue 28's finding)."""
    return _file([Input("x", (1,), 8)], {}, [Node("concat", ("x",) * EDGES, "y", {"axis": 0})], ["y"])


def concat_distinct_inputs(n: int = 100_000) -> bytes:
    """One concat of 10^5 distinct graph inputs, each listed once."""
    ins = [Input(short(i, "i"), (1,), 8) for i in range(n)]
    return _file(ins, {}, [Node("concat", tuple(i.name for i in ins), "y", {"axis": 0})], ["y"])


def concat_distinct_consts(n: int = 100_000) -> bytes:
    """One concat of one activation and 10^5 distinct one-element constants."""
    consts = {short(i, "c"): np.array([i % 100], np.int8) for i in range(n)}
    return _file([Input("x", (1,), 8)], consts, [Node("concat", ("x", *consts), "y", {"axis": 0})], ["y"])


def concat_distinct_nodes(n: int = 16_383) -> bytes:
    """16,383 relu outputs, one concat listing each of them 61 times (10^6 listings, few distinct)."""
    nodes = [Node("relu", ("x",), short(i, "r")) for i in range(n)]
    names = tuple(node.output for node in nodes) * (EDGES // n)
    return _file([Input("x", (1,), 8)], {}, nodes + [Node("concat", names, "y", {"axis": 0})], ["y"])


def concat_rank6_shapes(n: int = 100_000) -> bytes:
    """One concat along the last of 6 axes of 10^5 constants of 8 different shapes and one input."""
    consts = {short(i, "c"): np.ones(RANK6[:5] + (1 + i % 8,), np.int8) for i in range(n)}
    nodes = [Node("concat", ("x", *consts), "y", {"axis": 5})]
    return _file([Input("x", RANK6, 8)], consts, nodes, ["y"])


def concat_wide_nodes(nodes_n: int = 16_383, width: int = 61) -> bytes:
    """16,383 concat nodes of 61 listings of one input (10^6 listings in all)."""
    nodes = [Node("concat", ("x",) * width, short(i, "y"), {"axis": 0}) for i in range(nodes_n)]
    return _file([Input("x", (1,), 8)], {}, nodes, [nodes[-1].output])


def opset4_concat_1024(nodes_n: int = 2048) -> bytes | None:
    """Opset 4: 2048 concat nodes listing one input 1024 times each (the most a node may list)."""
    if OPSET4 is None:
        return None
    nodes = [Node("concat", ("x",) * 1024, short(i, "y"), {"axis": 0}) for i in range(nodes_n)]
    return _file([Input("x", (1,), 8)], {}, nodes, [nodes[-1].output], OPSET4)


def opset4_concat_distinct(nodes_n: int = 1000) -> bytes | None:
    """Opset 4: 1000 concat nodes, each of 1024 distinct relu outputs (a shared pool of 1024)."""
    if OPSET4 is None:
        return None
    relus = [Node("relu", ("x",), short(i, "r")) for i in range(1024)]
    names = tuple(r.output for r in relus)
    nodes = [Node("concat", names, short(i, "y"), {"axis": 0}) for i in range(nodes_n)]
    return _file([Input("x", (1,), 8)], {}, relus + nodes, [nodes[-1].output], OPSET4)


def tiny_nodes(n: int = 16_384) -> bytes:
    """The most nodes, each a relu of the previous output with a short name."""
    nodes = [Node("relu", (short(i - 1, "r") if i else "x",), short(i, "r")) for i in range(n)]
    return _file([Input("x", (1,), 8)], {}, nodes, [nodes[-1].output])


def long_names(n: int = 16_384) -> bytes:
    """The most nodes, each a relu named with 128 characters."""
    name = lambda i: short(i, "r").ljust(128, "_")  # noqa: E731
    nodes = [Node("relu", (name(i - 1) if i else "x",), name(i)) for i in range(n)]
    return _file([Input("x", (1,), 8)], {}, nodes, [nodes[-1].output])


def rank6_pads(n: int = 16_384) -> bytes:
    """The most nodes, each a pad of a rank-6 tensor (12 pads) read from the previous one."""
    nodes = [Node("pad", (short(i - 1, "p") if i else "x",), short(i, "p"), {"pads": (0,) * 12, "value": 0})
             for i in range(n)]
    return _file([Input("x", RANK6, 8)], {}, nodes, [nodes[-1].output])


def rank6_slices(n: int = 16_384) -> bytes:
    """The most nodes, each a slice (18 ints) of a rank-6 input."""
    attrs = {"starts": (0,) * 6, "ends": (2,) * 6, "steps": (1,) * 6}
    nodes = [Node("slice", ("x",), short(i, "s"), attrs) for i in range(n)]
    return _file([Input("x", (2,) * 6, 8)], {}, nodes, [nodes[-1].output])


def sum_all_axes(n: int = 16_384) -> bytes:
    """The most nodes, each a sum over all six axes of a rank-6 input."""
    nodes = [Node("sum", ("x",), short(i, "s"), {"axes": tuple(range(6)), "keepdims": 1}) for i in range(n)]
    return _file([Input("x", (2,) * 6, 8)], {}, nodes, [nodes[-1].output])


def sum_long_axes(n: int = EDGES) -> bytes:
    """One sum whose axes list holds 10^6 entries (refused: attrs.axes)."""
    return _file([Input("x", RANK6, 8)], {}, [Node("sum", ("x",), "y", {"axes": (0,) * n})], ["y"])


def reshape_long_shape(n: int = EDGES) -> bytes:
    """One reshape to a shape of 10^6 ones (refused: limits.rank)."""
    return _file([Input("x", (1,), 8)], {}, [Node("reshape", ("x",), "y", {"shape": (1,) * n})], ["y"])


def many_constants(n: int = 100_000) -> bytes:
    """10^5 one-element constants, 8,192 of them added along a chain."""
    consts = {short(i, "c"): np.array([i % 100], np.int8) for i in range(n)}
    nodes, prev = [], "x"
    for i in range(8192):
        nodes += [Node("add", (prev, short(i, "c")), short(i, "a")),
                  Node("clip", (short(i, "a"),), short(i, "y"), {"lo": -100, "hi": 100})]
        prev = short(i, "y")
    return _file([Input("x", (1,), 8)], consts, nodes, [prev])


CASES = {f.__name__: f for f in (
    concat_repeat, concat_distinct_inputs, concat_distinct_consts, concat_distinct_nodes, concat_rank6_shapes,
    concat_wide_nodes, opset4_concat_1024, opset4_concat_distinct, tiny_nodes, long_names, rank6_pads,
    rank6_slices, sum_all_axes, sum_long_axes, reshape_long_shape, many_constants)}


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _inputs(model: Model) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {s.name: rng.integers(-3, 4, (1, *s.shape[1:])).astype(s.dtype) for s in model.inputs}


def measure(name: str, run: bool = True) -> dict | None:
    """One case: its size, the seconds of each stage (None: not reached) and what loading decided."""
    data = CASES[name]()
    if data is None:
        return None
    row = {"case": name, "mb": len(data) / 1e6, "verify": None, "plan": None, "ref": None, "call": None,
           "outcome": "accepted"}
    t0 = time.perf_counter()
    try:
        model = Model.from_bytes(data)
    except CVMError as e:
        row["outcome"] = f"refused: {getattr(e, 'rule', type(e).__name__)}"
        model = None
    row["verify"] = time.perf_counter() - t0
    if model is None:
        return row
    if run:
        _, row["plan"] = _timed(lambda: nb.prepare(model.graph, model.analysis, threads=1))
        feed = _inputs(model)
        _, row["ref"] = _timed(lambda: reference.prepare(model.graph, model.analysis)(feed))
        nb.prepare(model.graph, model.analysis, threads=1)(feed)  # kernels compiled (or loaded) once
        runner = nb.prepare(model.graph, model.analysis, threads=1)
        _, row["call"] = _timed(lambda: runner(feed))  # a new runner's first call: binds buffers (wholeplan)
    return row


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=sorted(CASES))
    ap.add_argument("--skip-run", action="store_true", help="load only (no planning, no reference run)")
    args = ap.parse_args(argv)
    head = f"{'case':<24} {'MB':>7} {'verify s':>9} {'plan s':>8} {'ref s':>8} {'s/MB':>7} {'nb call s':>9}  outcome"
    print(head)
    worst = []
    for name in args.only or CASES:
        row = measure(name, not args.skip_run)
        if row is None:
            print(f"{name:<24} (opset 4 is not in cvm.ops.OPSETS here)")
            continue
        total = sum(row[k] or 0.0 for k in ("verify", "plan", "ref"))
        row["s_per_mb"] = total / row["mb"]
        worst.append(row)
        print(f"{name:<24} {row['mb']:7.3f} {_fmt(row['verify']):>9} {_fmt(row['plan']):>8} {_fmt(row['ref']):>8} "
              f"{row['s_per_mb']:7.3f} {_fmt(row['call']):>9}  {row['outcome']}", flush=True)
    for stage in ("verify", "plan", "ref", "call"):
        r = max(worst, key=lambda r: (r[stage] or 0.0) / r["mb"])
        print(f"worst {stage}: {r['case']} at {(r[stage] or 0.0) / r['mb']:.3f} s/MB")
    r = max(worst, key=lambda r: r["s_per_mb"])
    print(f"worst in all: {r['case']} at {r['s_per_mb']:.3f} s/MB (verify + plan + reference run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
