"""The conformance suite: cases of (model file, integer input, expected output hash), runnable by
anyone against any implementation (docs/conformance.md).

    cvm conformance fixtures/conformance/v1 [--backend reference|numba] [--json result.json]
    python -m cvm.conformance generate      # rebuild fixtures/conformance/v1 from make_v1.py
    python -m cvm.conformance generate fixtures/conformance/v2 --version 2   # opset 1 and 2 cases

Suite v1 holds opset-1 cases only (its manifest says "opset": 1); from v2 on a suite holds cases of
several opsets: the manifest lists them ("opsets") and each case names its own ("opset").

Suite directory: manifest.json, models/NAME.cvm, inputs/NAME.npy, expected/NAME.OUTPUT.npy.
This module needs only numpy, msgpack and a keccak256 (no numba), so the reference backend runs
in any userland that has those (scripts/crossplatform/run.sh).
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np

from . import load, loads, output_hash
from .model import BACKENDS
from .report import table

SUITE_NAME = "cvm-conformance"
SUITE_VERSION = 1
HASH_PREFIX = 10  # characters of "0x..." shown in the table
REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIR = REPO / "fixtures" / "conformance" / f"v{SUITE_VERSION}"
GENERATOR = REPO / "fixtures" / "conformance" / f"make_v{SUITE_VERSION}.py"
_SUBDIRS = ("models", "inputs", "expected")


# ---------------------------------------------------------------- writing a suite

def write_npy(path: Path, array: np.ndarray) -> None:
    """.npy format 1.0, little-endian, C order: the same bytes from any numpy version."""
    a = np.ascontiguousarray(array, np.asarray(array).dtype.newbyteorder("<"))
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=(1, 0), allow_pickle=False)


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _case_entry(out: Path, name: str, kind: str, op: str, description: str, model_bytes: bytes, x,
                version: int = 1) -> dict:
    model = loads(model_bytes)
    if len(model.inputs) != 1:
        raise ValueError(f"case {name!r}: conformance cases have exactly one input, the model has {len(model.inputs)}")
    x = np.asarray(x).astype(model.inputs[0].dtype)
    (out / "models" / f"{name}.cvm").write_bytes(model_bytes)
    write_npy(out / "inputs" / f"{name}.npy", x)
    y = model.run(x, backend="reference")
    named = y if isinstance(y, dict) else {model.outputs[0].name: y}
    outputs = []
    for spec in model.outputs:
        path = f"expected/{name}.{spec.name.replace('/', '_')}.npy"
        write_npy(out / path, named[spec.name])
        outputs.append({"name": spec.name, "dtype": spec.dtype.name, "shape": list(named[spec.name].shape),
                        "expected": path})
    return {
        "name": name, "kind": kind, "op": op, **({"opset": model.graph.opset} if version >= 2 else {}),
        "description": description, "model": f"models/{name}.cvm", "model_hash": model.hash_hex, "gas": model.gas,
        "input": f"inputs/{name}.npy", "input_dtype": x.dtype.name, "input_shape": list(x.shape),
        "outputs": outputs, "output_hash": _hex(output_hash(y)),
    }


def write_suite(out: Path, op_cases, model_cases, version: int = SUITE_VERSION) -> dict:
    """op_cases: (name, op, description, Model, input); model_cases: (name, file bytes, input).

    Rewrites out/manifest.json and out/{models,inputs,expected}/ (stale files there are removed)."""
    out = Path(out)
    for sub in _SUBDIRS:
        (out / sub).mkdir(parents=True, exist_ok=True)
        for f in (out / sub).iterdir():
            f.unlink()
    cases = [_case_entry(out, name, "op", op, desc, model.to_bytes(), x, version)
             for name, op, desc, model, x in op_cases]
    cases += [_case_entry(out, f"model.{name}", "model", "model", f"whole model fixtures/cvm/{name}.cvm", data, x,
                          version) for name, data, x in model_cases]
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise ValueError("case names must be unique")
    opsets = {"opset": 1} if version == 1 else {"opsets": sorted({c["opset"] for c in cases})}
    manifest = {"suite": SUITE_NAME, "version": version, **opsets, "hash": "keccak256",
                "spec": "docs/conformance.md", "cases": cases}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def generate(out: Path = DEFAULT_DIR, version: int = SUITE_VERSION) -> dict:
    """Rebuild suite `version` from fixtures/conformance/make_v{version}.py (needs the repository checkout)."""
    import importlib.util
    generator = GENERATOR.with_name(f"make_v{version}.py")
    spec = importlib.util.spec_from_file_location(f"cvm_conformance_cases_v{version}", generator)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    op_cases = []
    for name, op, description, build in cases.CASES:
        model, x = build(cases.SplitMix64(name))
        op_cases.append((name, op, description, model, x))
    return write_suite(Path(out), op_cases, cases.model_cases(), version)


# ---------------------------------------------------------------- running a suite

def read_manifest(suite: Path) -> dict:
    manifest = json.loads((Path(suite) / "manifest.json").read_text())
    if manifest.get("suite") != SUITE_NAME or not manifest.get("cases"):
        raise ValueError(f"{suite}/manifest.json is not a {SUITE_NAME} manifest with cases")
    return manifest


def run_case(suite: Path, case: dict, backend: str) -> dict:
    """Check one case's model hash and output hash; never raises."""
    res = {"name": case["name"], "op": case["op"], "model_hash": case["model_hash"], "expected": case["output_hash"],
           "got": None, "ok": False, "error": None}
    try:
        model = load(Path(suite) / case["model"])
        if model.hash_hex != case["model_hash"]:
            res["error"] = f"model hash {model.hash_hex} != manifest {case['model_hash']}"
            return res
        if model.gas != case["gas"]:
            res["error"] = f"gas {model.gas} per sample != manifest {case['gas']}"
            return res
        x = np.load(Path(suite) / case["input"], allow_pickle=False)
        res["got"] = _hex(output_hash(model.run(x, backend=backend)))
        res["ok"] = res["got"] == case["output_hash"]
    except Exception as e:  # a failing case is reported, the suite goes on
        res["error"] = f"{type(e).__name__}: {e}"
    return res


def run_suite(suite: Path, backend: str = "reference", select: list[str] | None = None) -> list[dict]:
    """Run every case, or those whose name contains any of the `select` strings."""
    cases = read_manifest(suite)["cases"]
    if select:
        cases = [c for c in cases if any(s in c["name"] for s in select)]
    return [run_case(suite, c, backend) for c in cases]


def format_results(results: list[dict]) -> str:
    rows = [[r["name"], r["op"], r["model_hash"][:HASH_PREFIX], r["expected"][:HASH_PREFIX],
             (r["got"] or "error")[:HASH_PREFIX], "pass" if r["ok"] else "FAIL"] for r in results]
    text = table(["case", "op", "model", "expected", "got", "result"], rows, "llllll")
    errors = [f"{r['name']}: {r['error']}" for r in results if r["error"]]
    return text + ("\n\n" + "\n".join(errors) if errors else "")


def platform_info(label: str | None = None) -> dict:
    import msgpack
    try:
        from importlib.metadata import version
        keccak = f"eth-hash {version('eth-hash')}"
    except Exception:
        keccak = f"eth_hash shim ({'Cryptodome' if 'Cryptodome' in sys.modules else 'Crypto'}.Hash.keccak)"
    os_name = platform.system()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return {"label": label or f"{platform.system().lower()}-{platform.machine()}", "machine": platform.machine(),
            "pointer_bits": int(np.dtype(np.intp).itemsize * 8), "byteorder": sys.byteorder, "os": os_name,
            "python": platform.python_version(), "numpy": np.__version__,
            "msgpack": ".".join(map(str, msgpack.version)), "keccak": keccak}


def cmd_conformance(args) -> int:
    results = run_suite(Path(args.dir), args.backend, args.select)
    print(format_results(results))
    passed = sum(r["ok"] for r in results)
    print(f"\n{passed} passed, {len(results) - passed} failed (backend {args.backend}, suite {args.dir})")
    if args.json:
        summary = {**platform_info(args.label), "backend": args.backend, "date": datetime.date.today().isoformat(),
                   "suite_version": read_manifest(Path(args.dir))["version"], "cases": len(results), "passed": passed,
                   "failed": [r["name"] for r in results if not r["ok"]], "results": results}
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if results and passed == len(results) else 1


def register(subparsers) -> None:
    s = subparsers.add_parser("conformance", help="run a conformance suite: check model and output hashes")
    s.add_argument("dir", help="suite directory holding manifest.json (e.g. fixtures/conformance/v1)")
    s.add_argument("--backend", default="reference", choices=sorted(BACKENDS))
    s.add_argument("-k", dest="select", action="append", default=None,
                   help="only cases whose name contains this text (repeat: any of them)")
    s.add_argument("--json", default=None, help="also write the results and the platform to this file")
    s.add_argument("--label", default=None, help="platform label for --json (default: system-machine)")
    s.set_defaults(func=cmd_conformance)


# ---------------------------------------------------------------- python -m cvm.conformance

def record(result_path: Path, platforms_path: Path, setup_seconds: int | None, run_seconds: int | None) -> dict:
    """Merge one --json result into platforms.json (one entry per label and backend)."""
    r = json.loads(Path(result_path).read_text())
    entry = {k: r[k] for k in ("label", "machine", "pointer_bits", "byteorder", "os", "python", "numpy", "msgpack",
                               "keccak", "backend", "date", "suite_version", "cases", "passed", "failed")}
    entry["setup_seconds"], entry["run_seconds"] = setup_seconds, run_seconds
    doc = json.loads(platforms_path.read_text()) if platforms_path.exists() else {"suite": SUITE_NAME, "platforms": []}
    doc["platforms"] = sorted([p for p in doc["platforms"] if (p["label"], p["backend"]) != (entry["label"], entry["backend"])]
                              + [entry], key=lambda p: (p["label"], p["backend"]))
    platforms_path.write_text(json.dumps(doc, indent=1) + "\n")
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.conformance")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="rebuild a suite from fixtures/conformance/make_vN.py")
    g.add_argument("dir", nargs="?", default=str(DEFAULT_DIR))
    g.add_argument("--version", type=int, default=SUITE_VERSION, help="suite version (make_vN.py)")
    register(sub)
    r = sub.add_parser("record", help="add a `conformance --json` result to platforms.json")
    r.add_argument("result")
    r.add_argument("--platforms", default=str(DEFAULT_DIR / "platforms.json"))
    r.add_argument("--setup-seconds", type=int, default=None)
    r.add_argument("--run-seconds", type=int, default=None)
    args = p.parse_args(argv)
    if args.command == "generate":
        m = generate(Path(args.dir), args.version)
        print(f"wrote {len(m['cases'])} cases to {args.dir}")
        return 0
    if args.command == "record":
        e = record(Path(args.result), Path(args.platforms), args.setup_seconds, args.run_seconds)
        print(f"recorded {e['label']} ({e['backend']}): {e['passed']}/{e['cases']} passed")
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
