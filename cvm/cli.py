"""`cvm` command line: a thin layer over the public API."""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

from . import CVMError, InputError, load, output_hash
from .clikit import OneLineParser, run_guarded
from .model import BACKENDS
from .report import table


def _scale_text(scale) -> str:
    """A scale per tensor, or a summary of per-feature scales."""
    if scale is None:
        return ""
    if isinstance(scale, list):
        if len(scale) == 1:
            return f"{scale[0]:.6g}"
        return f"{len(scale)} per feature, {min(scale):.3g}..{max(scale):.3g}"
    return f"{scale:.6g}"


def cmd_inspect(args) -> int:
    model = load(args.model)
    a = model.analysis
    print(f"model:   {args.model}")
    print(f"hash:    {model.hash_hex}")
    print(f"opset:   {model.graph.opset}")
    print(f"gas:     {model.gas} per sample")
    print(f"memory:  {a.activation_bytes} bytes of activations per sample")
    print(f"largest accumulator: {a.max_accumulator_bits} bits")
    print()
    io = [[kind, s.name, list(s.shape), s.bits, s.dtype.name, _scale_text(s.scale)]
          for kind, specs in (("input", model.inputs), ("output", model.outputs)) for s in specs]
    print(table(["", "name", "shape", "bits", "dtype", "scale"], io, "llllll"))
    print()
    if args.nodes:
        rows = [[n.output, n.op, a.tensors[n.output].shape, f"[{a.tensors[n.output].lo}, {a.tensors[n.output].hi}]",
                 a.tensors[n.output].bits, c] for n, c in zip(model.graph.nodes, a.node_costs)]
        print(table(["node", "op", "shape", "interval", "bits", "gas"], rows, "lllrrr"))
    else:
        per_op, cost, bits = Counter(), Counter(), {}
        for n, c in zip(model.graph.nodes, a.node_costs):
            per_op[n.op] += 1
            cost[n.op] += c
            bits[n.op] = max(bits.get(n.op, 0), a.tensors[n.output].bits)
        rows = [[op, per_op[op], bits[op], cost[op], f"{100 * cost[op] / max(model.gas, 1):.1f}%"]
                for op in sorted(per_op, key=lambda o: -cost[o])]
        print(table(["op", "count", "max bits", "gas", "share"], rows, "lrrrr"))
    for key in ("labels", "provenance", "calibration_hash"):
        if key in model.meta:
            print(f"{key}: {model.meta[key]}")
    return 0


def cmd_verify(args) -> int:
    model = load(args.model)
    print(f"ok: {args.model} verifies (hash {model.hash_hex}, {len(model.graph.nodes)} nodes, gas {model.gas})")
    return 0


def _read_input(model, path: str, raw: bool):
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise InputError(f"cannot read {path} as .npy or .npz: {e}") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        names = [s.name for s in model.inputs]
        arrays = {n: data[n] for n in names if n in data.files}
        if len(arrays) != len(names):
            if len(names) == 1 and "x" in data.files:
                arrays = {names[0]: data["x"]}
            else:
                raise CVMError(f"{path} must hold arrays named {names}")
    else:
        arrays = {model.inputs[0].name: data}
    out = {}
    for name, x in arrays.items():
        if x.dtype.kind == "f" and not raw:
            x = model.quantize_input(x, name)
        elif x.dtype.kind == "f":
            raise CVMError(f"--raw needs integer input, {path} holds {x.dtype}")
        out[name] = x
    return out if len(out) > 1 else next(iter(out.values()))


def cmd_run(args) -> int:
    model = load(args.model)
    x = _read_input(model, args.input, args.raw)
    options = {"mode": args.fhe_mode} if args.backend == "fhe" else {}
    y = model.run(x, backend=args.backend, gas_limit=args.gas_limit, **options)
    if args.output:
        if isinstance(y, dict):
            np.savez(args.output, **y)
        else:
            np.save(args.output, y)
        print(f"wrote {args.output}")
    else:
        first = y if not isinstance(y, dict) else next(iter(y.values()))
        print(f"output: shape {first.shape} dtype {first.dtype}")
        preview = first.reshape(first.shape[0], -1)[:4]
        for row in preview:
            print("  " + " ".join(str(v) for v in row[:16]) + (" ..." if row.size > 16 else ""))
        if first.ndim == 2 and first.shape[1] > 1:
            print(f"argmax: {first.argmax(axis=1)[:32].tolist()}")
    batch = (y if not isinstance(y, dict) else next(iter(y.values()))).shape[0]
    print(f"gas: {model.gas * batch}")
    print(f"output-hash: 0x{output_hash(y).hex()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="cvm", description="Deterministic integer inference VM")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="hash, inputs/outputs, op table, accumulator bits, gas")
    s.add_argument("model")
    s.add_argument("--nodes", action="store_true", help="one row per node instead of per op")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("verify", help="verify a model file (exit 0 or a clear error)")
    s.add_argument("model")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("run", help="run a model on .npy/.npz input")
    s.add_argument("model")
    s.add_argument("--input", "-i", required=True, help="X.npy or X.npz (float is quantized unless --raw)")
    s.add_argument("-o", "--output", help="write outputs to Y.npy (or .npz for several)")
    s.add_argument("--backend", default="numba", choices=sorted(BACKENDS))
    s.add_argument("--raw", action="store_true", help="input already holds integers")
    s.add_argument("--gas-limit", type=int, default=None)
    s.add_argument("--fhe-mode", choices=["clear", "simulate", "execute"], default="execute",
                   help="with --backend fhe: evaluate the circuit in the clear, simulate it, or run it encrypted")
    s.set_defaults(func=cmd_run)

    for module in ("cvm.bench", "cvm.bench_verify", "cvm.conformance", "cvm.fuzz", "cvm.chain.cli"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError:
            continue
        if hasattr(mod, "register"):
            mod.register(sub)
    return p


def main(argv=None) -> int:
    """Every failure is one line on stderr: exit 2 for bad input, 3 for a bug (cvm/clikit.py)."""
    args = build_parser().parse_args(argv)
    return run_guarded(lambda: args.func(args), (CVMError, ValueError), "cvm")


if __name__ == "__main__":
    sys.exit(main())
