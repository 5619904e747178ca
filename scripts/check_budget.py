"""Size budget of the code (run by scripts/test.sh, so by CI): no function in cvm/ or mrt/ longer than
MAX_FUNCTION_LINES, no source file longer than MAX_FILE_LINES. A module that outgrows the budget has
more than one job; a function that does has steps worth naming. Exceptions are named here with the
reason, so that each one is a decision rather than drift.

    python scripts/check_budget.py          # prints the offenders, exits 1 if any
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cvm", "mrt")
MAX_FUNCTION_LINES = 60  # from `def` to the last line of the body, nested functions counted in their parent
MAX_FILE_LINES = 400
EXCEPTIONS: dict[str, str] = {  # "path" or "path:function" -> why it may exceed the budget
}


def functions(tree: ast.AST):
    """Top-level functions and methods (nested ones count in their parent)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef)):
            for child in node.body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield child


def offenders(root: Path = ROOT) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            source = path.read_text()
            lines = source.count("\n") + (not source.endswith("\n"))
            if lines > MAX_FILE_LINES and rel not in EXCEPTIONS:
                found.append(f"{rel}: {lines} lines > {MAX_FILE_LINES}")
            for fn in functions(ast.parse(source, rel)):
                length = fn.end_lineno - fn.lineno + 1
                if length > MAX_FUNCTION_LINES and f"{rel}:{fn.name}" not in EXCEPTIONS:
                    found.append(f"{rel}:{fn.lineno} {fn.name}: {length} lines > {MAX_FUNCTION_LINES}")
    return found


def main() -> int:
    found = offenders()
    for line in found:
        print(f"budget: {line}", file=sys.stderr)
    if not found:
        print(f"budget: every function in {', '.join(PACKAGES)} within {MAX_FUNCTION_LINES} lines, "
              f"every file within {MAX_FILE_LINES}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
