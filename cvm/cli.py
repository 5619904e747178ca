"""`cvm` command line: a thin layer over the public API."""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

from . import CVMError, FormatError, InputError, load, output_hash
from .clikit import HelpFormatter, OneLineParser, read_arrays, run_guarded
from .model import BACKENDS
from .model_file import open_regular
from .report import table

PREVIEW_ROWS, PREVIEW_COLUMNS = 4, 16  # what `cvm run` prints of an output without -o


def _load(path: str):
    """cvm.load, with a hint where the file is an ONNX model (the converter's input, not the VM's)."""
    try:
        return load(path)
    except CVMError:
        if _looks_like_onnx(path):
            raise FormatError(f"{path} looks like ONNX, not a CVM model: convert it with "
                              f"mrt convert {path} --calib CALIB.npz -o MODEL.cvm") from None
        raise


def _looks_like_onnx(path: str) -> bool:
    """An .onnx name, or a protobuf ModelProto's usual start: field 1 (ir_version, a varint: byte 0x08)
    holding a small version (ONNX IR versions are 3..12); a .cvm file starts with a msgpack map. Opened
    as the loader does (cvm.model_file): a device or a FIFO is neither, and is not read."""
    try:
        with open_regular(path) as f:
            head = f.read(2)
    except (OSError, FormatError):
        return False
    return str(path).lower().endswith(".onnx") or (len(head) == 2 and head[0] == 0x08 and 1 <= head[1] <= 20)


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
    model = _load(args.model)
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
    model = _load(args.model)
    print(f"ok: {args.model} verifies (hash {model.hash_hex}, {len(model.graph.nodes)} nodes, gas {model.gas})")
    return 0


def _read_input(model, path: str, raw: bool):
    data = read_arrays(path, InputError)
    if isinstance(data, dict):
        names = [s.name for s in model.inputs]
        arrays = {n: data[n] for n in names if n in data}
        if len(arrays) != len(names):
            if len(names) == 1 and "x" in data:
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
    model = _load(args.model)
    x = _read_input(model, args.input, args.raw)
    if args.limit is not None:
        x = {k: v[:args.limit] for k, v in x.items()} if isinstance(x, dict) else x[:args.limit]
    options = {"mode": args.fhe_mode} if args.backend == "fhe" else {}
    y = model.run(x, backend=args.backend, gas_limit=args.gas_limit, **options)
    if args.output:
        if isinstance(y, dict):
            np.savez(args.output, **y)
        else:
            np.save(args.output, y)
        print(f"wrote {args.output}")
    else:
        print(preview(y if not isinstance(y, dict) else next(iter(y.values()))))
    batch = (y if not isinstance(y, dict) else next(iter(y.values()))).shape[0]
    print(f"gas: {model.gas * batch}")
    print(f"output-hash: 0x{output_hash(y).hex()}")
    return 0


def preview(y: np.ndarray, rows: int = PREVIEW_ROWS, columns: int = PREVIEW_COLUMNS) -> str:
    """The first rows and columns of an output, saying what was left out (-o writes it all)."""
    flat = y.reshape(y.shape[0], -1)
    lines = [f"output: shape {y.shape} dtype {y.dtype}"]
    lines += ["  " + " ".join(str(v) for v in row[:columns]) + (f" ... ({row.size - columns} more values)"
              if row.size > columns else "") for row in flat[:rows]]
    if len(flat) > rows:
        lines.append(f"  ... {len(flat) - rows} more rows (-o Y.npy writes them all)")
    if y.ndim == 2 and y.shape[1] > 1:
        more = f" ... {len(y) - 32} more" if len(y) > 32 else ""
        lines.append(f"argmax: {y.argmax(axis=1)[:32].tolist()}{more}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="cvm", description="Deterministic integer inference VM")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="hash, inputs/outputs, op table, accumulator bits, gas",
                       formatter_class=HelpFormatter)
    s.add_argument("model", help="a .cvm model file")
    s.add_argument("--nodes", action="store_true", help="one row per node instead of per op")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("verify", help="verify a model file (exit 0 or a clear error)", formatter_class=HelpFormatter)
    s.add_argument("model", help="a .cvm model file (an ONNX file is converted first, with mrt convert)")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("run", help="run a model on .npy/.npz input", formatter_class=HelpFormatter)
    s.add_argument("model", help="a .cvm model file (verified on load)")
    s.add_argument("--input", "-i", required=True,
                   help="X.npy, or X.npz holding x or arrays named after the inputs (float is quantized unless --raw)")
    s.add_argument("-o", "--output", help="write the outputs to Y.npy (or .npz for several) instead of printing "
                   f"the first {PREVIEW_ROWS} rows")
    s.add_argument("--backend", default="numba", choices=sorted(BACKENDS),
                   help="numba: compiled, the fast path; reference: the spec's interpreter; fhe: the [fhe] extra")
    s.add_argument("--raw", action="store_true", help="the input already holds integers (no quantization)")
    s.add_argument("--gas-limit", type=int, default=None,
                   help="refuse to run when the batch's gas (gas per sample x samples) exceeds this; default: no limit")
    s.add_argument("--limit", type=int, metavar="N", help="run the first N samples only (default: all of them; "
                   "--backend fhe --fhe-mode execute takes seconds per sample)")
    s.add_argument("--fhe-mode", choices=["clear", "simulate", "execute"], default="execute",
                   help="with --backend fhe: evaluate the circuit in the clear, simulate it, or run it encrypted")
    s.set_defaults(func=cmd_run)

    for module in ("cvm.tools.bench", "cvm.tools.bench_verify", "cvm.conformance", "cvm.fuzz", "cvm.chain.cli"):
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
