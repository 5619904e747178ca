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

One job per module, in the order a case passes through them:
    seeds           the seed models, decoded once (`seed_paths`, `load_seeds`)
    draws           boundary integers, odd values, and picks from the graph, shared by the mutations
    mutate_nodes    mutations of nodes: attributes, op, wiring, the node list, splicing (`templates`)
    mutate_tensors  mutations of constants, inputs, outputs, header, value types, metadata
    encoding        canonical and deliberately non-canonical msgpack (`pack`, `pack_loose`, `encode`)
    mutations       the weighted recipe for one case (`mutate`, `make_case`, `case_rng`)
    oracle          what must hold for any byte string (`check`)
    driver          the loop, the report and saved findings (`fuzz`, `save_case`, `replay`)
    cli             `cvm fuzz` and `python -m cvm.fuzz` (`register`, `main`)
This module re-exports the names other code imports from `cvm.fuzz`.
"""
from __future__ import annotations

from .cli import cmd_fuzz, main, register
from .draws import BITS, BOUNDARY, DTYPES, ODD_VALUES, OPS
from .driver import SLOW_SECONDS, Finding, Report, fuzz, replay, save_case
from .encoding import encode, pack, pack_loose
from .mutate_nodes import templates
from .mutations import STRUCTURAL, case_rng, make_case, mutate
from .oracle import MAX_BATCH, MAX_RUN_ACTIVATIONS, MAX_RUN_GAS, Outcome, check, random_inputs
from .seeds import ROOT, SEED_GLOBS, Seed, load_seeds, seed_paths

__all__ = [
    "BITS", "BOUNDARY", "DTYPES", "MAX_BATCH", "MAX_RUN_ACTIVATIONS", "MAX_RUN_GAS", "ODD_VALUES", "OPS", "ROOT",
    "SEED_GLOBS", "SLOW_SECONDS", "STRUCTURAL", "Finding", "Outcome", "Report", "Seed", "case_rng", "check",
    "cmd_fuzz", "encode", "fuzz", "load_seeds", "main", "make_case", "mutate", "pack", "pack_loose",
    "random_inputs", "register", "replay", "save_case", "seed_paths", "templates",
]
