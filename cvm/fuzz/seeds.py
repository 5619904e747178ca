"""The seed models a fuzz run mutates, decoded once into plain msgpack values.

Decoding happens here, once per run, so that each case only copies the seed's containers
(`copy_tree`) instead of parsing the file again; the bytes as committed are kept too, as the
fallback case when a mutated graph cannot be encoded at all.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import msgpack

from .. import CVMError
from ..model_file import read_model_file

ROOT = Path(__file__).resolve().parent.parent.parent
SEED_GLOBS = ("fixtures/models/*.cvm", "fixtures/conformance/v1/models/*.cvm")


@dataclass
class Seed:
    """One seed model: its bytes as committed and its two decoded layers, which each case copies."""
    name: str
    data: bytes  # the file as committed
    graph: dict  # the decoded graph object (plain msgpack values)
    meta: dict


def seed_paths() -> list[Path]:
    """Every committed .cvm model: the fixture models and the conformance suite's per-op cases."""
    return [p for pattern in SEED_GLOBS for p in sorted(ROOT.glob(pattern))]


def load_seeds(paths: Iterable[str | Path]) -> list[Seed]:
    """Decode both msgpack layers (file map, then graph) without verifying: a seed is material, and
    an empty list is an error because a run without seeds would silently test nothing."""
    seeds = []
    for p in paths:
        data = read_model_file(p)
        obj = msgpack.unpackb(data, raw=False)
        seeds.append(Seed(Path(p).name, data, msgpack.unpackb(obj["graph"], raw=False), obj["meta"]))
    if not seeds:
        raise CVMError("no seed models: pass --seeds or run from a checkout with fixtures/")
    return seeds


def copy_tree(v):
    """Copy the containers; bytes and scalars are immutable and shared."""
    if isinstance(v, list):
        return [copy_tree(x) for x in v]
    if isinstance(v, dict):
        return {k: copy_tree(x) for k, x in v.items()}
    return v
