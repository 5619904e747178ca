"""docs/architecture.md, "Adding an op": the tables it lists are the tables every op appears in.

Each list item starts with a path and a table name in backticks (`- `path` `TABLE` [or `REFUSED`]: ...`,
or `- `docs/spec.md`: ...` for a document). For every op of every opset in cvm.ops.OPSETS, the op must be
in each table the list names (or in its refusal table); and the list must name every table in EXPECTED, so
that a table added without documenting it fails here (add it to both)."""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

import cvm.ops
from cvm.ops import OPSETS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
ITEM = re.compile(r"^- `([^`]+)`(?: `([A-Za-z_]+)`)?(?: or `([A-Za-z_]+)`)?:", re.M)

# (path, table) -> how an op is looked up in it
EXPECTED = {
    ("cvm/ops/<family>.py", "OPS"): "families",
    ("cvm/ops/__init__.py", "OPSETS"): "by_opset_table",
    ("docs/spec.md", None): "named_in_text",
    ("cvm/interp/numba.py", "LOWERINGS"): "by_opset_op",
    ("cvm/interp/fhe_lower.py", "RULES"): "by_opset_op",
    ("cvm/gas_v2.py", "FACTOR"): "by_name",
    ("cvm/gas_v3.py", "LARGE"): "some_by_name",  # data-movement ops only
    ("cvm/chain/referee_ops.py", "REFEREE_OPS"): "by_name",
    ("contracts/src/Referee.sol", "_compute"): "solidity_code",
    ("cvm/chain/referee_cases.py", "DRAWS"): "by_name",
    ("fixtures/conformance/make_v4.py", "CASES"): "cases",
}
SHIPPED = [(opset, op) for opset, table in OPSETS.items() for op in table]
OPS = sorted({op for _, op in SHIPPED})


def documented() -> dict[tuple[str, str | None], str | None]:
    """(path, table) -> its refusal table, from the list under "## Adding an op"."""
    text = DOC.read_text()
    section = text[text.index("\n## Adding an op"):]
    nxt = section.find("\n## ", 1)
    section = section if nxt < 0 else section[:nxt]
    return {(path, table or None): refused or None for path, table, refused in ITEM.findall(section)}


def load(path: str):
    """The module at `path` (a file of the cvm package by import name, any other .py by file)."""
    if path.startswith("cvm/"):
        try:
            return importlib.import_module(path[:-3].replace("/", ".").removesuffix(".__init__"))
        except ModuleNotFoundError as e:  # an optional backend (concrete-python for the FHE rules)
            if e.name and e.name.split(".")[0] in ("concrete",):
                pytest.skip(f"{path} needs {e.name}")
            raise
    spec = importlib.util.spec_from_file_location(f"_doc_check_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_list_names_every_table():
    assert set(documented()) == set(EXPECTED)


@pytest.mark.parametrize("path, refused", sorted((path, r) for (path, _), r in documented().items() if r))
def test_refusal_tables_exist(path, refused):
    assert isinstance(getattr(load(path), refused), dict)


def missing_ops(path: str, table_name: str | None, how: str, refused_name: str | None) -> list:
    if how == "named_in_text":
        text = (ROOT / path).read_text()
        return [op for op in OPS if f"`{op}`" not in text]
    if how == "families":
        family_ops = set()
        for info in pkgutil.iter_modules(cvm.ops.__path__):
            family_ops |= {o.name for o in getattr(importlib.import_module(f"cvm.ops.{info.name}"), "OPS", ())}
        return [op for op in OPS if op not in family_ops]
    if how == "solidity_code":
        from cvm.chain.referee_ops import REFEREE_OPS
        source = (ROOT / path).read_text()
        out = []
        for op in OPS:
            code = REFEREE_OPS[op].code if op in REFEREE_OPS else None
            names = [n.upper() for n, r in REFEREE_OPS.items() if r.code == code]  # ops sharing the code
            if not any(re.search(rf"constant {n} = {code};", source) and re.search(rf"\bop [=<>]= {n}\b", source)
                       for n in names):
                out.append(op)
        return out
    module = load(path)
    table = getattr(module, table_name)
    refused = getattr(module, refused_name) if refused_name else {}
    if how == "by_opset_table":
        return [(opset, op) for opset, op in SHIPPED if op not in table[opset]]
    if how == "by_opset_op":
        return [key for key in SHIPPED if key not in table and key not in refused]
    if how == "by_name":
        return [op for op in OPS if op not in table and op not in refused]
    if how == "some_by_name":  # only some ops belong there: no entry may name an op no opset has
        return [name for name in table if name not in OPS]
    if how == "cases":
        cased = {case[1] for case in table}
        return [op for op in OPS if op not in cased]
    raise AssertionError(f"unknown lookup {how!r}")


@pytest.mark.parametrize("path, table", sorted(EXPECTED, key=str))
def test_every_op_is_in_the_table(path, table):
    refused = documented().get((path, table))
    assert missing_ops(path, table, EXPECTED[(path, table)], refused) == []
