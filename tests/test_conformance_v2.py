"""Conformance suite v2: the opset-1 op cases of v1, byte for byte, and cases of every opset-2 op; each
case names its opset; regenerating gives the same bytes; the reference and numba backends pass it."""

import pytest

from cvm import load
from suite_files import assert_recorded_platforms, assert_regenerates

from cvm.conformance import DEFAULT_DIR, read_manifest, run_suite
from cvm.ops import OPSET_V1, OPSETS

SUITE = DEFAULT_DIR.parent / "v2"
MANIFEST = read_manifest(SUITE)
V1 = read_manifest(DEFAULT_DIR)


def test_regenerating_gives_the_same_bytes(tmp_path):
    assert_regenerates(SUITE, 2, tmp_path)


def test_manifest_names_both_opsets_and_each_case_its_own():
    assert MANIFEST["version"] == 2 and MANIFEST["opsets"] == [1, 2] and "opset" not in MANIFEST
    for c in MANIFEST["cases"]:
        assert load(SUITE / c["model"]).graph.opset == c["opset"], c["name"]
        assert c["op"] in OPSETS[c["opset"]], c["name"]


def test_every_op_of_opset_2_has_cases_and_opset_1_cases_are_v1s():
    ops = {c["op"] for c in MANIFEST["cases"] if c["kind"] == "op"}
    assert ops == set(OPSETS[2])
    new = {c["op"] for c in MANIFEST["cases"] if c["opset"] == 2}
    assert new == set(OPSETS[2]) - set(OPSET_V1)
    assert {"resize2d", "conv_transpose2d", "gather", "isqrt"} <= new
    v1 = {c["name"]: c for c in V1["cases"] if c["kind"] == "op"}
    v2 = {c["name"]: c for c in MANIFEST["cases"] if c["opset"] == 1}
    assert v2.keys() == v1.keys()
    for name, c in v2.items():
        assert (c["model_hash"], c["gas"], c["output_hash"]) == (v1[name]["model_hash"], v1[name]["gas"],
                                                                 v1[name]["output_hash"]), name
        assert (SUITE / c["model"]).read_bytes() == (DEFAULT_DIR / v1[name]["model"]).read_bytes(), name


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_backends_pass_the_opset_2_cases(backend):
    results = run_suite(SUITE, backend, [c["name"] for c in MANIFEST["cases"] if c["opset"] == 2])
    assert results and all(r["ok"] for r in results), [(r["name"], r["error"] or r["got"]) for r in results if not r["ok"]]


def test_recorded_platforms_passed_every_case():
    assert_recorded_platforms(SUITE, MANIFEST)
