"""Model files and output commitments hash the same after save/load/save, and the golden hashes of
the conformance suite hold. Reference backend only (no numba): this file also runs in the numpy<2
venv of the FHE extra."""

import numpy as np
import pytest

import cvm
from cvm.commit import encode_outputs
from cvm.conformance import DEFAULT_DIR, read_manifest

SUITE = DEFAULT_DIR
CASES = read_manifest(SUITE)["cases"]
IDS = [c["name"] for c in CASES]


def _expected(case) -> list[np.ndarray]:
    return [np.load(SUITE / o["expected"], allow_pickle=False) for o in case["outputs"]]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_golden_hashes_hold(case):
    data = (SUITE / case["model"]).read_bytes()
    model = cvm.loads(data)
    assert model.hash_hex == case["model_hash"]
    x = np.load(SUITE / case["input"], allow_pickle=False)
    assert x.dtype == model.inputs[0].dtype and list(x.shape) == case["input_shape"]
    y = model.run(x, backend="reference")
    named = y if isinstance(y, dict) else {model.outputs[0].name: y}
    for spec, want in zip(model.outputs, _expected(case)):
        assert named[spec.name].dtype == want.dtype and np.array_equal(named[spec.name], want), spec.name
    assert "0x" + cvm.output_hash(y).hex() == case["output_hash"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_save_load_save_is_identical(case, tmp_path):
    data = (SUITE / case["model"]).read_bytes()
    model = cvm.loads(data)
    assert model.to_bytes() == data
    model.save(tmp_path / "a.cvm")
    again = cvm.load(tmp_path / "a.cvm")
    again.save(tmp_path / "b.cvm")
    assert (tmp_path / "a.cvm").read_bytes() == (tmp_path / "b.cvm").read_bytes() == data
    assert again.hash == model.hash and again.consensus_bytes == model.consensus_bytes


def test_expected_outputs_commit_to_the_manifest_hash():
    # The commitment of the stored expected arrays, without running anything: the encoding alone.
    for case in CASES:
        assert "0x" + cvm.output_hash(_expected(case)).hex() == case["output_hash"], case["name"]


def test_output_hash_survives_a_roundtrip_through_npy(tmp_path):
    case = next(c for c in CASES if c["name"] == "model.tiny_cnn")
    model = cvm.load(SUITE / case["model"])
    y = model.run(np.load(SUITE / case["input"]), backend="reference")
    np.save(tmp_path / "y.npy", y)
    assert cvm.output_hash(np.load(tmp_path / "y.npy")) == cvm.output_hash(y)


def test_output_encoding_bytes_are_spelled_out():
    a = np.array([[1, -1]], np.int8)
    # msgpack: array(1) of array(3) ["int8", [1, 2], bin8(2) 01 ff]
    assert encode_outputs(a) == bytes.fromhex("91" "93" "a4696e7438" "920102" "c40201ff")
    assert cvm.output_hash(a).hex() == "17ac6954608cc395e864134dcf2b1915c2361085d08e37d30a114da35111c29b"


def test_output_hash_ignores_byte_order_and_memory_layout():
    y = np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4) * 65537
    h = cvm.output_hash(y)
    assert cvm.output_hash(y.astype(">i4")) == h
    assert cvm.output_hash(np.asfortranarray(y)) == h
    assert cvm.output_hash(y.astype(np.int64).astype(np.int32)) == h
    assert cvm.output_hash(y.astype(np.int16)) != h  # the dtype is committed too
    assert cvm.output_hash(y.reshape(2, 12)) != h  # and the shape


def test_model_hash_ignores_metadata():
    data = (SUITE / "models" / "model.tiny_cnn.cvm").read_bytes()
    model = cvm.loads(data)
    other = cvm.Model(model.graph, {"labels": ["changed"], "input_scales": {"x": 0.5}})
    assert other.hash == model.hash and other.to_bytes() != data
