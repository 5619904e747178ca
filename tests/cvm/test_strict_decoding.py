"""Strict decoding: every map of a file has string keys, each once; the outer map and the metadata
have known keys and typed values. Each case here raised TypeError / AttributeError or loaded
silently (last duplicate wins) before; now it is a FormatError naming the field."""
import dataclasses
import glob
import math
from pathlib import Path

import msgpack
import pytest

import cvm
from cvm.format import decode_file, encode_file

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "fixtures" / "cvm" / "tiny_cnn.cvm"  # one input "x" (1, 8, 8), one output "logits" (10,)
CANCER = ROOT / "fixtures" / "models" / "cancer_linear.cvm"  # per-feature input scales


def _pack(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _raw_map(pairs) -> bytes:
    """A msgpack map written pair by pair: it may repeat keys or use bytes keys."""
    assert len(pairs) < 16
    return bytes([0x80 | len(pairs)]) + b"".join(_pack(k) + _pack(v) for k, v in pairs)


def _parts():
    return decode_file(FIXTURE.read_bytes())


def _rewrap_raw_graph(graph_pairs) -> bytes:
    consensus, meta = _parts()
    return encode_file(_raw_map(graph_pairs), meta)


def _graph_pairs():
    consensus, _ = _parts()
    return list(msgpack.unpackb(consensus, raw=False).items())


def test_bytes_key_in_the_outer_map():
    consensus, meta = _parts()
    data = _raw_map([("format", "cvm"), ("graph", consensus), ("meta", meta), (b"x", 1)])
    with pytest.raises(cvm.FormatError, match=r"map key b'x' is not a string"):
        cvm.loads(data)


def test_bytes_key_in_the_graph_map():
    pairs = _graph_pairs() + [(b"nodes", [])]
    with pytest.raises(cvm.FormatError, match=r"the graph: map key b'nodes' is not a string"):
        cvm.loads(_rewrap_raw_graph(pairs))


def test_bytes_key_inside_the_metadata():
    consensus, _ = _parts()
    meta = _raw_map([("provenance", {"source": "x"}), (b"labels", ["a"])])
    data = _raw_map([("format", "cvm"), ("graph", consensus)]).replace(b"\x82", b"\x83", 1) + _pack("meta") + meta
    with pytest.raises(cvm.FormatError, match=r"not a string"):
        cvm.loads(data)


def test_graph_key_twice():
    consensus, meta = _parts()
    other = cvm.GraphBuilder()
    x = other.input("x", (1, 8, 8), bits=8)
    decoy = other.build(other.op("relu", x)).consensus_bytes
    data = _raw_map([("format", "cvm"), ("graph", decoy), ("meta", meta), ("graph", consensus)])
    with pytest.raises(cvm.FormatError, match=r"map key 'graph' appears twice"):
        cvm.loads(data)


def test_duplicate_key_in_the_graph_map():
    pairs = _graph_pairs()
    pairs.insert(3, pairs[2])
    with pytest.raises(cvm.FormatError, match=r"appears twice"):
        cvm.loads(_rewrap_raw_graph(pairs))


def test_duplicate_key_in_a_node_attribute_map():
    obj = dict(_graph_pairs())
    op, ins, out, attrs = obj["nodes"][0]
    assert attrs, "the first node of tiny_cnn has attributes"
    key = sorted(attrs)[0]
    attr_map = _raw_map([(key, attrs[key])] + sorted(attrs.items()))
    node = b"\x94" + _pack(op) + _pack(ins) + _pack(out) + attr_map
    nodes = msgpack.packb(obj["nodes"][1:], use_bin_type=True)
    n = len(obj["nodes"])
    assert n < 16 and nodes[0] == 0x90 | (n - 1)
    nodes = bytes([0x90 | n]) + node + nodes[1:]
    body = b"".join(_pack(k) + (nodes if k == "nodes" else _pack(v)) for k, v in sorted(obj.items()))
    data = encode_file(bytes([0x80 | len(obj)]) + body, {})
    with pytest.raises(cvm.FormatError, match=rf"map key '{key}' appears twice"):
        cvm.loads(data)


def test_unknown_key_in_the_outer_map():
    consensus, meta = _parts()
    with pytest.raises(cvm.FormatError, match=r"exactly the keys format, graph, meta \(has extra, format"):
        cvm.loads(_pack({"format": "cvm", "graph": consensus, "meta": meta, "extra": 1}))


BAD_META = [
    ({"input_scales": 5}, r"meta.input_scales: must be a map, got int"),
    ({"input_scales": {"x": "big"}}, r"meta.input_scales.x: must be a positive finite number"),
    ({"input_scales": {"x": -0.5}}, r"meta.input_scales.x: must be a positive finite number"),
    ({"input_scales": {"x": math.nan}}, r"meta.input_scales.x: must be a positive finite number"),
    ({"input_scales": {"x": math.inf}}, r"meta.input_scales.x: must be a positive finite number"),
    ({"input_scales": {"x": []}}, r"meta.input_scales.x: must not be an empty list"),
    ({"input_scales": {"x": [0.1, 0.2]}}, r"meta.input_scales.x: has 2 scales; expected 1 or one per feature \(8\)"),
    ({"input_scales": {"y": 0.1}}, r"meta.input_scales.y: names no input of the graph"),
    ({"output_scales": [0.1]}, r"meta.output_scales: must be a map, got a list"),
    ({"output_scales": {"logits": True}}, r"meta.output_scales.logits: must be a positive finite number"),
    ({"output_scales": {"x": 1.0}}, r"meta.output_scales.x: names no output of the graph"),
    ({"labels": "cat"}, r"meta.labels: must be a list"),
    ({"labels": ["cat", 3]}, r"meta.labels\[1\]: must be a string, got int"),
    ({"calibration_hash": "0x12"}, r"meta.calibration_hash: must be '0x' and 64 lowercase hex digits"),
    ({"calibration": {"method": "absmax", "samples": -1}}, r"meta.calibration.samples: must be a non-negative"),
    ({"provenance": {"tool": "mrt", "color": "red"}}, r"meta.provenance: unknown key 'color'"),
    ({"tensor_map": {"a": ["a", 0.1]}}, r"meta.tensor_map.a: must be \[name, scales, axis\]"),
    ({"tensor_map": {"a": ["a", [0.1], "0"]}}, r"meta.tensor_map.a\[2\]: must be an integer or nil"),
    ({"output_transform": 7}, r"meta.output_transform: must be a string, got int or meta.output_transform: must be a list"),
    ({"quantization": {"bits": "8"}}, r"meta.quantization.bits: must be a non-negative integer"),
    ({"notes": "hello"}, r"meta: unknown key 'notes'"),
    ({"labels": ["x" * 5000]}, r"meta.labels\[0\]: is 5000 characters long"),
]


@pytest.mark.parametrize("meta,message", BAD_META, ids=[str(i) for i in range(len(BAD_META))])
def test_bad_metadata_in_a_file(meta, message):
    consensus, _ = _parts()
    with pytest.raises(cvm.FormatError, match=message):
        cvm.loads(encode_file(consensus, meta))


def test_bad_metadata_through_the_api():
    graph = cvm.load(FIXTURE).graph
    with pytest.raises(cvm.FormatError, match=r"meta.input_scales: must be a map"):
        cvm.Model(graph, {"input_scales": 0.5})


def test_per_feature_scales_must_match_the_features():
    consensus, meta = decode_file(CANCER.read_bytes())
    model = cvm.loads(CANCER.read_bytes())
    assert isinstance(model.inputs[0].scale, list) and len(model.inputs[0].scale) == model.inputs[0].shape[-1]
    meta = dict(meta, input_scales={"x": meta["input_scales"]["x"][:-1]})
    with pytest.raises(cvm.FormatError, match=r"meta.input_scales.x: has 29 scales; expected 1 or one per feature \(30\)"):
        cvm.loads(encode_file(consensus, meta))


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "fixtures" / "**" / "*.cvm"), recursive=True)),
                         ids=lambda p: Path(p).name)
def test_every_committed_model_passes_the_schema_unchanged(path):
    data = Path(path).read_bytes()
    model = cvm.loads(data)
    assert model.to_bytes() == data


def test_the_schema_lists_every_quantization_setting():
    config = pytest.importorskip("mrt.quantize.config")
    fields = {f.name for f in dataclasses.fields(config.QuantConfig)}
    schema = cvm.meta.QUANTIZATION
    written = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config.QuantConfig()).items()}
    cvm.meta.SCHEMA({"quantization": written}, "meta")  # as mrt.quantize writes it (tuples as lists)
    for name in fields:  # each field is known to the schema (an unknown one raises)
        try:
            schema({name: None}, "meta.quantization")
        except cvm.FormatError as e:
            assert "unknown key" not in str(e), f"add QuantConfig.{name} to cvm.meta.QUANTIZATION"


@pytest.mark.parametrize("version", [True, 1.0])
def test_version_must_be_the_integer(version):
    obj = dict(_graph_pairs())
    obj["version"] = version
    with pytest.raises(cvm.FormatError, match="unsupported format version"):
        cvm.loads(encode_file(msgpack.packb(obj, use_bin_type=True), {}))
