"""Issue 28, item 3: the converter is memory-safe and bounded.

* Calibration data scaled by 1e38 is finite, but an activation overflows to inf: that is one line of bad input
  naming the tensor and its node, before its histogram (or any scale) is made from it, not a histogram kernel that made int(nan) an index and
  wrote before its array ("double free or corruption", exit 134). The CLI runs in a subprocess, so that a heap
  corruption fails this test instead of taking pytest down.
* The histogram kernel keeps every index in range for NaN, infinite and huge values and ranges, run with numba's
  bounds checking on (NUMBA_BOUNDSCHECK=1 turns an out-of-range index into an IndexError), in a subprocess too.
* A 10^5-node ONNX graph is refused at once, naming the limit (it ran for more than 10 minutes); the float graph an
  import unrolls is refused as it grows. The subprocess timeout is a safety net, not a speed assertion; how
  conversion time grows with the nodes is measured by scripts/perf/convert_scaling.py.
* The passes' linear-time toposort gives the order of the quadratic one it replaced.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from cvm import clikit, limits
from mrt import calibrate as calibrate_module
from mrt.calibrate import calibrate
from mrt.errors import BadInput, GraphError
from mrt.graph import Node, toposort
from mrt.histogram import abs_histogram
from mrt.onnx_import import import_onnx
from mrt.onnx_import import importer

REPO = Path(__file__).resolve().parents[2]
SAFETY_NET_S = 300  # a hung or crashed child fails the test instead of the run; never a speed bound


def _model(nodes, width=8, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, ["N", width])],
                          list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _overflowing():
    """x @ ones(8, 8) then Relu: eight values near 1e38 sum past float32's largest, 3.4e38."""
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    return _model([helper.make_node("MatMul", ["x", "w"], ["h"], name="overflow"),
                   helper.make_node("Relu", ["h"], ["y"], name="relu")], inits=[w])


def _relu_chain(n):
    return _model([helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}"], name=f"relu{i}") for i in range(n)])


def _mrt(tmp_path, model, x) -> subprocess.CompletedProcess:
    """`mrt convert` in a child process (python -m mrt.cli from the repository root)."""
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    np.savez(tmp_path / "c.npz", x=x)
    return subprocess.run([sys.executable, "-m", "mrt.cli", "convert", "m.onnx", "--calib", "c.npz", "-o", "m.cvm"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=SAFETY_NET_S)


def _huge_data(n=32):
    return (np.random.default_rng(0).uniform(0.5, 1.0, (n, 8)) * 1e38).astype(np.float32)


def test_overflow_in_calibration_is_one_line_naming_the_tensor(tmp_path):
    x = _huge_data()
    assert np.isfinite(x).all()  # the data pass the NaN/inf check: the overflow is the model's
    done = _mrt(tmp_path, _overflowing(), x)
    err = done.stderr.strip().splitlines()
    assert done.returncode == clikit.EXIT_BAD_INPUT, (done.returncode, done.stderr[-2000:])
    assert len(err) == 1 and err[0].startswith("mrt: error: calibration: tensor 'h' of node 'overflow'"), err
    assert "infinite" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz", "m.onnx"]  # nothing half-written


def test_non_finite_activation_stops_calibration_before_its_histogram(monkeypatch):
    def finite_only(x, bins, top):
        assert np.isfinite(x).all() and np.isfinite(top), "a histogram of a non-finite tensor"
        return abs_histogram(x, bins, top)
    monkeypatch.setattr(calibrate_module, "abs_histogram", finite_only)
    graph = import_onnx(_overflowing())
    for batch_size in (64, 8):  # one run (histograms as the tensors come) and two runs (ranges first)
        with pytest.raises(BadInput, match="tensor 'h' of node 'overflow'"):
            calibrate(graph, _huge_data(), method="mse", batch_size=batch_size, progress=False)


KERNEL_CASES = """
import numpy as np
from mrt import histogram
f32max = float(np.finfo(np.float32).max)
values = np.array([np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1e38, 1.0, 0.0, -0.0, 1e-45], np.float32)
for top in (np.inf, np.nan, f32max, 1e38, 1.0, 1e-45):
    for bins in (1, 7, 2048):
        edges = np.linspace(0, top if np.isfinite(top) else 1.0, bins + 1, dtype=np.float32)
        out = np.zeros(bins, np.int64)
        histogram._count(values, np.float32(top), np.float64(top), edges, out)
        assert 0 <= out.sum() <= values.size, (top, bins, out)
print("ok")
"""


def test_histogram_kernel_indices_stay_in_range(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", KERNEL_CASES], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=SAFETY_NET_S)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("top", [np.inf, np.nan])
def test_histogram_of_a_range_that_is_not_finite_is_refused_as_numpy_does(top):
    x = np.array([1.0, np.inf, np.nan], np.float32)
    with pytest.raises(ValueError, match="finite"):
        abs_histogram(x, 16, top)


@pytest.mark.parametrize("top", [float(np.finfo(np.float32).max), 1e38, 1e-30])
def test_histogram_of_huge_and_tiny_values_is_numpys(top):
    x = np.array([np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1e38, 1.0, 0.0, 1e-45, -1e-45], np.float32)
    want = np.histogram(np.abs(x), bins=2048, range=(0, top))[0]
    assert np.array_equal(abs_histogram(x, 2048, top), want)


def test_onnx_of_100k_nodes_is_refused_naming_the_limit(tmp_path):
    x = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    done = _mrt(tmp_path, _relu_chain(100_000), x)
    err = done.stderr.strip().splitlines()
    assert done.returncode == clikit.EXIT_BAD_INPUT, (done.returncode, done.stderr[-2000:])
    assert len(err) == 1 and "has at least 100000 nodes > 65536" in err[0] and "[limits.nodes]" in err[0], err
    assert not (tmp_path / "m.cvm").exists()


@pytest.fixture
def few_nodes(monkeypatch):
    """CVM's node limit at 8: the early checks allow 4 x 8 = 32 nodes."""
    monkeypatch.setattr(limits, "NEWEST", replace(limits.NEWEST, nodes=8))


def test_node_limit_is_checked_before_the_import_reads_a_node(monkeypatch, few_nodes):
    def no_upgrade(model):
        raise AssertionError("the import went on past the node count")
    monkeypatch.setattr(importer, "upgrade", no_upgrade)
    with pytest.raises(GraphError, match=r"has at least 33 nodes > 32, .*4 x CVM's 8 nodes\) \[limits.nodes\]"):
        import_onnx(_relu_chain(33))


def test_an_import_that_unrolls_past_the_limit_is_refused_at_its_node(monkeypatch, few_nodes):
    sys.path.insert(0, str(Path(__file__).parent))
    from rnn_cases import cell_model
    model = cell_model("LSTM", steps=5)  # one ONNX node, 81 float nodes
    model.graph.node[0].name = "lstm"
    with pytest.raises(GraphError, match=r"LSTM node 'lstm': the float graph grows past 32, "):
        import_onnx(model, {"x": (5, 3)})
    assert len(import_onnx(cell_model("LSTM", steps=1), {"x": (1, 3)}).nodes) <= 32


def _toposort_by_definition(nodes, available):
    """The sort the passes used before (first pending node whose inputs are ready, rescanned per step)."""
    ready, pending, out = set(available), list(nodes), []
    while pending:
        node = next(n for n in pending if all(i in ready for i in n.inputs))
        out.append(node)
        ready.update(node.outputs)
        pending.remove(node)
    return tuple(out)


@pytest.mark.parametrize("seed", range(20))
def test_toposort_keeps_the_order_of_its_definition(seed):
    rng = np.random.default_rng(seed)
    nodes = []
    for k in range(int(rng.integers(1, 60))):
        names = ["x", "c", *(f"t{j}" for j in range(k))]
        reads = rng.choice(names, size=min(len(names), int(rng.integers(1, 4))))
        nodes.append(Node("add", tuple(reads), (f"t{k}",), name=f"n{k}"))
    shuffled = [nodes[i] for i in rng.permutation(len(nodes))]
    assert toposort(shuffled, ["x", "c"]) == _toposort_by_definition(shuffled, ["x", "c"])
    with pytest.raises(GraphError, match="undefined or cyclic"):
        toposort([*shuffled, Node("add", ("missing",), ("z",), name="z")], ["x", "c"])
