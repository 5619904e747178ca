"""Conformance suite v4: gas schedule v3 (opset 4, docs/spec.md section 17). Every case of suite v3 written
in opset 4 (the same nodes, constants, inputs and output hashes, new model hashes and schedule-v3 gas) and
the corners of schedule v3 (large nodes of every LARGE row, the same at the threshold, a node listing
MAX_NODE_INPUTS inputs); regenerating gives the same bytes; the reference and numba backends pass it;
suites v1-v3 are untouched (their own tests)."""

import pytest

from cvm import gas_v2, gas_v3, load
from suite_files import assert_recorded_platforms, assert_regenerates

from cvm.conformance import DEFAULT_DIR, read_manifest, run_suite
from cvm.ops import OPSETS

SUITE = DEFAULT_DIR.parent / "v4"
MANIFEST = read_manifest(SUITE)
V3 = {c["name"]: c for c in read_manifest(DEFAULT_DIR.parent / "v3")["cases"]}


def test_regenerating_gives_the_same_bytes(tmp_path):
    assert_regenerates(SUITE, 4, tmp_path)


def test_every_v3_case_is_there_in_opset_4_with_its_outputs():
    assert MANIFEST["version"] == 4 and MANIFEST["opsets"] == [4]
    cases = {c["name"]: c for c in MANIFEST["cases"]}
    assert set(V3) <= set(cases)
    assert {c["op"] for c in MANIFEST["cases"] if c["kind"] == "op"} == set(OPSETS[4])
    for name, old in V3.items():
        c = cases[name]
        model, before = load(SUITE / c["model"]), load(DEFAULT_DIR.parent / "v3" / old["model"])
        assert model.graph.opset == c["opset"] == 4, name
        assert model.graph.nodes == before.graph.nodes and model.graph.outputs == before.graph.outputs, name
        assert c["output_hash"] == old["output_hash"] and c["model_hash"] != old["model_hash"], name
        assert c["gas"] == model.gas >= before.gas + gas_v3.EDGE * sum(len(n.inputs) for n in model.graph.nodes), name


def test_the_schedule_v3_corners_are_priced_as_section_17_says():
    cases = {c["name"]: c for c in MANIFEST["cases"]}
    for row in gas_v3.LARGE:
        large, small = cases[f"v3.{row}_large"], cases[f"v3.{row}_at_threshold"]
        model = load(SUITE / large["model"])
        assert gas_v3.is_large(row, [model.analysis.tensors[i] for i in model.graph.nodes[-1].inputs],
                               model.analysis.tensors[model.graph.nodes[-1].output].shape), row
        assert large["gas"] > small["gas"] or gas_v3.LARGE[row] == gas_v2.FACTOR[row], row
    widest = load(SUITE / cases["v3.concat_max_inputs"]["model"])
    assert len(widest.graph.nodes[-1].inputs) == 1024


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_backends_pass_suite_v4(backend):
    results = run_suite(SUITE, backend)
    assert results and all(r["ok"] for r in results), [(r["name"], r["error"] or r["got"]) for r in results if not r["ok"]]


def test_recorded_platforms_passed_every_case():
    assert_recorded_platforms(SUITE, MANIFEST)
