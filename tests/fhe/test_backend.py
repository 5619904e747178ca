"""The FHE backend against the reference interpreter, bit for bit: clear evaluation of the circuit,
simulation and (on the smallest circuits) encrypted execution; refusals; keys; inputsets."""
import os
import stat

import numpy as np
import pytest

import cvm
from cvm.interp import fhe as F
from cvm.interp import fhe_lower
from cvm.interp.fhe_clamp import ClampPlan

from . import graphs
from .conftest import extremes

LOOKUP_BITS = {"mlp": 6, "per_channel": 6, "conv": 5, "lut": 4, "layout": 6, "arith": 6}


@pytest.fixture(scope="module")
def runners():
    """One prepared runner per graph (compiled once, shared by the tests of this module)."""
    out = {}
    for name, make in graphs.ALL.items():
        model = make()
        out[name] = (model, F.prepare(model.graph, model.analysis, lookup_bits=LOOKUP_BITS[name]))
    return out


@pytest.mark.parametrize("name", list(graphs.ALL))
def test_clear_and_simulation_equal_reference(runners, name):
    model, runner = runners[name]
    x = extremes(model, 8)
    want = model.run(x, backend="reference")
    out = model.graph.outputs[0]
    clear = runner({"x": x}, mode="clear")[out]
    assert clear.dtype == want.dtype and np.array_equal(clear, want)
    assert np.array_equal(runner({"x": x}, mode="simulate")[out], want)


@pytest.mark.parametrize("name", ["lut", "mlp"])
def test_encrypted_execution_equals_reference(runners, name):
    model, runner = runners[name]
    x = extremes(model, 2)
    assert np.array_equal(runner({"x": x}, mode="execute")[model.graph.outputs[0]], model.run(x, backend="reference"))


def test_compiled_ranges_are_the_proven_intervals(runners):
    """Pinning: every CVM tensor's circuit value has the width of its proven interval."""
    model, runner = runners["mlp"]
    runner({"x": extremes(model, 1)}, mode="clear")
    by_tag = {}
    for node in runner.circuit.graph.query_nodes():
        if node.tag and fhe_lower.PIN in node.properties and node.bounds is not None:
            by_tag.setdefault(node.tag, []).append(tuple(int(b) for b in node.bounds))
    t = model.analysis.tensors["fc1"]
    assert (t.lo, t.hi) in by_tag["fc1"]


def test_model_run_uses_the_fhe_backend():
    model = graphs.lut()
    x = extremes(model, 4)
    want = model.run(x, backend="reference")
    assert np.array_equal(model.run(x, backend="fhe", mode="clear", lookup_bits=4), want)
    assert np.array_equal(model.run(x, backend="fhe", mode="simulate"), want)


def test_wide_lookup_is_refused_naming_the_node():
    model = graphs.wide_table()
    with pytest.raises(F.FHEUnsupported, match=r"node 'fc\.q': requant lookup: input interval \[-1290, 1290\] "
                                               r"needs 12 bits, more than the lookup budget of 8") as e:
        F.prepare(model.graph, model.analysis)
    assert isinstance(e.value, cvm.CVMError) and e.value.node == "fc.q"


def test_lookup_budget_is_configurable():
    model = graphs.mlp()  # fc1.round's table needs 6 bits (q in [-15, 16]); at 5 its clip to 5 bits is split
    assert isinstance(F.prepare(model.graph, model.analysis, lookup_bits=5).lookups["fc1.round"].plan, ClampPlan)
    with pytest.raises(F.FHEUnsupported, match=r"node 'fc1\.round'.*lookup budget of 4.*nor does its split"):
        F.prepare(model.graph, model.analysis, lookup_bits=4)  # its 5-bit output cannot fit 4 bits
    assert F.prepare(model.graph, model.analysis, lookup_bits=6).lookup_report()["fc1.round"]["shift"] == 4


def test_unsupported_op_is_refused_naming_op_and_node(monkeypatch):
    model = graphs.lut()
    monkeypatch.setattr(fhe_lower, "RULES", {k: v for k, v in fhe_lower.RULES.items() if k != (1, "lut")})
    with pytest.raises(F.FHEUnsupported, match=r"node 'bump': op 'lut' has no FHE lowering"):
        F.prepare(model.graph, model.analysis)


def test_inputset_from_calibration_and_worst_cases(runners):
    model, _ = runners["mlp"]
    calib = extremes(model, 16, seed=3)
    runner = F.prepare(model.graph, model.analysis, lookup_bits=6, inputset=calib)
    w, b = (model.graph.constants[n].astype(np.int64) for n in model.graph.nodes[0].inputs[1:])
    reach = 7 * np.abs(w).sum(axis=1)  # x = sign(w_row) * 7 drives each row to its extremes
    assert runner.coverage()["fc1"]["reached"] == (int((b - reach).min()), int((b + reach).max()))
    assert len(runner.samples) == 16 + 3 + 2 * 6
    with pytest.raises(cvm.InputError, match="must hold integers"):
        runner({"x": calib[:1]}, inputset=calib.astype(np.float32))


def test_keys_are_cached_on_disk_and_reused(runners, key_dir):
    model, runner = runners["lut"]
    x = extremes(model, 1)
    runner({"x": x}, mode="execute")
    path = runner.key_path
    assert path.exists() and str(path).startswith(key_dir) and model.hash.hex() in str(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    mtime = path.stat().st_mtime_ns
    again = F.prepare(model.graph, model.analysis, lookup_bits=4)
    assert np.array_equal(again({"x": x}, mode="execute")["fc"], model.run(x, backend="reference"))
    assert again.key_path == path and path.stat().st_mtime_ns == mtime  # loaded, not regenerated


def test_unknown_mode_is_refused(runners):
    model, runner = runners["lut"]
    with pytest.raises(ValueError, match="unknown FHE mode 'fast'"):
        runner({"x": extremes(model, 1)}, mode="fast")


def test_fhe_bench_reports_costs():
    from cvm.tools.fhe_bench import fhe_bench

    model = graphs.lut()
    r = fhe_bench(model, extremes(model, 2), lookup_bits=4, samples=2)
    assert r["bit_exact"] and r["samples"] == 2 and r["max_table_bits"] == 4
    assert r["keygen_s"] > 0 and r["latency_s"] > 0 and r["key_bytes"] > r["evaluation_key_bytes"] > 0
    assert r["key_file_bytes"] > 0 and r["circuit_bit_width"] >= 4 and r["pbs_count"] > 0


@pytest.mark.parametrize("opset, op", [(s, o) for s, t in cvm.ops.OPSETS.items() for o in t])
def test_fhe_lowers_or_refuses_every_op(opset, op):
    assert ((opset, op) in fhe_lower.RULES) != ((opset, op) in fhe_lower.REFUSED)
