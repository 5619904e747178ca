"""How `mrt.convert` time grows with the number of nodes (issue 28): ONNX chains of small dense layers
(MatMul + Add + Relu, width 8: three ONNX nodes a layer), converted with 32 calibration samples, timed per
stage. A converter whose time grows faster than the nodes (a scan of the whole graph per node) shows as a
per-node time that rises with the size; `--profile` prints cProfile's top functions for the largest size.

    python scripts/perf/convert_scaling.py [--nodes 1000 4000 16000] [--width 8] [--profile]

Each size's CVM node count is printed: a chain too long for the newest opset's node limit
(cvm.limits.NEWEST.nodes) is refused, and the refusal is timed and printed instead.

Issue 28, on a shared 2-core machine: before, 1k nodes 55 s and 2k 428 s (the passes rebuilt and re-sorted the
graph per fold: cubic); after, 1k 1.0 s, 4k 4.7-8.1 s, 16k 20 s (16,000 CVM nodes). What still grows faster than
the nodes is cvm's buffer placement for the numba backend (cvm/interp/numba_kernels/buffers.py place(): 6 s of
the 16k conversion's 32 s under cProfile), run by the bias-correction choice.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
import cProfile  # noqa: E402 - after the line above: scripts/perf/profile.py would shadow the stdlib's profile
import pstats  # noqa: E402

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ONNX_NODES_PER_LAYER = 3  # MatMul, Add, Relu


def chain(nodes: int, width: int):
    """An ONNX model of nodes // 3 dense layers (MatMul + Add + Relu) of `width` features."""
    rng = np.random.default_rng(0)
    body, inits, prev = [], [], "x"
    for i in range(max(1, nodes // ONNX_NODES_PER_LAYER)):
        w = (rng.standard_normal((width, width)) * np.sqrt(2 / width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.full(width, 0.01, np.float32), f"b{i}")]
        body += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
                 helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                 helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    g = helper.make_graph(body, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", width])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def timed(model, x) -> tuple[float, str]:
    """(seconds, what came out: the CVM node count or the refusal) of one conversion."""
    import mrt
    from mrt.errors import MrtError
    t = time.perf_counter()
    try:
        out = f"{len(mrt.convert(model, x, progress=False).graph.nodes)} CVM nodes"
    except MrtError as e:
        out = f"refused: {e}"
    return time.perf_counter() - t, out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[1000, 4000, 16000])
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--profile", action="store_true", help="cProfile the largest size")
    a = p.parse_args(argv)
    x = np.random.default_rng(1).standard_normal((32, a.width)).astype(np.float32)
    timed(chain(30, a.width), x)  # imports and numba compilation out of the first timing
    print(f"{'ONNX nodes':>10} {'seconds':>8} {'ms/node':>8}  result")
    for n in a.nodes:
        model = chain(n, a.width)
        s, out = timed(model, x)
        print(f"{len(model.graph.node):>10} {s:>8.1f} {1000 * s / len(model.graph.node):>8.2f}  {out}", flush=True)
    if a.profile:
        prof = cProfile.Profile()
        prof.runcall(timed, chain(max(a.nodes), a.width), x)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
