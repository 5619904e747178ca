"""The op tables: every backend covers every op of every shipped opset or refuses it by name, the op
facts consumers read live on the OpDef, and a new opset is derived from the last one."""
from __future__ import annotations

import pytest

from cvm.interp import numba as numba_backend
from cvm.ops import OPSET_V1, OPSETS, OpDef, by_opset, derive
from cvm.ops.base import TABLE_ANY, TABLE_MONOTONE

SHIPPED = [(opset, op) for opset, table in OPSETS.items() for op in table]


def test_opset_1_is_frozen():
    """Opset 1 shipped with these twenty ops; a change to the list is a new opset."""
    assert sorted(OPSET_V1) == sorted([
        "conv2d", "dense", "matmul", "add", "sub", "mul", "relu", "clip", "requant", "lut", "div",
        "max_pool2d", "sum", "max", "reshape", "flatten", "transpose", "concat", "pad", "slice"])
    with pytest.raises(TypeError):
        OPSET_V1["new"] = OPSET_V1["add"]


@pytest.mark.parametrize("opset, op", SHIPPED)
def test_numba_lowers_or_refuses_every_op(opset, op):
    assert ((opset, op) in numba_backend.LOWERINGS) != ((opset, op) in numba_backend.REFUSED)


@pytest.mark.parametrize("opset, op", SHIPPED)
def test_every_op_has_reference_and_docs(opset, op):
    opdef = OPSETS[opset][op]
    assert opdef.name == op and callable(opdef.reference) and opdef.doc


def test_op_facts():
    """The facts backends used to re-declare as lists of names (verify.MAC_OPS, fhe LOOKUP_OPS/MONOTONE)."""
    ops = OPSET_V1
    assert {n for n, o in ops.items() if o.accumulates} == {"conv2d", "dense", "matmul"}
    assert {n: o.table for n, o in ops.items() if o.table} == {
        "requant": TABLE_MONOTONE, "relu": TABLE_MONOTONE, "clip": TABLE_MONOTONE, "div": TABLE_MONOTONE,
        "lut": TABLE_ANY}
    assert {n for n, o in ops.items() if o.bilinear} == {"mul", "matmul"}
    assert {n for n, o in ops.items() if o.compares} == {"max", "max_pool2d"}


def test_derive_adds_replaces_and_removes():
    new_op = OpDef("neg", 1, 1, {}, lambda a, at: a[0].shape, lambda a, at, s: (-a[0].hi, -a[0].lo),
                   lambda a, at, s: 1, lambda x: -x, doc="y = -x")
    nxt = derive(OPSET_V1, [new_op], removed=["lut"])
    assert nxt["neg"] is new_op and "lut" not in nxt and nxt["add"] is OPSET_V1["add"]
    assert "lut" in OPSET_V1 and "neg" not in OPSET_V1  # the shipped table is untouched
    with pytest.raises(KeyError, match="cannot remove"):
        derive(OPSET_V1, removed=["nonesuch"])


def test_backend_tables_are_keyed_by_opset():
    v1 = {"add": 1, "sub": 2}
    table = by_opset({1: v1, 2: derive(v1, {"mul": 3}, removed=["sub"])})
    # opset 3 only reprices opset 2 (cvm.ops.REPRICES): backends run it with opset 2's entries
    assert dict(table) == {(1, "add"): 1, (1, "sub"): 2, (2, "add"): 1, (2, "mul"): 3, (3, "add"): 1, (3, "mul"): 3,
                           (4, "add"): 1, (4, "mul"): 3}
    assert dict(by_opset({1: v1})) == {(1, "add"): 1, (1, "sub"): 2}
