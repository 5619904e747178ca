"""The versioned op tables. Never edit a shipped table: a new opset is the previous one merged with
its changes (`derive`), the way an Ethereum client builds each fork's opcode table from the last one's.
Backends key their own tables the same way (`by_opset`), so that every table answers `(opset, op)`."""
from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping, TypeVar

from .. import limits
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
    """{opset: {op: entry}} -> {(opset, op): entry}: a backend's table, looked up by (opset, op)."""
    return MappingProxyType({(opset, op): v for opset, table in tables.items() for op, v in table.items()})


OPSET_V1 = derive({}, [op for m in (linear, elementwise, rescale, pool, layout) for op in m.OPS])

# Opset 2: the ops of production vision models that no integer rule over opset 1 computes (vision.py),
# and of transformer text models (text.py: gather, isqrt).
OPSET_V2 = derive(OPSET_V1, [*vision.OPS, *text.OPS])

OPSETS = MappingProxyType({1: OPSET_V1, 2: OPSET_V2})
LATEST_OPSET = max(OPSETS)


def lowest_opset(ops: Iterable[str], footprint: limits.Footprint | None = None) -> int:
    """The oldest opset in which every op of `ops` has its newest definition and whose limits
    (cvm.limits.LIMITS) admit `footprint`: the opset a graph of these ops is written in, so that a graph
    built from opset-1 ops within opset 1's limits keeps its opset-1 bytes and hash. An op no opset knows,
    or a footprint no opset admits, gives the newest opset (whose verifier then names the op or limit)."""
    latest = OPSETS[LATEST_OPSET]
    ops = set(ops)
    for opset in sorted(OPSETS):
        if (all(latest.get(op) is not None and OPSETS[opset].get(op) is latest[op] for op in ops)
                and (footprint is None or footprint.excess(limits.of(opset)) is None)):
            return opset
    return LATEST_OPSET


__all__ = ["Arg", "OpDef", "RuleError", "OPSETS", "OPSET_V1", "OPSET_V2", "LATEST_OPSET", "derive", "by_opset",
           "lowest_opset"]
