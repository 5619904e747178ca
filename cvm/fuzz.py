"""Structure-aware mutation fuzzing of .cvm files (docs/fuzzing.md).

A case: take a seed model, decode its graph to plain msgpack objects, apply a few mutations (attribute
boundary values, rewired or dropped nodes, constants of another dtype or shape, odd input bits, odd
metadata, ...), encode it again canonically (so it gets past the canonical-encoding check and reaches
the verifier and the backends), now and then damage the bytes themselves. The oracle (`check`):
loading either raises a CVMError or returns a model; an accepted model must run on the reference and
numba backends (and numba's portable kernels, every op split over threads) to the same output hash,
or fail on both with the same CVMError class. Anything else is a crash or a disagreement.

    report = fuzz(seed_paths(), cases=1000, seed=1)     # deterministic given (seeds, cases, seed)
    cvm fuzz --cases 100000 --seed 1 --save-dir findings/
"""
from __future__ import annotations

import argparse
import json
import math
import re
import struct
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import msgpack
import numpy as np

from . import CVMError, loads, output_hash
from .ops import OPSET_V1

ROOT = Path(__file__).resolve().parent.parent
SEED_GLOBS = ("fixtures/models/*.cvm", "fixtures/conformance/v1/models/*.cvm")
MAX_RUN_GAS = 500_000_000  # gas x batch above which an accepted model is not run ("too big")
MAX_RUN_ACTIVATIONS = 1 << 27  # bytes of activations x batch, likewise
SLOW_SECONDS = 10.0  # a case slower than this (load, verify, both runs) is a finding
MAX_BATCH = 3

# Integers every attribute, dimension and bit count is tried with: the limits (cvm/limits.py) and one
# past them, the int32/int64/uint64 edges (all msgpack can hold), zero, one, negatives.
BOUNDARY = [0, 1, -1, 2, -2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 62, 63, 64, 65, 127, 128, 255, 256,
            4096, 4097, 65535, 65536, 65537, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, -(1 << 20), 1 << 24,
            (1 << 24) + 1, 1 << 26, (1 << 31) - 1, 1 << 31, -(1 << 31), -(1 << 31) - 1, 1 << 32, (1 << 62),
            (1 << 63) - 1, 1 << 63, -(1 << 63), (1 << 64) - 1]
BITS = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, -1]
DTYPES = ["int8", "int16", "int32"]
ODD_VALUES = [None, True, False, 1.5, float("nan"), float("inf"), -0.0, "", "x", b"", b"\x00", [], {}, [[1]],
              {"a": 1}, "int64", "float32", "\x00", "é" * 3]
OPS = sorted(OPSET_V1)


# ---------------------------------------------------------------------------------------------- seeds

@dataclass
class Seed:
    name: str
    data: bytes  # the file as committed
    graph: dict  # the decoded graph object (plain msgpack values)
    meta: dict


def seed_paths() -> list[Path]:
    """Every committed .cvm model: the fixture models and the conformance suite's per-op cases."""
    return [p for pattern in SEED_GLOBS for p in sorted(ROOT.glob(pattern))]


def load_seeds(paths: Iterable[str | Path]) -> list[Seed]:
    seeds = []
    for p in paths:
        data = Path(p).read_bytes()
        obj = msgpack.unpackb(data, raw=False)
        seeds.append(Seed(Path(p).name, data, msgpack.unpackb(obj["graph"], raw=False), obj["meta"]))
    if not seeds:
        raise CVMError("no seed models: pass --seeds or run from a checkout with fixtures/")
    return seeds


def _copy(v):
    """Copy the containers; bytes and scalars are immutable and shared."""
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    return v


# ---------------------------------------------------------------------------------------------- encoding

def _sorted(v):
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    if isinstance(v, dict):
        try:
            keys = sorted(v)
        except TypeError:  # mixed key types (a mutation put one there): keep their order
            keys = list(v)
        return {k: _sorted(v[k]) for k in keys}
    return v


def pack(obj) -> bytes:
    """Canonical msgpack (sorted keys, shortest forms), as cvm.format writes it."""
    return msgpack.packb(_sorted(obj), use_bin_type=True)


def pack_loose(obj, rng: np.random.Generator) -> bytes:
    """A valid msgpack encoding of `obj` that is (usually) not the canonical one: some integers,
    strings, bytes, arrays and maps in a wider form than needed, some maps with keys out of order."""
    out = bytearray()

    def wide() -> bool:
        return rng.random() < 0.15

    def enc(v):
        nonlocal out
        if v is None:
            out.append(0xC0)
        elif v is True or v is False:
            out.append(0xC3 if v else 0xC2)
        elif isinstance(v, int):
            if 0 <= v < 128 and not wide():
                out.append(v)
            elif -32 <= v < 0 and not wide():
                out.append(v & 0xFF)
            elif v >= 0:
                fmt = next((f for f in ((0xCC, "B", 1 << 8), (0xCD, "H", 1 << 16), (0xCE, "I", 1 << 32),
                                        (0xCF, "Q", 1 << 64)) if v < f[2] and not (wide() and f[0] != 0xCF)), None)
                fmt = fmt or (0xCF, "Q", 0)
                out.append(fmt[0])
                out += struct.pack(">" + fmt[1], v)
            else:
                fmt = next((f for f in ((0xD0, "b", 1 << 7), (0xD1, "h", 1 << 15), (0xD2, "i", 1 << 31),
                                        (0xD3, "q", 1 << 63)) if -v <= f[2] and not (wide() and f[0] != 0xD3)), None)
                fmt = fmt or (0xD3, "q", 0)
                out.append(fmt[0])
                out += struct.pack(">" + fmt[1], v)
        elif isinstance(v, float):
            out.append(0xCB)
            out += struct.pack(">d", v)
        elif isinstance(v, str):
            b = v.encode()
            if len(b) < 32 and not wide():
                out.append(0xA0 | len(b))
            elif len(b) < 256 and not wide():
                out += bytes([0xD9, len(b)])
            else:
                out.append(0xDB)
                out += struct.pack(">I", len(b))
            out += b
        elif isinstance(v, bytes):
            if len(v) < 256 and not wide():
                out += bytes([0xC4, len(v)])
            else:
                out.append(0xC6)
                out += struct.pack(">I", len(v))
            out += v
        elif isinstance(v, list):
            if len(v) < 16 and not wide():
                out.append(0x90 | len(v))
            else:
                out.append(0xDD)
                out += struct.pack(">I", len(v))
            for x in v:
                enc(x)
        elif isinstance(v, dict):
            keys = list(v)
            if rng.random() < 0.3:
                keys = keys[::-1]
            if len(keys) < 16 and not wide():
                out.append(0x80 | len(keys))
            else:
                out.append(0xDF)
                out += struct.pack(">I", len(keys))
            for k in keys:
                enc(k)
                enc(v[k])
        else:
            raise TypeError(type(v))

    enc(_sorted(obj))
    return bytes(out)


def encode(graph: dict, meta, rng: np.random.Generator, loose: str = "") -> bytes:
    """The file: `loose` = "graph" or "file" encodes that layer non-canonically."""
    gbytes = pack_loose(graph, rng) if loose == "graph" else pack(graph)
    top = {"format": "cvm", "graph": gbytes, "meta": meta}
    return pack_loose(top, rng) if loose == "file" else msgpack.packb(top, use_bin_type=True)


# ---------------------------------------------------------------------------------------------- mutations
# Each takes (graph object, meta holder, rng) and mutates in place; it returns a short description, or
# None when it does not apply to this graph.

def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _int(rng) -> int:
    r = rng.random()
    if r < 0.6:
        return _pick(rng, BOUNDARY)
    if r < 0.8:
        return int(rng.integers(-8, 65))
    return int(rng.integers(-(1 << 62), 1 << 62)) >> int(rng.integers(0, 63))


def _odd(rng):
    """A value of an unexpected type (a fresh copy: mutations go on to edit what they put in)."""
    return _copy(_pick(rng, ODD_VALUES))


def _names(g: dict) -> list[str]:
    names = [i[0] for i in g["inputs"] if isinstance(i, list) and i and isinstance(i[0], str)]
    names += [c[0] for c in g["constants"] if isinstance(c, list) and c and isinstance(c[0], str)]
    names += [n[2] for n in g["nodes"] if isinstance(n, list) and len(n) > 2 and isinstance(n[2], str)]
    return names or ["x"]


def _node(g, rng, with_attrs=False):
    nodes = [n for n in g["nodes"] if isinstance(n, list) and len(n) == 4 and isinstance(n[3], dict)
             and (n[3] or not with_attrs)]
    return _pick(rng, nodes) if nodes else None


def m_attr_value(g, meta, rng):
    n = _node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = _pick(rng, sorted(n[3]))
    v = n[3][k]
    if isinstance(v, list) and v:
        i = int(rng.integers(len(v)))
        v[i] = _int(rng) if rng.random() < 0.7 else v[i] + int(rng.integers(-2, 3))
        return f"attr {n[2]}.{k}[{i}]={v[i]}"
    n[3][k] = _int(rng) if rng.random() < 0.7 or not isinstance(v, int) else v + int(rng.integers(-2, 3))
    return f"attr {n[2]}.{k}={n[3][k]}"


def m_attr_nudge(g, meta, rng):
    """A small step from the attribute's value: more often still valid, so it reaches the backends."""
    n = _node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = _pick(rng, sorted(n[3]))
    v = n[3][k]
    step = lambda x: x if not isinstance(x, int) or isinstance(x, bool) else _pick(  # noqa: E731
        rng, [x - 1, x + 1, x * 2, x // 2, -x, 0, 1, 2, x + int(rng.integers(-4, 5))])
    if isinstance(v, list) and v:
        i = int(rng.integers(len(v)))
        v[i] = step(v[i])
        return f"nudge {n[2]}.{k}[{i}]={v[i]}"[:120]
    n[3][k] = step(v)
    return f"nudge {n[2]}.{k}={n[3][k]!r}"[:120]


def m_attr_shape(g, meta, rng):
    n = _node(g, rng, with_attrs=True)
    if n is None:
        return None
    k = _pick(rng, sorted(n[3]))
    v = n[3][k]
    r = rng.random()
    if isinstance(v, list) and r < 0.4:
        n[3][k] = v + [_int(rng) for _ in range(int(rng.integers(1, 4)))]
    elif isinstance(v, list) and r < 0.7:
        n[3][k] = v[:int(rng.integers(len(v)))] if v else []
    elif isinstance(v, list):
        n[3][k] = v[0] if v else 0
    elif r < 0.5:
        n[3][k] = [v] * int(rng.integers(0, 4))
    else:
        n[3][k] = _odd(rng)
    return f"attr shape {n[2]}.{k}={n[3][k]!r}"[:120]


def m_attr_keys(g, meta, rng):
    n = _node(g, rng)
    if n is None:
        return None
    attrs = n[3]
    if attrs and rng.random() < 0.5:
        k = _pick(rng, sorted(attrs))
        del attrs[k]
        return f"attr del {n[2]}.{k}"
    other = [k for m in g["nodes"] if isinstance(m, list) and len(m) == 4 and isinstance(m[3], dict) for k in m[3]]
    k = _pick(rng, other + ["axis", "shift", "bogus", ""]) if other else "bogus"
    attrs[k] = _int(rng) if rng.random() < 0.7 else [_int(rng), _int(rng)]
    return f"attr add {n[2]}.{k}"


def m_op(g, meta, rng):
    n = _node(g, rng)
    if n is None:
        return None
    n[0] = _pick(rng, OPS) if rng.random() < 0.9 else _pick(rng, ["", "Conv", "nop", "dense ", 7])
    return f"op {n[2]}={n[0]}"


def m_rewire(g, meta, rng):
    n = _node(g, rng)
    if n is None or not isinstance(n[1], list):
        return None
    names = _names(g)
    ins = n[1]
    r = rng.random()
    if ins and r < 0.5:
        ins[int(rng.integers(len(ins)))] = _pick(rng, names) if rng.random() < 0.95 else "missing"
    elif ins and r < 0.7:
        ins.append(ins[int(rng.integers(len(ins)))])  # the same tensor twice
    elif ins and r < 0.85:
        del ins[int(rng.integers(len(ins)))]
    else:
        ins.insert(int(rng.integers(len(ins) + 1)), _pick(rng, names))
    return f"inputs {n[2]}={ins}"[:120]


def m_node_list(g, meta, rng):
    nodes = g["nodes"]
    if not nodes:
        return None
    i = int(rng.integers(len(nodes)))
    r = rng.random()
    if r < 0.3:
        del nodes[i]
        return f"node del #{i}"
    if r < 0.55:
        nodes.insert(int(rng.integers(len(nodes) + 1)), _copy(nodes[i]))
        return f"node dup #{i}"
    if r < 0.75 and isinstance(nodes[i], list) and len(nodes[i]) == 4:  # duplicate under a new name
        new = _copy(nodes[i])
        new[2] = f"fz{i}"
        nodes.insert(i + 1, new)
        if rng.random() < 0.5 and isinstance(nodes[-1], list) and len(nodes[-1]) == 4 and isinstance(nodes[-1][1], list):
            nodes[-1][1].append(new[2])
        return f"node clone #{i}"
    if r < 0.9:
        j = int(rng.integers(len(nodes)))
        nodes[i], nodes[j] = nodes[j], nodes[i]
        return f"node swap #{i} #{j}"
    if isinstance(nodes[i], list) and len(nodes[i]) == 4:
        nodes[i][2] = _pick(rng, _names(g)) if rng.random() < 0.7 else _pick(rng, ["", "a" * 200, "\x00"])
        return f"node rename #{i}"
    return None


def _const(g, rng):
    cs = [c for c in g["constants"] if isinstance(c, list) and len(c) == 4 and isinstance(c[3], bytes)]
    return _pick(rng, cs) if cs else None


def m_const_dtype(g, meta, rng):
    c = _const(g, rng)
    if c is None:
        return None
    old = c[1]
    c[1] = _pick(rng, DTYPES) if rng.random() < 0.9 else _pick(rng, ["int64", "uint8", "float32", "", 8])
    if rng.random() < 0.6 and old in DTYPES and c[1] in DTYPES:  # keep the byte length right
        a = np.frombuffer(c[3], "<" + {"int8": "i1", "int16": "i2", "int32": "i4"}[old])
        c[3] = a.astype("<" + {"int8": "i1", "int16": "i2", "int32": "i4"}[c[1]]).tobytes()
    return f"const dtype {c[0]} {old}->{c[1]}"


def m_const_shape(g, meta, rng):
    c = _const(g, rng)
    if c is None or not isinstance(c[2], list):
        return None
    shape = c[2]
    n = math.prod(d for d in shape if isinstance(d, int))
    r = rng.random()
    if r < 0.35:  # another shape with as many elements
        c[2] = _pick(rng, [[n], [1, n], [n, 1], shape[::-1], shape + [1], [1] + shape])
    elif r < 0.7 and shape:
        i = int(rng.integers(len(shape)))
        shape[i] = _int(rng) if rng.random() < 0.5 else shape[i] + int(rng.integers(-1, 2))
    elif r < 0.85:
        c[2] = shape[:-1] if shape else [1] * 7
    else:
        c[2] = [1] * int(rng.integers(5, 9)) + shape
    return f"const shape {c[0]}={c[2]}"[:120]


def m_const_bytes(g, meta, rng):
    c = _const(g, rng)
    if c is None or not c[3]:
        return None
    data = bytearray(c[3])
    width = {"int8": 1, "int16": 2, "int32": 4}.get(c[1], 1)
    r = rng.random()
    if r < 0.3:
        for _ in range(int(rng.integers(1, 8))):
            data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        what = "flip"
    elif r < 0.8:  # extremes of the dtype, and one past the symmetric range (-2^(w-1))
        lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
        vals = np.frombuffer(bytes(data), f"<i{width}").copy()
        pick = rng.random(vals.size) < _pick(rng, [0.01, 0.1, 0.5, 1.0])
        vals[pick] = rng.choice(np.array([lo, lo + 1, hi, 0, -1, 1], dtype=np.int64), pick.sum())
        data = bytearray(vals.tobytes())
        what = "extremes"
    elif r < 0.9:
        data = data[:-int(rng.integers(1, min(len(data), 8) + 1))]
        what = "short"
    else:
        data += bytes(int(rng.integers(1, 8)))
        what = "long"
    c[3] = bytes(data)
    return f"const bytes {c[0]} {what}"


def m_const_list(g, meta, rng):
    cs = g["constants"]
    r = rng.random()
    if cs and r < 0.4:
        i = int(rng.integers(len(cs)))
        cs.insert(i, _copy(cs[i]))  # defined twice
        return "const dup"
    if cs and r < 0.7:
        i = int(rng.integers(len(cs)))
        if isinstance(cs[i], list) and cs[i]:
            cs[i][0] = _pick(rng, _names(g))
        return "const rename"
    if cs and r < 0.85:
        del cs[int(rng.integers(len(cs)))]
        return "const del"
    cs.append(["fz_c", _pick(rng, DTYPES), [1], b"\x01"])
    return "const add"


def m_input(g, meta, rng):
    ins = [i for i in g["inputs"] if isinstance(i, list) and len(i) == 3]
    if not ins:
        return None
    i = _pick(rng, ins)
    r = rng.random()
    if r < 0.45:
        i[2] = _pick(rng, BITS) if rng.random() < 0.9 else _int(rng)
        return f"input bits {i[0]}={i[2]}"
    if r < 0.85 and isinstance(i[1], list):
        if i[1] and rng.random() < 0.7:
            k = int(rng.integers(len(i[1])))
            i[1][k] = _int(rng) if rng.random() < 0.5 else i[1][k] + int(rng.integers(-1, 2))
        else:
            i[1] = i[1][:-1] if i[1] and rng.random() < 0.5 else i[1] + [1]
        return f"input shape {i[0]}={i[1]}"[:120]
    if rng.random() < 0.5:
        g["inputs"].append(_copy(i))
        return "input dup"
    g["inputs"].remove(i)
    return "input del"


def m_outputs(g, meta, rng):
    outs = g["outputs"]
    r = rng.random()
    if outs and r < 0.25:
        del outs[int(rng.integers(len(outs)))]
    elif outs and r < 0.45:
        outs.append(outs[int(rng.integers(len(outs)))])
    elif r < 0.9:
        outs.append(_pick(rng, _names(g)) if rng.random() < 0.9 else "missing")
    else:
        g["outputs"] = []
    return f"outputs={g['outputs']}"[:120]


def m_header(g, meta, rng):
    key = _pick(rng, ["opset", "version"])
    g[key] = _pick(rng, [0, 2, -1, 1 << 32, None, "1", 1.0, True])
    return f"{key}={g[key]!r}"


def m_graph_type(g, meta, rng):
    """Replace one value anywhere in the graph by a value of another type."""
    paths = []

    def walk(v, path, depth):
        paths.append(path)
        if depth < 4 and isinstance(v, list):
            for i, x in enumerate(v[:8]):
                walk(x, path + (i,), depth + 1)
        elif depth < 4 and isinstance(v, dict):
            for k in list(v)[:8]:
                walk(v[k], path + (k,), depth + 1)

    for k in g:
        walk(g[k], (k,), 0)
    path = _pick(rng, paths)
    holder = g
    for p in path[:-1]:
        holder = holder[p]
    holder[path[-1]] = _odd(rng) if rng.random() < 0.8 else _int(rng)
    return f"type {'/'.join(map(str, path))}"[:120]


def m_meta(g, holder, rng):
    """Metadata: a known field given an odd value, a field deleted, an unknown field added."""
    meta = holder["meta"]
    if not isinstance(meta, dict):
        holder["meta"] = {}
        return "meta reset"
    paths = []

    def walk(v, path, depth):
        if path:
            paths.append(path)
        if depth < 3 and isinstance(v, dict):
            for k in list(v)[:12]:
                walk(v[k], path + (k,), depth + 1)
        elif depth < 3 and isinstance(v, list):
            for i in range(min(len(v), 4)):
                walk(v[i], path + (i,), depth + 1)

    walk(meta, (), 0)
    r = rng.random()
    if not paths or r < 0.15:
        meta[_pick(rng, ["bogus", "input_scales", "output_scales", "tensor_map", "labels", "calibration_hash"])] = \
            _copy(_pick(rng, ODD_VALUES + [1, -1, 0.0, 1e308, 5e-324, [1.0], {"x": 0.5}, "0x" + "ab" * 32]))
        return "meta add"
    path = _pick(rng, paths)
    parent = meta
    for p in path[:-1]:
        parent = parent[p]
    if r < 0.3:
        del parent[path[-1]]
        return f"meta del {'/'.join(map(str, path))}"
    if r < 0.4 and isinstance(parent, dict):  # another key in the same map (a name not in the graph)
        parent[_pick(rng, ["zz", "", _pick(rng, _names(g))])] = parent.pop(path[-1])
        return f"meta rekey {'/'.join(map(str, path))}"
    parent[path[-1]] = _copy(_pick(rng, ODD_VALUES + [0, -1, 1, 0.0, -1.0, 1e308, 5e-324, 1 << 63, "0x" + "AB" * 32]))
    return f"meta set {'/'.join(map(str, path))}={parent[path[-1]]!r}"[:120]


def templates(seeds: list[Seed]) -> dict[str, list[tuple[list, dict]]]:
    """Every node of every seed with the constants it reads, by op: material for splicing."""
    out: dict[str, list] = {}
    for s in seeds:
        consts = {c[0]: c for c in s.graph["constants"]}
        for n in s.graph["nodes"]:
            out.setdefault(n[0], []).append((n, {i: consts[i] for i in n[1] if i in consts}))
    return out


def m_splice(g, meta, rng, library=None):
    """A node of some seed (with its constants) appended to this graph, reading this graph's tensors,
    and made an output: op combinations and shapes no seed has."""
    if not library:
        return None
    nodes = library[_pick(rng, sorted(library))]  # an op first, so the ops of the big seeds do not crowd out the rest
    node, consts = nodes[int(rng.integers(len(nodes)))]
    node = _copy(node)
    k = len(g["nodes"])
    tensors = [i[0] for i in g["inputs"] if isinstance(i, list) and i and isinstance(i[0], str)]
    tensors += [n[2] for n in g["nodes"] if isinstance(n, list) and len(n) == 4 and isinstance(n[2], str)]
    if not tensors or not isinstance(g["constants"], list):
        return None
    for j, name in enumerate(node[1]):
        if name in consts:
            c = _copy(consts[name])
            c[0] = node[1][j] = f"fz{k}_{j}"
            g["constants"].append(c)
        else:
            node[1][j] = _pick(rng, tensors[-4:] if rng.random() < 0.6 else tensors)
    node[2] = f"fz{k}"
    g["nodes"].append(node)
    if g["outputs"] and rng.random() < 0.7:
        g["outputs"][int(rng.integers(len(g["outputs"])))] = node[2]
    else:
        g["outputs"].append(node[2])
    return f"splice {node[0]}({', '.join(node[1])})"[:120]


STRUCTURAL: list[tuple[Callable, float]] = [
    (m_attr_value, 4), (m_attr_nudge, 4), (m_attr_shape, 2), (m_attr_keys, 1.5), (m_op, 1.5), (m_rewire, 2.5), (m_node_list, 2),
    (m_const_dtype, 1.5), (m_const_shape, 2), (m_const_bytes, 4), (m_const_list, 1), (m_input, 3),
    (m_outputs, 1.5), (m_header, 0.3), (m_graph_type, 1), (m_meta, 2), (m_splice, 3),
]
_WEIGHTS = np.array([w for _, w in STRUCTURAL]) / sum(w for _, w in STRUCTURAL)


def _damage(data: bytes, rng) -> tuple[bytes, str]:
    """A byte-level mutation: bits flipped, a byte set, a cut, an insertion."""
    b = bytearray(data)
    if not b:
        return bytes([int(rng.integers(256))]), "bytes new"
    r = rng.random()
    i = int(rng.integers(len(b)))
    if r < 0.35:
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(len(b)))] ^= 1 << int(rng.integers(8))
        return bytes(b), "bytes flip"
    if r < 0.55:
        b[i] = _pick(rng, [0x00, 0xFF, 0x7F, 0x80, 0xC0, 0xC1, 0xDF, 0xDD, 0xCF, 0xD3, 0xC4, 0xC6, 0xDB])
        return bytes(b), "bytes set"
    if r < 0.75:
        return bytes(b[:i]), f"bytes truncate {i}"
    if r < 0.9:
        return bytes(b[:i] + rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes() + b[i:]), "bytes insert"
    j = int(rng.integers(i, len(b) + 1))
    return bytes(b[:j] + b[i:j] + b[j:]), "bytes repeat"


def mutate(seed: Seed, rng: np.random.Generator, library: dict | None = None) -> tuple[bytes, list[str]]:
    """One fuzz case from a seed: 1-4 structural mutations, canonical re-encoding, sometimes a
    non-canonical encoding or damage to the graph bytes or the file bytes. `library`: nodes to
    splice in (`templates(seeds)`)."""
    g = _copy(seed.graph)
    holder = {"meta": _copy(seed.meta)}
    steps = []
    for _ in range(int(rng.choice([1, 1, 1, 1, 2, 2, 3, 4]))):
        fn = STRUCTURAL[int(rng.choice(len(STRUCTURAL), p=_WEIGHTS))][0]
        try:
            d = fn(g, holder, rng, library) if fn is m_splice else fn(g, holder, rng)
        except (TypeError, KeyError, IndexError, AttributeError, ValueError):  # an earlier mutation broke the shape it walks
            d = None
        if d:
            steps.append(d)
    r = rng.random()
    try:
        if r < 0.04:
            data = encode(g, holder["meta"], rng, loose="graph")
            steps.append("graph non-canonical")
        elif r < 0.07:
            data = encode(g, holder["meta"], rng, loose="file")
            steps.append("file non-canonical")
        elif r < 0.11:
            gbytes, d = _damage(pack(g), rng)
            data = msgpack.packb({"format": "cvm", "graph": gbytes, "meta": holder["meta"]}, use_bin_type=True)
            steps.append("graph " + d)
        else:
            data = encode(g, holder["meta"], rng)
    except (OverflowError, TypeError, ValueError, struct.error) as e:  # not encodable (an int past uint64): the seed
        steps.append(f"unencodable ({type(e).__name__})")
        data = seed.data
    if rng.random() < 0.04:
        data, d = _damage(data, rng)
        steps.append("file " + d)
    return data, steps


# ---------------------------------------------------------------------------------------------- oracle

@dataclass
class Outcome:
    kind: str  # rejected | ran | run_error | too_big | crash | disagreement
    detail: str  # error class and first words, or the output hash, or the traceback
    seconds: float = 0.0


def _reason(e: BaseException) -> str:
    """The error class and its message's first words, numbers and quoted names blanked (a key to count by)."""
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", str(e))
    msg = re.sub(r"-?\d+", "N", msg)
    return f"{type(e).__name__}: {' '.join(msg.split()[:6])}"


def _crash(where: str, e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    frames = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in tb[::-1][:4])
    return f"{where}: {type(e).__name__}: {str(e)[:300]} at {frames}"


def random_inputs(model, rng: np.random.Generator) -> dict:
    batch = int(rng.integers(1, MAX_BATCH + 1))
    xs = {}
    for spec in model.inputs:
        m = (1 << (spec.bits - 1)) - 1
        x = rng.integers(-m, m + 1, size=(batch, *spec.shape[1:]), dtype=np.int64)
        if x.size and rng.random() < 0.15:  # saturated: every value at one end of the range
            x[...] = _pick(rng, [-m, m])
        elif x.size:
            flat = x.reshape(-1)
            flat[0], flat[-1] = -m, m
            if flat.size > 2:
                flat[int(rng.integers(flat.size))] = 0
        xs[spec.name] = x.astype(spec.dtype)
    return xs


def _run(model, xs, backend):
    try:
        if backend == "numba-portable":  # the other kernel path, every op split over 2 threads
            from .interp import numba as nb
            out = nb.prepare(model.graph, model.analysis, isa="portable", threads=2, split="always")(xs)
            return "ok", output_hash(out if len(out) > 1 else next(iter(out.values())))
        return "ok", output_hash(model.run(xs, backend=backend))
    except CVMError as e:
        return "error", type(e).__name__
    except Exception as e:  # noqa: BLE001 - the finding
        return "crash", _crash(f"{backend} run", e)


def check(data: bytes, rng: np.random.Generator, max_gas: int = MAX_RUN_GAS,
          max_activations: int = MAX_RUN_ACTIVATIONS, portable: bool = True) -> Outcome:
    """The oracle for one file: rejected cleanly, or accepted and run to the same result by both backends."""
    t0 = time.perf_counter()

    def done(kind, detail):
        return Outcome(kind, detail, time.perf_counter() - t0)

    try:
        model = loads(data)
    except CVMError as e:
        return done("rejected", _reason(e))
    except Exception as e:  # noqa: BLE001
        return done("crash", _crash("load", e))
    try:  # an accepted model writes back to a file that loads to the same hash
        again = loads(model.to_bytes())
        if again.hash != model.hash:
            return done("crash", "load: to_bytes() reloads to another hash")
    except Exception as e:  # noqa: BLE001
        return done("crash", _crash("reload of to_bytes()", e))
    xs = random_inputs(model, rng)
    batch = next(iter(xs.values())).shape[0] if xs else 1
    if model.gas * batch > max_gas or model.analysis.activation_bytes * batch > max_activations:
        return done("too_big", f"gas {model.gas * batch}, activations {model.analysis.activation_bytes * batch}")
    ref = _run(model, xs, "reference")
    fast = _run(model, xs, "numba")
    for r in (ref, fast):
        if r[0] == "crash":
            return done("crash", r[1])
    if ref != fast:
        return done("disagreement", f"reference {ref[0]} {ref[1][:16] if isinstance(ref[1], bytes) else ref[1]}, "
                                    f"numba {fast[0]} {fast[1][:16] if isinstance(fast[1], bytes) else fast[1]}")
    if ref[0] == "error":
        return done("run_error", ref[1])
    if portable:  # the same inputs, the portable kernels with every op split across threads
        other = _run(model, xs, "numba-portable")
        if other[0] == "crash":
            return done("crash", other[1])
        if other != ref:
            return done("disagreement", f"reference 0x{ref[1].hex()[:16]}, numba-portable {other[0]} "
                                        f"{other[1].hex()[:16] if isinstance(other[1], bytes) else other[1]}")
    return done("ran", "0x" + ref[1].hex())


# ---------------------------------------------------------------------------------------------- driver

@dataclass
class Finding:
    case: int
    seed_model: str
    kind: str  # crash | disagreement | slow
    detail: str
    steps: list[str]
    seconds: float
    path: str | None = None  # the saved .cvm, when a save directory was given


@dataclass
class Report:
    cases: int = 0
    rejected: Counter = field(default_factory=Counter)  # error class -> count
    reasons: Counter = field(default_factory=Counter)  # "Class: first words" -> count
    accepted: int = 0
    ran: int = 0  # both backends returned, equal hashes
    run_errors: Counter = field(default_factory=Counter)  # both backends raised this CVMError class
    too_big: int = 0
    crashes: list[Finding] = field(default_factory=list)
    disagreements: list[Finding] = field(default_factory=list)
    slow: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    max_case_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.crashes and not self.disagreements

    def summary(self) -> str:
        from .report import table
        rows = [["cases", self.cases], ["rejected", sum(self.rejected.values())]]
        rows += [[f"  {k}", v] for k, v in sorted(self.rejected.items(), key=lambda kv: -kv[1])]
        rows += [["accepted", self.accepted], ["  ran, hashes equal", self.ran],
                 ["  same CVMError on both", sum(self.run_errors.values())]]
        rows += [[f"    {k}", v] for k, v in sorted(self.run_errors.items(), key=lambda kv: -kv[1])]
        rows += [["  too big to run", self.too_big], ["crashes", len(self.crashes)],
                 ["disagreements", len(self.disagreements)], ["slow cases", len(self.slow)],
                 ["seconds", f"{self.seconds:.1f}"], ["slowest case (s)", f"{self.max_case_seconds:.2f}"]]
        return table(["outcome", "count"], rows, "lr")


def case_rng(seed: int, case: int, part: int) -> np.random.Generator:
    """Case `case` of run `seed` depends on nothing else: part 0 mutates, part 1 draws the inputs."""
    return np.random.default_rng([seed, case, part])


def make_case(seeds: list[Seed], seed: int, case: int, library: dict | None = None) -> tuple[Seed, bytes, list[str]]:
    rng = case_rng(seed, case, 0)
    s = seeds[int(rng.integers(len(seeds)))]
    data, steps = mutate(s, rng, templates(seeds) if library is None else library)
    return s, data, steps


def fuzz(seeds: list[Seed] | Iterable[str | Path], cases: int, seed: int = 0, *, save_dir: str | Path | None = None,
         time_limit: float | None = None, slow_seconds: float = SLOW_SECONDS, max_gas: int = MAX_RUN_GAS,
         progress: Callable[[int, Report], None] | None = None) -> Report:
    """Run `cases` cases (fewer if `time_limit` seconds pass first); deterministic given (seeds, cases, seed)."""
    seeds = list(seeds)
    if seeds and not isinstance(seeds[0], Seed):
        seeds = load_seeds(seeds)
    library = templates(seeds)
    report = Report()
    t0 = time.perf_counter()
    for i in range(cases):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        s, data, steps = make_case(seeds, seed, i, library)
        out = check(data, case_rng(seed, i, 1), max_gas=max_gas)
        report.cases += 1
        report.max_case_seconds = max(report.max_case_seconds, out.seconds)
        if out.kind == "rejected":
            report.rejected[out.detail.split(":")[0]] += 1
            report.reasons[out.detail] += 1
        else:
            report.accepted += 1
            if out.kind == "ran":
                report.ran += 1
            elif out.kind == "run_error":
                report.run_errors[out.detail] += 1
            elif out.kind == "too_big":
                report.too_big += 1
        kinds = [out.kind] if out.kind in ("crash", "disagreement") else []
        if out.seconds > slow_seconds:
            kinds.append("slow")
        for kind in kinds:
            f = Finding(i, s.name, kind, out.detail if kind != "slow" else f"{out.seconds:.1f} s ({out.kind})",
                        steps, out.seconds)
            if save_dir is not None:
                f.path = str(save_case(save_dir, seed, f, data))
            {"crash": report.crashes, "disagreement": report.disagreements, "slow": report.slow}[kind].append(f)
        if progress is not None:
            progress(i, report)
    report.seconds = time.perf_counter() - t0
    return report


def save_case(directory: str | Path, seed: int, f: Finding, data: bytes) -> Path:
    """Write the case's file and a .json beside it that `replay` reads (the input draw, the finding)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{f.kind}-seed{seed}-case{f.case}.cvm"
    path.write_bytes(data)
    info = {"seed": seed, "case": f.case, "seed_model": f.seed_model, "kind": f.kind, "detail": f.detail,
            "steps": f.steps}
    path.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    return path


def replay(path: str | Path) -> Outcome:
    """Check a saved case again, with the same input draw when its .json is beside it."""
    path = Path(path)
    info_path = path.with_suffix(".json")
    seed, case = 0, 0
    if info_path.exists():
        info = json.loads(info_path.read_text())
        seed, case = info["seed"], info["case"]
    return check(path.read_bytes(), case_rng(seed, case, 1))


# ---------------------------------------------------------------------------------------------- command line

def _add_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--cases", type=int, default=1000, help="number of cases (default 1000)")
    s.add_argument("--seed", type=int, default=0, help="run seed: the same seed gives the same cases")
    s.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds")
    s.add_argument("--save-dir", default=None, help="write crashing, disagreeing and slow cases here")
    s.add_argument("--seeds", nargs="+", default=None, help="seed .cvm files (default: every committed model)")
    s.add_argument("--slow", type=float, default=SLOW_SECONDS, help=f"seconds a case may take (default {SLOW_SECONDS:g})")
    s.add_argument("--replay", nargs="+", default=None, metavar="CASE.cvm", help="check saved cases again instead")
    s.add_argument("--reasons", type=int, default=0, metavar="N", help="also list the N commonest rejection reasons")
    s.add_argument("--quiet", action="store_true", help="no progress output")


def cmd_fuzz(args) -> int:
    if args.replay:
        bad = 0
        for p in args.replay:
            out = replay(p)
            bad += out.kind in ("crash", "disagreement")
            print(f"{p}: {out.kind}: {out.detail} ({out.seconds:.2f} s)")
        return 1 if bad else 0
    seeds = load_seeds(args.seeds or seed_paths())
    progress, bar = None, None
    if not args.quiet:
        try:
            from tqdm import tqdm
            bar = tqdm(total=args.cases, unit="case", file=sys.stderr, smoothing=0.05)

            def progress(i, r):
                bar.update(1)
                if i % 50 == 0:
                    bar.set_postfix(rejected=sum(r.rejected.values()), ran=r.ran, crash=len(r.crashes),
                                    disagree=len(r.disagreements), refresh=False)
        except ImportError:
            def progress(i, r):
                if (i + 1) % 500 == 0:
                    print(f"{i + 1} cases: {sum(r.rejected.values())} rejected, {r.ran} ran, "
                          f"{len(r.crashes)} crashes, {len(r.disagreements)} disagreements", file=sys.stderr)
    try:
        report = fuzz(seeds, args.cases, args.seed, save_dir=args.save_dir, time_limit=args.time_limit,
                      slow_seconds=args.slow, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    print(f"cvm fuzz --cases {args.cases} --seed {args.seed}: {len(seeds)} seed models")
    print(report.summary())
    if args.reasons:
        from .report import table
        print()
        rows = [[k, v] for k, v in report.reasons.most_common(args.reasons)]
        print(table(["rejection (class: first words)", "count"], rows, "lr"))
    for f in report.crashes + report.disagreements + report.slow:
        where = f" -> {f.path}" if f.path else ""
        print(f"{f.kind} case {f.case} (seed model {f.seed_model}; {'; '.join(f.steps)}): {f.detail}{where}")
    return 0 if report.ok else 1


def register(subparsers) -> None:
    s = subparsers.add_parser("fuzz", help="mutation-fuzz the loader, verifier and backends with mutated models")
    _add_arguments(s)
    s.set_defaults(func=cmd_fuzz)


def main(argv=None) -> int:
    from .clikit import OneLineParser, run_guarded
    p = OneLineParser(prog="cvm fuzz", description=register.__doc__ or "mutation fuzzing of .cvm files")
    _add_arguments(p)
    args = p.parse_args(argv)
    return run_guarded(lambda: cmd_fuzz(args), (CVMError, ValueError), "cvm fuzz")


if __name__ == "__main__":
    sys.exit(main())
