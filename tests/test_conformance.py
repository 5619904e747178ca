"""The conformance suite: it covers every op, regenerates to the same bytes, and its runner fails
loudly on a wrong model, input or hash, and runs without numba."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cvm.cli import main
from suite_files import assert_regenerates

from cvm.conformance import DEFAULT_DIR, read_manifest, record, run_suite
from cvm.ops import OPSET_V1

ROOT = Path(__file__).parents[1]
SUITE = DEFAULT_DIR
MANIFEST = read_manifest(SUITE)


def test_regenerating_gives_the_same_bytes(tmp_path):
    assert_regenerates(SUITE, 1, tmp_path)


def test_every_op_of_opset1_has_cases():
    ops = {c["op"] for c in MANIFEST["cases"] if c["kind"] == "op"}
    assert ops == set(OPSET_V1)


def test_every_fixture_model_with_an_input_is_a_case():
    models = {c["name"] for c in MANIFEST["cases"] if c["kind"] == "model"}
    fixtures = {f"model.{p.stem}" for d in ("cvm", "models") for p in (ROOT / "fixtures" / d).glob("*.cvm")
                if p.with_name(p.stem + "_input.npy").exists()}
    assert {"model.tiny_cnn", "model.mnist_cnn"} <= fixtures and models == fixtures


def test_inputs_reach_the_bounds_of_their_bits():
    for c in MANIFEST["cases"]:
        if c["kind"] != "op":
            continue
        x = np.load(SUITE / c["input"])
        flat = x.reshape(x.shape[0], -1).astype(np.int64)
        assert flat[0].min() == -flat[1].max() > 0, c["name"]  # sample 0 all +max, sample 1 all -max
        assert (flat[0] == flat[0, 0]).all() and (flat[1] == flat[1, 0]).all(), c["name"]


def _copy_suite(tmp_path) -> Path:
    d = tmp_path / "suite"
    shutil.copytree(SUITE, d)
    return d


def test_cli_passes_and_prints_a_table(capsys):
    assert main(["conformance", str(SUITE), "-k", "requant."]) == 0
    out = capsys.readouterr().out
    assert "requant.halves" in out and "FAIL" not in out
    assert f"{sum('requant.' in c['name'] for c in MANIFEST['cases'])} passed, 0 failed" in out


def test_cli_fails_on_a_wrong_output_hash_or_gas(tmp_path, capsys):
    d = _copy_suite(tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    m["cases"][0]["output_hash"] = "0x" + "00" * 32
    m["cases"][1]["gas"] += 1
    (d / "manifest.json").write_text(json.dumps(m))
    assert main(["conformance", str(d), "-k", m["cases"][0]["name"], "-k", m["cases"][1]["name"]]) == 1
    out = capsys.readouterr().out
    assert out.count("FAIL") == 2 and "gas" in out and "0 passed, 2 failed" in out


def test_cli_fails_on_a_changed_input_or_model(tmp_path, capsys):
    d = _copy_suite(tmp_path)
    case = next(c for c in MANIFEST["cases"] if c["name"] == "add.broadcast_activations")
    x = np.load(d / case["input"])
    x[-1, 0, 0] -= 1  # one value of one (random) sample
    np.save(d / case["input"], x)
    assert main(["conformance", str(d), "-k", "add.broadcast_activations"]) == 1
    assert "FAIL" in capsys.readouterr().out

    other = next(c for c in MANIFEST["cases"] if c["name"] == "dense.basic")
    shutil.copy(d / "models" / "dense.rank3.cvm", d / other["model"])  # a valid model, but not this one
    results = run_suite(d, "reference", ["dense.basic"])
    assert not results[0]["ok"] and "model hash" in results[0]["error"]


def test_json_result_and_record(tmp_path):
    out, platforms = tmp_path / "r.json", tmp_path / "platforms.json"
    assert main(["conformance", str(SUITE), "-k", "model.", "--json", str(out), "--label", "test-x"]) == 0
    r = json.loads(out.read_text())
    assert r["label"] == "test-x" and r["cases"] == r["passed"] >= 1 and r["failed"] == []
    record(out, platforms, 3, 4)
    record(out, platforms, 5, 6)  # same label and backend: replaced, not added
    doc = json.loads(platforms.read_text())
    assert [(p["label"], p["setup_seconds"]) for p in doc["platforms"]] == [("test-x", 5)]


def test_runs_without_numba():
    # The foreign userlands of scripts/crossplatform have numpy, msgpack and keccak only.
    code = ("import sys; sys.modules['numba'] = None\n"
            "from cvm.cli import main\n"
            f"sys.exit(main(['conformance', {str(SUITE)!r}, '-k', 'model.']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)  # a hang guard, not a speed check
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout


def test_crossplatform_keccak_shim_matches_eth_hash():
    from eth_hash.auto import keccak
    shim = ROOT / "scripts" / "crossplatform" / "shim"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from eth_hash.auto import keccak; "
            "print(keccak(b'').hex(), keccak(bytearray(b'cvm' * 100)).hex())")
    proc = subprocess.run([sys.executable, "-c", code, str(shim)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [keccak(b"").hex(), keccak(b"cvm" * 100).hex()]
    assert proc.stdout.startswith("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")


def test_recorded_platforms_passed_every_case():
    path = SUITE / "platforms.json"
    if not path.exists():
        pytest.skip("no platform recorded yet")
    platforms = json.loads(path.read_text())["platforms"]
    assert platforms
    assert {"x86_64", "i686", "aarch64"} <= {p["machine"] for p in platforms}
    for p in platforms:
        assert p["passed"] == p["cases"] > 0 and not p["failed"] and p["suite_version"] == MANIFEST["version"], p["label"]
