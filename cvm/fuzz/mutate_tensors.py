"""Mutations of the tensors and the file around the nodes: constants (dtype, shape, bytes, the list),
graph inputs and outputs, the header fields, a value of the wrong type anywhere, and the metadata.

Same contract as `mutate_nodes`: (graph object, meta holder, rng) -> description or None. These aim
at the decoder's structure checks and the metadata validation more than at the verifier's op rules.
"""
from __future__ import annotations

import math

import numpy as np

from .draws import BITS, DTYPES, ODD_VALUES, odd_value, pick, some_const, some_int, tensor_names
from .seeds import copy_tree


def m_const_dtype(g, meta, rng):
    """A constant given another dtype, its bytes converted most of the time so that the dtype, not
    the byte length, is what is wrong."""
    c = some_const(g, rng)
    if c is None:
        return None
    old = c[1]
    c[1] = pick(rng, DTYPES) if rng.random() < 0.9 else pick(rng, ["int64", "uint8", "float32", "", 8])
    if rng.random() < 0.6 and old in DTYPES and c[1] in DTYPES:  # keep the byte length right
        a = np.frombuffer(c[3], "<" + {"int8": "i1", "int16": "i2", "int32": "i4"}[old])
        c[3] = a.astype("<" + {"int8": "i1", "int16": "i2", "int32": "i4"}[c[1]]).tobytes()
    return f"const dtype {c[0]} {old}->{c[1]}"


def m_const_shape(g, meta, rng):
    """A constant's shape changed: as many elements in another shape, one dimension changed, a rank
    dropped or raised past the limit."""
    c = some_const(g, rng)
    if c is None or not isinstance(c[2], list):
        return None
    shape = c[2]
    n = math.prod(d for d in shape if isinstance(d, int))
    r = rng.random()
    if r < 0.35:  # another shape with as many elements
        c[2] = pick(rng, [[n], [1, n], [n, 1], shape[::-1], shape + [1], [1] + shape])
    elif r < 0.7 and shape:
        i = int(rng.integers(len(shape)))
        shape[i] = some_int(rng) if rng.random() < 0.5 else shape[i] + int(rng.integers(-1, 2))
    elif r < 0.85:
        c[2] = shape[:-1] if shape else [1] * 7
    else:
        c[2] = [1] * int(rng.integers(5, 9)) + shape
    return f"const shape {c[0]}={c[2]}"[:120]


def m_const_bytes(g, meta, rng):
    """A constant's data: bits flipped, values at the dtype's extremes (where range analysis and the
    kernels' arithmetic are tightest), cut short or lengthened."""
    c = some_const(g, rng)
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
        hit = rng.random(vals.size) < pick(rng, [0.01, 0.1, 0.5, 1.0])
        vals[hit] = rng.choice(np.array([lo, lo + 1, hi, 0, -1, 1], dtype=np.int64), hit.sum())
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
    """The constant list: a constant defined twice, renamed onto another tensor, deleted, or one added."""
    cs = g["constants"]
    r = rng.random()
    if cs and r < 0.4:
        i = int(rng.integers(len(cs)))
        cs.insert(i, copy_tree(cs[i]))  # defined twice
        return "const dup"
    if cs and r < 0.7:
        i = int(rng.integers(len(cs)))
        if isinstance(cs[i], list) and cs[i]:
            cs[i][0] = pick(rng, tensor_names(g))
        return "const rename"
    if cs and r < 0.85:
        del cs[int(rng.integers(len(cs)))]
        return "const del"
    cs.append(["fz_c", pick(rng, DTYPES), [1], b"\x01"])
    return "const add"


def m_input(g, meta, rng):
    """A graph input's bits, shape or rank changed, or the input duplicated or deleted: the input checks
    and the backends' batch handling."""
    ins = [i for i in g["inputs"] if isinstance(i, list) and len(i) == 3]
    if not ins:
        return None
    i = pick(rng, ins)
    r = rng.random()
    if r < 0.45:
        i[2] = pick(rng, BITS) if rng.random() < 0.9 else some_int(rng)
        return f"input bits {i[0]}={i[2]}"
    if r < 0.85 and isinstance(i[1], list):
        if i[1] and rng.random() < 0.7:
            k = int(rng.integers(len(i[1])))
            i[1][k] = some_int(rng) if rng.random() < 0.5 else i[1][k] + int(rng.integers(-1, 2))
        else:
            i[1] = i[1][:-1] if i[1] and rng.random() < 0.5 else i[1] + [1]
        return f"input shape {i[0]}={i[1]}"[:120]
    if rng.random() < 0.5:
        g["inputs"].append(copy_tree(i))
        return "input dup"
    g["inputs"].remove(i)
    return "input del"


def m_outputs(g, meta, rng):
    """The output list: one removed, one listed twice, another tensor or a missing name added, or none."""
    outs = g["outputs"]
    r = rng.random()
    if outs and r < 0.25:
        del outs[int(rng.integers(len(outs)))]
    elif outs and r < 0.45:
        outs.append(outs[int(rng.integers(len(outs)))])
    elif r < 0.9:
        outs.append(pick(rng, tensor_names(g)) if rng.random() < 0.9 else "missing")
    else:
        g["outputs"] = []
    return f"outputs={g['outputs']}"[:120]


def m_header(g, meta, rng):
    """`opset` or `version` set to another value or type: the header checks."""
    key = pick(rng, ["opset", "version"])
    g[key] = pick(rng, [0, 2, -1, 1 << 32, None, "1", 1.0, True])
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
    path = pick(rng, paths)
    holder = g
    for p in path[:-1]:
        holder = holder[p]
    holder[path[-1]] = odd_value(rng) if rng.random() < 0.8 else some_int(rng)
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
        meta[pick(rng, ["bogus", "input_scales", "output_scales", "tensor_map", "labels", "calibration_hash"])] = \
            copy_tree(pick(rng, ODD_VALUES + [1, -1, 0.0, 1e308, 5e-324, [1.0], {"x": 0.5}, "0x" + "ab" * 32]))
        return "meta add"
    path = pick(rng, paths)
    parent = meta
    for p in path[:-1]:
        parent = parent[p]
    if r < 0.3:
        del parent[path[-1]]
        return f"meta del {'/'.join(map(str, path))}"
    if r < 0.4 and isinstance(parent, dict):  # another key in the same map (a name not in the graph)
        parent[pick(rng, ["zz", "", pick(rng, tensor_names(g))])] = parent.pop(path[-1])
        return f"meta rekey {'/'.join(map(str, path))}"
    odd = ODD_VALUES + [0, -1, 1, 0.0, -1.0, 1e308, 5e-324, 1 << 63, "0x" + "AB" * 32]
    parent[path[-1]] = copy_tree(pick(rng, odd))
    return f"meta set {'/'.join(map(str, path))}={parent[path[-1]]!r}"[:120]
