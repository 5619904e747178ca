"""Canonical encoding: round trip, hash stability, and rejection of bad files with clear errors."""
from pathlib import Path

import msgpack
import numpy as np
import pytest

import cvm
from cvm.format import decode_file, encode_file

FIXTURE = Path(__file__).parents[2] / "fixtures" / "cvm" / "tiny_cnn.cvm"
GOLDEN_HASH = "0xeaa3a77628c75b454c4596a09dee2eee036ad1f8205bf66147a6005592132f3e"
GOLDEN_OUTPUT_HASH = "0x312f5afea683fc9406e101ad1111001e2e3c9f10471a6d7067b111e8794cc095"


def test_golden_model_and_output_hash():
    model = cvm.load(FIXTURE)
    assert model.hash_hex == GOLDEN_HASH
    x = np.load(FIXTURE.with_name("tiny_cnn_input.npy"))
    y = model.run(x, backend="reference")
    assert "0x" + cvm.output_hash(y).hex() == GOLDEN_OUTPUT_HASH


def test_reencoding_gives_identical_bytes(tmp_path):
    data = FIXTURE.read_bytes()
    model = cvm.loads(data)
    assert model.to_bytes() == data
    model.save(tmp_path / "m.cvm")
    again = cvm.load(tmp_path / "m.cvm")
    assert again.to_bytes() == data and again.hash == model.hash


def test_meta_is_not_hashed():
    model = cvm.load(FIXTURE)
    other = cvm.Model(model.graph, {"labels": ["a"], "input_scales": {"x": 0.5}})
    assert other.hash == model.hash and other.to_bytes() != model.to_bytes()


def test_constant_change_changes_hash():
    model = cvm.load(FIXTURE)
    consts = dict(model.graph.constants)
    w = consts["fc.w"].copy()
    w[0, 0] ^= 1
    consts["fc.w"] = w
    g = cvm.Graph(model.graph.inputs, consts, model.graph.nodes, model.graph.outputs)
    assert cvm.Model(g).hash != model.hash


def _rewrap(graph_obj, meta=None):
    return encode_file(msgpack.packb(graph_obj, use_bin_type=True), meta or {})


def _graph_obj():
    consensus, _ = decode_file(FIXTURE.read_bytes())
    return msgpack.unpackb(consensus, raw=False)


@pytest.mark.parametrize("cut", [0, 1, 10, 100, -1])
def test_truncated_file(cut):
    data = FIXTURE.read_bytes()
    with pytest.raises(cvm.FormatError):
        cvm.loads(data[:cut])


def test_garbled_file():
    data = bytearray(FIXTURE.read_bytes())
    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(200):
        bad = bytearray(data)
        i = int(rng.integers(len(bad)))
        bad[i] ^= 1 << int(rng.integers(8))
        try:
            m = cvm.loads(bytes(bad))
        except cvm.CVMError:
            rejected += 1
            continue
        # A flip inside a constant's bytes or the metadata can still be a valid model: then it must
        # be a different model (hash) or identical consensus bytes (the flip hit metadata).
        assert m.hash != cvm.load(FIXTURE).hash or m.meta != cvm.load(FIXTURE).meta
    assert rejected > 0


def test_not_a_cvm_file():
    with pytest.raises(cvm.FormatError, match="not a .cvm file"):
        cvm.loads(msgpack.packb({"hello": 1}))
    with pytest.raises(cvm.FormatError, match="not valid msgpack"):
        cvm.loads(b"\xc1garbage")


def test_noncanonical_encoding_rejected():
    obj = _graph_obj()
    reordered = dict(reversed(list(obj.items())))  # same content, other key order
    with pytest.raises(cvm.FormatError, match="not canonical"):
        cvm.loads(_rewrap(reordered))


def test_wide_int_encoding_rejected():
    obj = _graph_obj()
    packed = msgpack.packb(obj, use_bin_type=True)
    # opset 1 encoded as uint64 (0xcf) instead of a positive fixint: same value, other bytes.
    key = msgpack.packb("opset")
    i = packed.index(key) + len(key)
    assert packed[i] == 0x01
    wide = packed[:i] + b"\xcf" + (1).to_bytes(8, "big") + packed[i + 1:]
    with pytest.raises(cvm.FormatError, match="not canonical"):
        cvm.loads(encode_file(wide, {}))


@pytest.mark.parametrize("mutate,message", [
    (lambda o: o["constants"][0].__setitem__(1, "float32"), "unknown dtype 'float32'"),
    (lambda o: o["constants"][0].__setitem__(3, b"\x00"), "bytes of data for shape"),
    (lambda o: o.__setitem__("version", 2), "unsupported format version 2"),
    (lambda o: o.pop("nodes"), "must be a map with keys"),
    (lambda o: o["nodes"][0][3].__setitem__("pads", [1.5]), "must be a list of integers"),
    (lambda o: o["nodes"][0].__setitem__(0, "frobnicate"), "unknown op 'frobnicate'"),
])
def test_malformed_graph(mutate, message):
    obj = _graph_obj()
    mutate(obj)
    with pytest.raises(cvm.CVMError, match=message):
        cvm.loads(_rewrap(obj))


def test_missing_file(tmp_path):
    with pytest.raises(cvm.FormatError, match="cannot read"):
        cvm.load(tmp_path / "nope.cvm")


def test_save_is_atomic(tmp_path, monkeypatch):
    model = cvm.load(FIXTURE)
    target = tmp_path / "m.cvm"
    target.write_bytes(b"old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        model.save(target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.cvm"]
