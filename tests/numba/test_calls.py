"""Named call records (cvm.interp.numba_kernels.calls, issue 29 item 3): every call a step binds, and every
call the whole-plan program makes of it, holds its kernel's own record (the kernel's parameter names);
no module of the backend reads a call's arguments by integer index or slice; every variant of
variants.VARIANTS names Tuning switches that exist."""
from __future__ import annotations

import ast
import glob
from pathlib import Path

import pytest

import cvm
from cvm.interp import numba as nb
from cvm.interp.numba_kernels import calls, variants, wholeplan_ops
from cvm.interp.numba_kernels.threads import Pool
from cvm.interp.numba_kernels.tuning import Tuning
from numba_helpers import each_isa

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted(glob.glob(str(ROOT / "fixtures/models/*.cvm")))


def _named(c, where: str) -> None:
    """c is Call(fn, fn's record); a Pool._run call's inner record is its kernel's."""
    assert isinstance(c, calls.Call), f"{where}: {c!r} is not a calls.Call"
    assert calls.is_record(c.args) and c.args._fields == calls.params(c.fn)[:len(c.args)], where
    if getattr(c.fn, "__func__", None) is Pool._run:
        inner = calls.Call(c.args.fn, c.args.args)
        _named(inner, where)


def _bound(runner, batch: int, whole: str, monkeypatch) -> list:
    """The calls numba._Bound holds for one batch size, as they reach _direct (which makes them plain
    tuples for the run loop)."""
    seen = []
    direct = nb._direct
    monkeypatch.setattr(nb, "_direct", lambda fn, args: seen.append(calls.Call(fn, args)) or direct(fn, args))
    nb._Bound(runner.plan, runner.outputs, batch, whole)
    monkeypatch.undo()
    return seen


@pytest.mark.parametrize("isa", each_isa())
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("path", MODELS, ids=lambda p: Path(p).stem)
def test_every_bound_call_is_named(path, batch, isa, monkeypatch):
    """Per step (whole-plan off), each call and what the program would make of it (its twins); whole-plan
    on, the program's calls (its segments and the calls it leaves in Python)."""
    model = cvm.load(path)
    runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=2)
    bound = _bound(runner, batch, "never", monkeypatch)
    assert bound
    for c in bound:
        _named(c, "per step")
        for t in wholeplan_ops.translate(c, runner.tuning):
            _named(t, "program")
    for c in _bound(runner, batch, "always", monkeypatch):
        _named(c, "whole-plan")


def test_a_record_names_the_kernels_parameters():
    from cvm.interp.numba_kernels import fused
    c = calls.call(fused.copy_rows, 1, 2, 3, 4, 5, 6, 7, b1=9, b0=8)
    assert c.args._fields == ("x", "mult", "mult2", "ost", "res", "out", "c0", "b0", "b1") and c.args.b0 == 8
    t = calls.twin(fused.mul_rows, c.args, sc=0, hw=1)
    assert (t.args.x, t.args.sc, t.args.hw, t.args.b1) == (1, 0, 1, 9)
    with pytest.raises(TypeError):
        calls.call(fused.copy_rows, 1, nope=2)


def test_every_variant_names_real_switches():
    names = {f.name for f in __import__("dataclasses").fields(Tuning)}
    assert len({v.name for v in variants.VARIANTS}) == len(variants.VARIANTS)
    for v in variants.VARIANTS:
        assert v.stage in ("prepare", "bind", "program") and set(v.switches) <= names and v.replaces, v.name


def _codegen(fn: ast.AST) -> bool:
    """An llvmlite codegen function (numba intrinsics): its `args` are LLVM values, not a call's."""
    return isinstance(fn, ast.FunctionDef) and (fn.name == "codegen" or fn.name.endswith("_codegen"))


def _position_reads(node: ast.AST) -> list[int]:
    """Lines reading `args` / `<x>.args` (a call's arguments) by an integer index or a slice, outside
    llvmlite codegen functions."""
    if _codegen(node):
        return []
    found = [line for child in ast.iter_child_nodes(node) for line in _position_reads(child)]
    if isinstance(node, ast.Subscript):
        target, index = node.value, node.slice
        named = (isinstance(target, ast.Name) and target.id == "args") or (
            isinstance(target, ast.Attribute) and target.attr == "args")
        by_position = isinstance(index, ast.Slice) or (
            isinstance(index, ast.Constant) and isinstance(index.value, int)) or (
            isinstance(index, ast.UnaryOp) and isinstance(index.operand, ast.Constant))
        if named and by_position:
            found.append(node.lineno)
    return found


def test_no_call_is_read_by_position():
    """Over the numba backend (numba.py and numba_kernels; the fhe backend's `args` are its nodes')."""
    interp = ROOT / "cvm" / "interp"
    bad = []
    for path in [interp / "numba.py", *sorted((interp / "numba_kernels").glob("*.py"))]:
        bad += [f"{path.relative_to(ROOT)}:{line}" for line in _position_reads(ast.parse(path.read_text()))]
    assert not bad, "a call's arguments read by position: " + ", ".join(bad)
