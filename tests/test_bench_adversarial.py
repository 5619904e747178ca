"""cvm.tools.bench_adversarial: every catalogue model is accepted, runs bit for bit alike on both backends,
and the benchmark runs end to end (no timing is asserted: speed is never a test's business)."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

import cvm
from cvm.tools import bench, bench_adversarial as ba


@pytest.mark.parametrize("name", list(ba.CATALOGUE))
def test_catalogue_model_is_accepted_and_bit_exact_on_both_backends(name):
    model, x = ba.build(name)  # the verifier runs in build: a rejected model raises CVMError
    assert isinstance(model, cvm.Model) and model.gas > 0
    spec = model.inputs[0]
    assert x.shape == (1,) + tuple(spec.shape[1:]) and x.dtype == spec.dtype
    ref = model.run(x, backend="reference")
    got = model.run(x, backend="numba")
    assert cvm.output_hash(got) == cvm.output_hash(ref)
    assert ba.CATALOGUE[name].why


def test_catalogue_is_broad():
    ops = {node.op for name in ba.CATALOGUE for node in ba.CATALOGUE[name].make()[0].nodes}
    assert ops >= {"conv2d", "dense", "matmul", "add", "mul", "div", "relu", "clip", "requant", "lut", "max_pool2d",
                   "sum", "max", "reshape", "transpose", "concat", "pad", "slice"}


def _small(rows):
    assert {r["kind"] for r in rows} == {"fixture", "adversarial"}
    assert all(r["seconds"] > 0 and r["gas_per_s"] > 0 and r["ratio"] > 0 for r in rows)


def test_bench_runs_end_to_end_and_prints_floors(tmp_path):
    names = ["relu_chain", "conv_big_pads", "concat_one_input"]
    out = io.StringIO()
    rows = ba.run_cli(names, ("numba", "reference"), (1, 2), 0.0, ("cancer_linear", "digits_mlp"),
                      tmp_path / "adv.json", out=out)
    _small(rows)
    adv = [r for r in rows if r["kind"] == "adversarial"]
    assert {(r["model"], r["backend"], r["batch"]) for r in adv} == {
        (n, b, k) for n in names for b in ("numba", "reference") for k in (1, 2)}
    text = out.getvalue()
    assert "floor (model gas) numba batch 1" in text and "floor (charged gas) reference batch 2" in text
    data = json.loads((tmp_path / "adv.json").read_text())
    assert len(data["floors"]) == 12 and data["rows"]  # model gas, charged, cold call x (backend, batch)
    assert "floor (cold call) numba batch 1" in text


def test_cvm_bench_adversarial_flag(capsys):
    p = bench.argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--adversarial", "relu_chain", "--seconds", "0.001", "--backends", "numba"])
    assert bench.run(args) == 0
    text = capsys.readouterr().out
    assert "relu_chain" in text and "cancer_linear" in text and "floor (model gas) numba batch 1" in text
    assert bench.run(p.parse_args(["--adversarial", "no_such_model"])) == 2


def test_module_main_lists_and_runs(capsys):
    assert ba.main(["--list"]) == 0
    assert "concat_one_input" in capsys.readouterr().out
    assert ba.main(["slice_chain", "--seconds", "0.001", "--no-fixtures", "--backends", "reference"]) == 0
    assert "slice_chain" in capsys.readouterr().out


def test_reference_constants_are_widened_once_and_shared_read_only():
    model, x = ba.build("lut_chain")
    from cvm.interp import reference
    consts = reference.widen_constants(model.graph)
    assert all(v.dtype == np.int64 and not v.flags.writeable for v in consts.values())
    a = reference.run(model.graph, model.analysis, {"x": x}, consts=consts)
    b = reference.run(model.graph, model.analysis, {"x": x})
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_bench_in_opset_4_refuses_what_opset_4_refuses_and_times_cold_calls():
    """--opset 4: the catalogue moved to gas schedule v3; a case over the node_inputs limit is a refused row
    (naming the rule), every other row has its cold-call time and ratio to the fixtures' cold median."""
    out = io.StringIO()
    rows = ba.run_cli(["concat_one_input", "relu_chain"], ("numba",), (1,), 0.0, ("cancer_linear",), out=out, opset=4)
    refused = [r for r in rows if r["kind"] == "refused"]
    assert [r["model"] for r in refused] == ["concat_one_input"] and "limits.node_inputs" in refused[0]["error"]
    adv = [r for r in rows if r["kind"] == "adversarial"]
    assert [r["model"] for r in adv] == ["relu_chain"] and adv[0]["cold_seconds"] > 0 and adv[0]["cold_ratio"] > 0
    text = out.getvalue()
    assert "opset 4" in text and "concat_one_input       refused:" in text and "floor (cold call) numba batch 1" in text
