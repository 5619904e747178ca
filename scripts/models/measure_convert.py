"""Time and peak memory of `mrt convert` on the models of export_torchvision.py (.cache/models/).
Each model converts in a fresh process under /usr/bin/time -v (wall time, peak RSS of the whole
process); the child prints each stage's time and the peak RSS when the stage ended.

    .venv/bin/python scripts/models/measure_convert.py [--size 224] [--samples 64] [--batch-size 64] [NAME ...]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))

from sidebyside import write_table  # noqa: E402
MODELS = ROOT / ".cache" / "models"
DEFAULT = ("resnet50", "densenet121", "efficientnet_b0", "vgg16")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def convert_one(onnx: Path, calib: Path, batch_size: int) -> None:
    """In this process: convert with a dump hook that reports each stage as it ends."""
    sys.path.insert(0, str(ROOT))
    from mrt.pipeline import convert
    start = last = time.perf_counter()

    def hook(number, name, _printable):
        nonlocal last
        now = time.perf_counter()
        print(f"  stage {number} {name:<17} {now - last:7.1f} s   peak RSS {_peak_mb():7.0f} MB", flush=True)
        last = now

    model = convert(onnx, calib, batch_size=batch_size, progress=False, dump=hook)
    out = MODELS / f"{onnx.stem}.cvm"
    model.save(out)
    print(f"  {out.name}: opset {model.graph.opset}, {len(model.graph.nodes)} nodes, "
          f"{out.stat().st_size / 1e6:.1f} MB, hash {model.hash_hex[:18]}, total {time.perf_counter() - start:.1f} s")
    print(f"RESULT {model.graph.opset} | {len(model.graph.nodes)} | {out.stat().st_size / 1e6:.1f} MB | "
          f"{model.cost(1):.3g} |")


def measure(name: str, args) -> tuple[str, str, str]:
    onnx, calib = MODELS / f"{name}_{args.size}.onnx", MODELS / f"calib_{args.size}_{args.samples}.npz"
    cmd = ["/usr/bin/time", "-v", sys.executable, __file__, "--one", str(onnx), "--calib", str(calib),
           "--batch-size", str(args.batch_size)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(name)
    print("".join(line + "\n" for line in r.stdout.splitlines() if not line.startswith("RESULT")), end="")
    result = next((line[len("RESULT "):] for line in r.stdout.splitlines() if line.startswith("RESULT")), None)
    if r.returncode:
        own = [line for line in r.stderr.split("\tCommand being timed")[0].strip().splitlines()
               if not line.startswith("Command exited")]
        signal = re.search(r"Command terminated by signal \d+", r.stderr)
        result = "failed: " + (signal.group(0) if signal else (own or ["?"])[-1]) + " | | | |"
        print("  " + result)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stderr).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    return wall, f"{rss / 1024 ** 2:.2f} GB", result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", default=DEFAULT)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--calib", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return convert_one(args.one, args.calib, args.batch_size)
    rows = [(name, *measure(name, args)) for name in args.names]
    table = [f"{args.samples} calibration samples at {args.size}x{args.size}, batch {args.batch_size}, mse; wall time "
             f"and peak RSS of the whole `mrt convert` process ({os.cpu_count()} cores).", "",
             "| model | wall | peak RSS | opset | nodes | .cvm | gas per sample |", "|---|---|---|---|---|---|---|"]
    write_table(MODELS / "torchvision_table.md", table,
                {name: f"| {name} | {wall} | {rss} | {result}" for name, wall, rss, result in rows})
    print("\n".join(table))


if __name__ == "__main__":
    main()
