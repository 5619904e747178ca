"""Making one fuzz case: which mutations, how often, then how the result is written to bytes.

`make_case(seeds, seed, case)` is the whole recipe: a case depends on nothing but (seeds, run seed,
case number), through `case_rng`, so a finding can be rebuilt from its numbers and two runs with one
seed are the same run. The mutations themselves live in `mutate_nodes` and `mutate_tensors`; this
module weighs them (`STRUCTURAL`) and adds the byte-level damage and non-canonical encodings.
"""
from __future__ import annotations

import struct
from typing import Callable

import msgpack
import numpy as np

from .draws import pick
from .encoding import encode, pack
from .mutate_nodes import (m_attr_keys, m_attr_nudge, m_attr_shape, m_attr_value, m_node_list, m_op, m_rewire,
                           m_splice, templates)
from .mutate_tensors import (m_const_bytes, m_const_dtype, m_const_list, m_const_shape, m_graph_type, m_header,
                             m_input, m_meta, m_outputs)
from .seeds import Seed, copy_tree

# (mutation, relative weight): how often each is drawn; the node mutations weigh most, as the
# verifier's per-op rules are where a mutated graph has the most ways to be wrong.
STRUCTURAL: list[tuple[Callable, float]] = [
    (m_attr_value, 4), (m_attr_nudge, 4), (m_attr_shape, 2), (m_attr_keys, 1.5), (m_op, 1.5), (m_rewire, 2.5),
    (m_node_list, 2), (m_const_dtype, 1.5), (m_const_shape, 2), (m_const_bytes, 4), (m_const_list, 1), (m_input, 3),
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
        b[i] = pick(rng, [0x00, 0xFF, 0x7F, 0x80, 0xC0, 0xC1, 0xDF, 0xDD, 0xCF, 0xD3, 0xC4, 0xC6, 0xDB])
        return bytes(b), "bytes set"
    if r < 0.75:
        return bytes(b[:i]), f"bytes truncate {i}"
    if r < 0.9:
        noise = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        return bytes(b[:i] + noise + b[i:]), "bytes insert"
    j = int(rng.integers(i, len(b) + 1))
    return bytes(b[:j] + b[i:j] + b[j:]), "bytes repeat"


def mutate(seed: Seed, rng: np.random.Generator, library: dict | None = None) -> tuple[bytes, list[str]]:
    """One fuzz case from a seed: 1-4 structural mutations, canonical re-encoding, sometimes a
    non-canonical encoding or damage to the graph bytes or the file bytes. `library`: nodes to
    splice in (`templates(seeds)`)."""
    g = copy_tree(seed.graph)
    holder = {"meta": copy_tree(seed.meta)}
    steps = []
    for _ in range(int(rng.choice([1, 1, 1, 1, 2, 2, 3, 4]))):
        fn = STRUCTURAL[int(rng.choice(len(STRUCTURAL), p=_WEIGHTS))][0]
        try:
            d = fn(g, holder, rng, library) if fn is m_splice else fn(g, holder, rng)
        except (TypeError, KeyError, IndexError, AttributeError, ValueError):  # an earlier step broke what it walks
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


def case_rng(seed: int, case: int, part: int) -> np.random.Generator:
    """Case `case` of run `seed` depends on nothing else: part 0 mutates, part 1 draws the inputs."""
    return np.random.default_rng([seed, case, part])


def make_case(seeds: list[Seed], seed: int, case: int, library: dict | None = None) -> tuple[Seed, bytes, list[str]]:
    """Case `case` of run `seed`: the seed model and the mutations, all drawn from the case's own rng.
    `library` is `templates(seeds)`, passed in by the driver so that it is built once per run."""
    rng = case_rng(seed, case, 0)
    s = seeds[int(rng.integers(len(seeds)))]
    data, steps = mutate(s, rng, templates(seeds) if library is None else library)
    return s, data, steps
