"""The .cvm file: canonical msgpack; the model hash is keccak256 of the consensus bytes.

File = msgpack map {"format": "cvm", "graph": <bin: consensus bytes>, "meta": <map: float metadata>}.
Consensus bytes = msgpack of the graph with sorted map keys, no floats, little-endian raw arrays
(docs/spec.md, "Model encoding"). Decoding re-encodes and rejects any file that is not canonical,
so a model has exactly one encoding and one hash.
"""
from __future__ import annotations

from itertools import repeat
from math import prod

import msgpack
import numpy as np
from eth_hash.auto import keccak

from . import limits
from .errors import FormatError
from .ir import Graph, Input, Node
from .values import DTYPE_NAMES, dtype_name

FORMAT_NAME = "cvm"
FORMAT_VERSION = 1


def _canonical(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, strict_types=False)


def _attr_value(v):
    return list(v) if isinstance(v, (tuple, list)) else int(v)


def graph_to_obj(graph: Graph) -> dict:
    return {
        "constants": [[name, dtype_name(v.dtype), list(v.shape), np.ascontiguousarray(v, v.dtype.newbyteorder("<")).tobytes()]
                      for name, v in graph.constants.items()],
        "inputs": [[i.name, list(i.shape), i.bits] for i in graph.inputs],
        "nodes": [[n.op, list(n.inputs), n.output, {k: _attr_value(n.attrs[k]) for k in sorted(n.attrs)}]
                  for n in graph.nodes],
        "opset": graph.opset,
        "outputs": list(graph.outputs),
        "version": FORMAT_VERSION,
    }


def encode_graph(graph: Graph) -> bytes:
    """The consensus bytes of a graph (what the model hash covers)."""
    return _canonical(graph_to_obj(graph))


def model_hash(consensus: bytes) -> bytes:
    return keccak(consensus)


def _strict_map(pairs: list) -> dict:
    """Every map in a file: string keys, each once. msgpack would give bytes keys (which then fail to
    sort against strings) and keep the last of duplicate keys (a file that reads differently to a
    decoder that keeps the first)."""
    out = {}
    for k, v in pairs:
        if not isinstance(k, str):
            raise FormatError(f"map key {k!r} is not a string"[:200])
        if k in out:
            raise FormatError(f"map key {k!r} appears twice"[:200])
        out[k] = v
    return out


def _unpack(data: bytes, what: str):
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True, object_pairs_hook=_strict_map)
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise FormatError(f"{what} is not valid msgpack: {type(e).__name__}: {e}") from None


def _expect(cond: bool, message: str) -> None:
    if not cond:
        raise FormatError(message)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _all(v: list, kind: type) -> bool:
    """Every item an instance of `kind`, with per item only C-level work (a node may list 10^6
    inputs, an attribute 10^6 integers)."""
    return all(map(isinstance, v, repeat(kind)))


def _is_ints(v) -> bool:
    return isinstance(v, list) and _all(v, int) and not any(map(isinstance, v, repeat(bool)))


def _ints(v, what: str) -> list[int]:
    _expect(_is_ints(v), f"{what} must be a list of integers")
    return v


def _decode_constants(entries: list, lim: limits.Limits) -> dict[str, np.ndarray]:
    """The constants, each checked against its opset's limits before its array is made (their total
    is the verifier's limits.constants)."""
    constants = {}
    for entry in entries:
        name, array = _decode_constant(entry, lim)
        if name in constants:
            raise FormatError(f"constant {name!r} is defined twice")
        constants[name] = array
    return constants


def _decode_constant(entry, lim: limits.Limits) -> tuple[str, np.ndarray]:
    """One [name, dtype, shape, data] entry (a file may hold 10^5 constants: each message is
    formatted only to raise)."""
    _expect(isinstance(entry, list) and len(entry) == 4, "a constant must be [name, dtype, shape, data]")
    name, dt, shape, data = entry
    _expect(isinstance(name, str), "a constant name must be a string")
    if not (isinstance(dt, str) and dt in DTYPE_NAMES):
        raise FormatError(f"constant {name!r} has unknown dtype {dt!r}; allowed: {sorted(DTYPE_NAMES)}")
    if not _is_ints(shape):
        raise FormatError(f"constant {name!r} shape must be a list of integers")
    if not (len(shape) <= limits.MAX_RANK and (not shape or (min(shape) > 0 and max(shape) <= limits.MAX_DIM))):
        raise FormatError(f"constant {name!r} has an invalid shape {shape}")
    n = prod(shape)
    if n > lim.constant_elements:
        raise FormatError(f"constant {name!r} has {n} elements > limit {lim.constant_elements}")
    if not isinstance(data, bytes):
        raise FormatError(f"constant {name!r} data must be bytes")
    dtype = DTYPE_NAMES[dt]
    if len(data) != n * dtype.itemsize:
        raise FormatError(f"constant {name!r}: {len(data)} bytes of data for shape {shape} of {dt} "
                          f"({n * dtype.itemsize} expected)")
    return name, np.frombuffer(data, dtype=dtype).reshape(shape)


def _decode_input(entry) -> Input:
    _expect(isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
            and _is_int(entry[2]), "an input must be [name, shape, bits]")
    if not _is_ints(entry[1]):
        raise FormatError(f"input {entry[0]!r} shape must be a list of integers")
    return Input(entry[0], tuple(entry[1]), entry[2])


def _decode_node(entry) -> Node:
    """One [op, inputs, output, attrs] entry (each message formatted only to raise)."""
    _expect(isinstance(entry, list) and len(entry) == 4, "a node must be [op, inputs, output, attrs]")
    op, ins, out, attrs = entry
    _expect(isinstance(op, str) and isinstance(out, str), "a node's op and output must be strings")
    if not (isinstance(ins, list) and _all(ins, str)):
        raise FormatError(f"node {out!r}: inputs must be strings")
    if not (isinstance(attrs, dict) and _all(list(attrs), str)):
        raise FormatError(f"node {out!r}: attrs must be a map with string keys")
    for k, v in attrs.items():
        if isinstance(v, list):
            if not _is_ints(v):
                raise FormatError(f"node {out!r} attribute {k!r} must be a list of integers")
        elif not _is_int(v):
            raise FormatError(f"node {out!r}: attribute {k!r} must be an integer or a list of integers")
    return Node(op, tuple(ins), out, {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()})


def decode_graph(consensus: bytes) -> Graph:
    obj = _unpack(consensus, "the graph")
    _expect(isinstance(obj, dict) and sorted(obj) == ["constants", "inputs", "nodes", "opset", "outputs", "version"],
            "the graph must be a map with keys constants, inputs, nodes, opset, outputs, version")
    _expect(_is_int(obj["version"]) and obj["version"] == FORMAT_VERSION, f"unsupported format version {obj['version']!r} (this CVM reads {FORMAT_VERSION})")
    _expect(_is_int(obj["opset"]), "opset must be an integer")
    for key in ("constants", "inputs", "nodes", "outputs"):
        _expect(isinstance(obj[key], list), f"{key} must be a list")
    lim = limits.of(obj["opset"])  # an unknown opset: the newest limits here, refused by the verifier
    _expect(len(obj["nodes"]) <= lim.nodes, f"{len(obj['nodes'])} nodes > limit {lim.nodes}")
    constants = _decode_constants(obj["constants"], lim)

    inputs = list(map(_decode_input, obj["inputs"]))
    nodes = list(map(_decode_node, obj["nodes"]))
    outputs = obj["outputs"]
    _expect(_all(outputs, str), "outputs must be strings")
    graph = Graph(inputs, constants, nodes, outputs, obj["opset"])
    _expect(encode_graph(graph) == consensus, "the graph encoding is not canonical (re-encoding gives other bytes)")
    return graph


def encode_file(consensus: bytes, meta: dict) -> bytes:
    return msgpack.packb({"format": FORMAT_NAME, "graph": consensus, "meta": meta}, use_bin_type=True)


def check_file_size(size: int, opset: int) -> None:
    """A file within the limit of the opset its graph names (decode_file checked the largest limit,
    before the opset was known)."""
    _expect(size <= limits.of(opset).file_bytes, f"file is {size} bytes > limit {limits.of(opset).file_bytes} of opset {opset}")


def decode_file(data: bytes) -> tuple[bytes, dict]:
    """Split a .cvm file into consensus bytes and metadata."""
    if len(data) > limits.MAX_FILE_BYTES:
        raise FormatError(f"file is {len(data)} bytes > limit {limits.MAX_FILE_BYTES}")
    obj = _unpack(data, "the file")
    _expect(isinstance(obj, dict) and obj.get("format") == FORMAT_NAME,
            "not a .cvm file (expected a msgpack map with format 'cvm')")
    _expect(sorted(obj) == ["format", "graph", "meta"],
            f"a .cvm file must have exactly the keys format, graph, meta (has {', '.join(sorted(obj))})"[:300])
    _expect(isinstance(obj["graph"], bytes), "graph must be bytes")
    _expect(isinstance(obj["meta"], dict), "meta must be a map")
    return obj["graph"], obj["meta"]
