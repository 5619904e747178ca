"""The output step and the register tiles are written once (issue 29): the rounding shift of a requant,
clip(floor((v * m + r) / 2^s), lo, hi), is spelled only in step.py among the compiled kernels (simd_step.py
holds its 16-lane form in LLVM IR), and the vpdpbusd / vpdpwssd tile loops only in tiles.py."""
from __future__ import annotations

import ast
from pathlib import Path

import cvm.interp.numba_kernels as kernels

FOLDER = Path(kernels.__file__).parent


def _clip_of_shift(node: ast.AST) -> bool:
    """min(max(<a >> b>, lo), hi), in either nesting order."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
        return False
    inner = node.args[0] if node.args else None
    return (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in ("min", "max")
            and bool(inner.args) and isinstance(inner.args[0], ast.BinOp) and isinstance(inner.args[0].op, ast.RShift))


def _calls(tree: ast.AST, names: set[str]) -> int:
    return sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names for n in ast.walk(tree))


def test_the_requant_clip_is_spelled_only_in_step_py():
    found = {f.name: sum(map(_clip_of_shift, ast.walk(ast.parse(f.read_text())))) for f in FOLDER.glob("*.py")}
    assert {name for name, n in found.items() if n} == {"step.py"}, found


def test_the_inner_products_run_only_in_the_tiles():
    """Every GEMM tile is tiles.py's (dense16.py and tiles.py wrap an instruction as a tile's `dot`); the other
    loops of inner products are dw_vnni's depthwise tile (channels in lanes, not a GEMM), gemv_vnni's one
    pixel at a time and peak.py's measurement of the instruction's peak."""
    found = {f.name: _calls(ast.parse(f.read_text()), {"dpbusd", "dpwssd"}) for f in FOLDER.glob("*.py")}
    allowed = {"tiles.py", "dense16.py", "dw_vnni.py", "gemv_vnni.py", "peak.py"}
    assert {name for name, n in found.items() if n} <= allowed, found
    assert found["dense16.py"] == 1 and found["tiles.py"] == 1, found


def _inlined(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and any(k.arg == "inline" for k in d.keywords) for d in fn.decorator_list)


def test_only_inlined_kernels_take_compiled_functions():
    """A tile takes its inner product and its store as compiled functions; passed to a function that is not
    inlined, a compiled function makes the caller uncacheable (numba embeds its address: a "dynamic
    global"), so every kernel would compile again in every process. Only inlined kernels may call one of
    their own parameters."""
    calls_a_parameter = []
    for f in FOLDER.glob("*.py"):
        for fn in ast.walk(ast.parse(f.read_text())):
            if isinstance(fn, ast.FunctionDef) and fn.decorator_list and not _inlined(fn):
                params = {a.arg for a in fn.args.args}
                called = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                if any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "njit" for d in fn.decorator_list) \
                        and params & called:
                    calls_a_parameter.append(f"{f.name}:{fn.name}")
    assert not calls_a_parameter
