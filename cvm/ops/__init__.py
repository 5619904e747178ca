"""The versioned op tables. Never edit a shipped table: a new opset is the previous one merged with
its changes (`derive`), the way an Ethereum client builds each fork's opcode table from the last one's.
Backends key their own tables the same way (`by_opset`), so that every table answers `(opset, op)`."""
from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping, TypeVar

from .. import gas, gas_v2, gas_v3, limits
from . import elementwise, layout, linear, pool, rescale, text, vision
from .base import Arg, OpDef, RuleError

V = TypeVar("V")


def derive(previous: Mapping[str, V], changed: Mapping[str, V] | Iterable[OpDef] = (),
           removed: Iterable[str] = ()) -> Mapping[str, V]:
    """The next table: `previous` with `changed` entries added or replaced and `removed` names dropped.
    `changed` is a mapping of name -> entry, or OpDefs (keyed by their name). The result is read-only."""
    changes = dict(changed) if isinstance(changed, Mapping) else {op.name: op for op in changed}
    table = {name: v for name, v in previous.items() if name not in set(removed)}
    gone = set(removed) - set(previous)
    if gone:
        raise KeyError(f"cannot remove {sorted(gone)}: not in the previous table")
    table.update(changes)
    return MappingProxyType(table)


def by_opset(tables: Mapping[int, Mapping[str, V]]) -> Mapping[tuple[int, str], V]:
    """{opset: {op: entry}} -> {(opset, op): entry}: a backend's table, looked up by (opset, op). An
    opset that only reprices another (REPRICES) gets that opset's entries when `tables` has none of its own."""
    tables = {**{new: tables[old] for new, old in REPRICES.items() if old in tables and new not in tables}, **tables}
    return MappingProxyType({(opset, op): v for opset, table in tables.items() for op, v in table.items()})


def repriced_keys(table: Mapping[tuple[int, str], V]) -> dict[tuple[int, str], V]:
    """A backend's {(opset, op): entry} (e.g. its refusals) with the entries of each repriced opset added."""
    out = dict(table)
    for new, old in REPRICES.items():
        out.update({(new, op): v for (opset, op), v in table.items() if opset == old and (new, op) not in table})
    return out


OPSET_V1 = derive({}, [op for m in (linear, elementwise, rescale, pool, layout) for op in m.OPS])

# Opset 2: the ops of production vision models that no integer rule over opset 1 computes (vision.py),
# and of transformer text models (text.py: gather, isqrt).
OPSET_V2 = derive(OPSET_V1, [*vision.OPS, *text.OPS])

# Opset 3: gas schedule v2 (cvm.gas_v2, docs/spec.md "Gas schedule v2"): opset 2's ops with the same
# semantics, each priced by measured time. It reprices only, so it is chosen by name (GraphBuilder(opset=3),
# `mrt convert --opset 3`), never by lowest_opset: a graph built without an opset keeps the bytes, hash and
# gas it always had. Backends run it with opset 2's tables (by_opset, REPRICES).
OPSET_V3 = derive(OPSET_V2, gas_v2.reprice(OPSET_V2))

# Opset 4: gas schedule v3 (cvm.gas_v3, docs/spec.md "Gas schedule v3"): opset 2's ops with the same
# semantics, priced as in v2 but for memory-bound data movement, edges and loading; its limits bound the
# inputs of a node (cvm.limits.MAX_NODE_INPUTS). Chosen by name only, like opset 3.
OPSET_V4 = derive(OPSET_V2, gas_v3.reprice(OPSET_V2))

OPSETS = MappingProxyType({1: OPSET_V1, 2: OPSET_V2, 3: OPSET_V3, 4: OPSET_V4})
SCHEDULES = MappingProxyType({1: gas.SCHEDULE_V1, 2: gas.SCHEDULE_V1, 3: gas_v2.SCHEDULE_V2,
                             4: gas_v3.SCHEDULE_V3})  # opset -> charges
REPRICES = MappingProxyType({3: 2, 4: 2})  # an opset with opset 2's semantics (its own prices and limits) -> 2
LATEST_OPSET = max(set(OPSETS) - set(REPRICES))  # the newest opset a graph is written in without naming one


def lowest_opset(ops: Iterable[str], footprint: limits.Footprint | None = None) -> int:
    """The oldest opset in which every op of `ops` has its newest definition and whose limits
    (cvm.limits.LIMITS) admit `footprint`: the opset a graph of these ops is written in, so that a graph
    built from opset-1 ops within opset 1's limits keeps its opset-1 bytes and hash. Repricing opsets
    (REPRICES: opset 3) are never chosen here, only by name. An op no opset knows,
    or a footprint no opset admits, gives the newest opset (whose verifier then names the op or limit)."""
    latest = OPSETS[LATEST_OPSET]
    ops = set(ops)
    for opset in sorted(set(OPSETS) - set(REPRICES)):
        if (all(latest.get(op) is not None and OPSETS[opset].get(op) is latest[op] for op in ops)
                and (footprint is None or footprint.excess(limits.of(opset)) is None)):
            return opset
    return LATEST_OPSET


__all__ = ["Arg", "OpDef", "RuleError", "OPSETS", "OPSET_V1", "OPSET_V2", "OPSET_V3", "OPSET_V4", "SCHEDULES", "REPRICES",
           "LATEST_OPSET", "derive", "by_opset", "repriced_keys", "lowest_opset"]
