"""Conformance suite v3: gas schedule v2 (opset 3). Every case of suite v2 and every whole-model case of
suite v1 written in opset 3: the same nodes, constants, inputs and output hashes (opset 3 changes no
semantics), new model hashes and the gas of schedule v2; regenerating gives the same bytes; the
reference and numba backends pass it; suites v1 and v2 are untouched (their own tests)."""

import pytest

from cvm import gas_v2, load
from suite_files import assert_recorded_platforms, assert_regenerates

from cvm.conformance import DEFAULT_DIR, read_manifest, run_suite
from cvm.ops import OPSETS

SUITE = DEFAULT_DIR.parent / "v3"
MANIFEST = read_manifest(SUITE)
V2 = {c["name"]: c for c in read_manifest(DEFAULT_DIR.parent / "v2")["cases"]}
V1 = {c["name"]: c for c in read_manifest(DEFAULT_DIR)["cases"]}


def test_regenerating_gives_the_same_bytes(tmp_path):
    assert_regenerates(SUITE, 3, tmp_path)


def test_every_case_is_an_earlier_case_in_opset_3():
    assert MANIFEST["version"] == 3 and MANIFEST["opsets"] == [3]
    names = {c["name"] for c in MANIFEST["cases"]}
    assert names == set(V2) | {n for n, c in V1.items() if c["kind"] == "model"}
    assert {c["op"] for c in MANIFEST["cases"] if c["kind"] == "op"} == set(OPSETS[3])
    for c in MANIFEST["cases"]:
        old = V2.get(c["name"]) or V1[c["name"]]
        old_dir = DEFAULT_DIR.parent / ("v2" if c["name"] in V2 else "v1")
        model, before = load(SUITE / c["model"]), load(old_dir / old["model"])
        assert model.graph.opset == c["opset"] == 3, c["name"]
        assert model.graph.nodes == before.graph.nodes and model.graph.outputs == before.graph.outputs, c["name"]
        assert c["output_hash"] == old["output_hash"] and c["model_hash"] != old["model_hash"], c["name"]
        assert c["gas"] == model.gas == gas_v2.model_gas(before) and old["gas"] == before.gas, c["name"]
        assert (SUITE / c["input"]).read_bytes() == (old_dir / old["input"]).read_bytes(), c["name"]


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_backends_pass_suite_v3(backend):
    results = run_suite(SUITE, backend)
    assert results and all(r["ok"] for r in results), [(r["name"], r["error"] or r["got"]) for r in results if not r["ok"]]


def test_recorded_platforms_passed_every_case():
    assert_recorded_platforms(SUITE, MANIFEST)
