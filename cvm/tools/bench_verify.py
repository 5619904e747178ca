"""What loading costs: seconds per MB of file for the worst files we know how to construct.

A node decodes and verifies every model file anyone registers, accepted or not, so the time must be
linear in the file's size with a small constant (docs/spec.md 5.5). Each case below is a file built
to make one part of decoding or verification as slow as its bytes allow; the table reports the
file size, the load time (median of a few loads), seconds per MB, and whether it was accepted.

    cvm bench-verify            # or: python -m cvm.tools.bench_verify [--repeat 3] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

from .. import limits
from ..errors import CVMError
from ..format import encode_file, encode_graph
from ..ir import Graph, Input, Node
from ..report import table

V1 = limits.LIMITS[1]  # the worst files of opset 1 (graphs within its limits are written in it)


def _file(inputs, constants, nodes, outputs) -> bytes:
    return encode_file(encode_graph(Graph(inputs, constants, nodes, outputs)), {})


def many_constants(n: int = 100_000) -> bytes:
    """10^5 one-element constants, each added once: per-constant decoding and statistics."""
    x = Input("x", (1,), 8)
    consts = {f"c{i}": np.array([i % 100], np.int8) for i in range(n)}
    nodes, prev = [], "x"
    for i in range(min(n, V1.nodes // 2)):
        nodes.append(Node("add", (prev, f"c{i}"), f"a{i}"))
        nodes.append(Node("clip", (f"a{i}",), f"y{i}", {"lo": -100, "hi": 100}))
        prev = f"y{i}"
    return _file([x], consts, nodes, [prev])


def shared_weight_dense(rows: int = 1 << 16, nodes_n: int = V1.nodes) -> bytes:
    """One 65536 x 1 weight read by 2048 dense nodes, each after a clip that gives its input another
    interval: each node's MAC bound is three vector passes over the weight's cached row sums, so the
    work is proportional to the node's output elements, which the activation limit caps (2^28 bytes
    for the whole graph): the worst seconds per MB, but a bounded number of seconds."""
    x = Input("x", (1,), 8)
    w = np.resize(np.array([1, -1, 3, -2], np.int8), (rows, 1))
    nodes = []
    for i in range(nodes_n // 2):
        nodes.append(Node("clip", ("x",), f"c{i}", {"lo": -1 - i % 100, "hi": 1 + i}))
        nodes.append(Node("dense", (f"c{i}", "w"), f"d{i}"))
    return _file([x], {"w": w}, nodes, ["d0"])


def wide_concat(listings: int = 1 << 20) -> bytes:
    """A concat listing one 1-element tensor 2^20 times: per-listing checks and bounds."""
    x = Input("x", (1,), 8)
    return _file([x], {}, [Node("concat", ("x",) * listings, "y", {"axis": 0})], ["y"])


def memory_chain(n: int = 257) -> bytes:
    """257 max_pool nodes each as large as allowed: rejected by limits.memory at the node that
    crosses the limit, before verifying the rest (was 88 s for a 20 KB file)."""
    x = Input("x", (1, 1024, 1024), 8)
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(Node("max_pool2d", (prev,), f"p{i}", {"kernel": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1)}))
        nodes.append(Node("relu", (f"p{i}",), f"r{i}"))
    return _file([x], {}, nodes[:V1.nodes], [nodes[-1].output])


def big_lut_chain(n: int = 2000) -> bytes:
    """2000 lookups through one table of 2^16 int32 entries."""
    x = Input("x", (16,), 16)
    table_ = (np.arange(limits.MAX_LUT_SIZE, dtype=np.int64) % 2001 - 1000).astype(np.int32)
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(Node("lut", (prev, "t"), f"l{i}", {"offset": -1000 if i else -(1 << 15) + 1}))
        prev = f"l{i}"
    return _file([x], {"t": table_}, nodes, [prev])


def random_bytes(n: int = 64 << 20) -> bytes:
    """64 MB of noise: rejected by the msgpack decoder."""
    return np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8).tobytes()


def big_constant(n: int = V1.constant_elements) -> bytes:
    """One 2^24-element int32 weight (64 MB) in a dense layer: decoding, statistics and MAC bound."""
    x = Input("x", (1 << 12,), 8)
    w = np.resize(np.array([1, -2, 3], np.int32), (n // (1 << 12), 1 << 12))
    return _file([x], {"w": w}, [Node("dense", ("x", "w"), "y")], ["y"])


CASES: dict[str, Callable[[], bytes]] = {f.__name__: f for f in (
    many_constants, shared_weight_dense, wide_concat, memory_chain, big_lut_chain, random_bytes, big_constant)}


def measure(name: str, repeat: int = 3) -> dict:
    from .. import loads
    data = CASES[name]()
    times, outcome = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            loads(data)
            outcome = "accepted"
        except CVMError as e:
            outcome = f"rejected: {type(e).__name__} {str(e)[:60]}"
        times.append(time.perf_counter() - t0)
    seconds = statistics.median(times)
    return {"case": name, "bytes": len(data), "seconds": seconds, "s_per_mb": seconds / (len(data) / 1e6),
            "outcome": outcome}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cvm bench-verify", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeat", type=int, default=3, help="loads per case (the median is reported)")
    p.add_argument("--only", nargs="+", choices=sorted(CASES), default=None)


def run(args) -> int:
    rows = []
    for name in args.only or CASES:
        r = measure(name, args.repeat)
        print(f"{name}: {r['s_per_mb']:.3f} s/MB", file=sys.stderr)
        rows.append([r["case"], f"{r['bytes']:,}", f"{r['seconds']:.3f}", f"{r['s_per_mb']:.3f}", r["outcome"]])
    print(table(["case", "bytes", "seconds", "s/MB", "outcome"], rows, "lrrrl"))
    worst = max(rows, key=lambda r: float(r[3]))
    print(f"worst: {worst[0]} at {worst[3]} s/MB ({os.cpu_count()} CPUs)")
    return 0


def register(subparsers) -> None:
    s = subparsers.add_parser("bench-verify", help="load time per MB of the worst files we can construct")
    add_arguments(s)
    s.set_defaults(func=run)


if __name__ == "__main__":
    sys.exit(main())
