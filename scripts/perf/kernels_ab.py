"""Before/after of the VNNI GEMM kernels themselves (tiles.py's users), on synthetic operands: the direct
conv (output step on the registers, with and without a residual), the scratch conv, the int16 dense and the
int8 matmul, under an older commit and the working tree, in alternating fresh processes. Prints each
kernel's best time per call (process CPU, one thread) and checks that both sides write the same bytes.

    python scripts/perf/kernels_ab.py OLD_COMMIT [--rounds 2] [--reps 20]

Needs AVX-512 VNNI (the kernels it times exist only there). OLD_COMMIT's cvm/ is extracted with
`git archive` into a temporary directory; the kernel signatures it calls are those of 60e098d and later.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = r'''
import hashlib, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from cvm.interp.numba_kernels import dense16, kargs, matmul_vnni, vnni, vnni_direct
from cvm.interp.numba_kernels.plan import OutputStep
rng = np.random.default_rng(0)
NO_RES = np.zeros((1, 1), np.int16)

def blocks(rows):  # vnni.block_size's count (that kernel has no Python entry)
    nblk = -(-rows // vnni.BLOCK_ROWS)
    return -(-rows // ((-(-rows // nblk) + 5) // 6 * 6))

def ost(res=False, lo=0, hi=255):
    return OutputStep(mult=np.ones(1, np.int64), shift=12, lo=lo, hi=hi, residual="r" if res else None,
                      mult2=np.ones(1, np.int64), shift2=0, lo2=-128, hi2=127, output="y", nodes=()).params()

def conv(h, c, og, k, kind):
    pad = k // 2
    geo = vnni.geometry(k, k, 1, 1, 1, 1, 1, c, og, h, h, h + 2 * pad, h + 2 * pad)
    wp = vnni.pack_weights(rng.integers(-20, 20, (1, og, k, k, c)), geo)
    nv16 = vnni.panels(og) * 16
    bias = np.zeros((1, nv16), np.int32)
    buf = np.zeros((h + 2 * pad) ** 2 * c + 64, np.uint8)
    buf[:-64] = rng.integers(0, 255, buf.size - 64)
    xp = buf[:-64].reshape(1, h + 2 * pad, h + 2 * pad, c)
    mult, b1 = np.full((1, og), 3, np.int64), blocks(h * h)
    out = np.zeros((h * h, og), np.int8 if kind == "res" else np.uint8)
    multp = vnni_direct.pad_mult(mult, nv16, 12)
    if kind == "res":
        r, rq = rng.integers(-100, 100, (h * h, og)).astype(np.int16), np.array([1, 0, 0, 1, 0, 0, -128, 127])
        return out, lambda: vnni_direct.conv_vnni_direct_res(xp, wp, bias, multp, rq, ost(True), r, out, geo, 0, b1)
    if kind == "direct":
        return out, lambda: vnni_direct.conv_vnni_direct(xp, wp, bias, multp, vnni_direct.NO_RQ, ost(), NO_RES, out,
                                                         geo, 0, b1)
    return out, lambda: vnni.conv_vnni(xp, wp, bias, mult, mult, ost(), NO_RES, out, geo, 0, b1)

def dense(rows, k, og):
    wp, last = dense16.pack_weights(rng.integers(-300, 300, (og, k)))
    x, out = rng.integers(-2000, 2000, (rows, k)).astype(np.int16), np.zeros((rows, og), np.int32)
    m, p = np.ones(og, np.int64), ost(lo=-(1 << 31), hi=(1 << 31) - 1)
    bias = np.zeros(len(last), np.int32)
    return out, lambda: dense16.dense_vnni16(x, wp, last, bias, m, m, p, NO_RES, out, np.zeros(14, np.int64), 0,
                                             -(-rows // dense16.BLOCK_ROWS))

def matmul(m_, k, n):
    a, b = rng.integers(-128, 127, (4, m_, k)).astype(np.int8), rng.integers(-128, 127, (4, k, n)).astype(np.int8)
    out, (au, sh) = np.zeros((4, m_, n), np.int32), matmul_vnni.left_operand(a)
    return out, lambda: matmul_vnni.matmul_vnni(au, sh, b, out)

CASES = {"1x1 112x112 16->96 direct": conv(112, 16, 96, 1, "direct"), "1x1 28x28 32->192 direct": conv(28, 32, 192, 1, "direct"),
         "1x1 56x56 64->24 direct": conv(56, 64, 24, 1, "direct"), "3x3 56x56 64->64 direct": conv(56, 64, 64, 3, "direct"),
         "3x3 14x14 256->256 direct": conv(14, 256, 256, 3, "direct"), "1x1 28x28 128->128 residual": conv(28, 128, 128, 1, "res"),
         "3x3 56x56 64->64 scratch": conv(56, 64, 64, 3, "scratch"), "1x1 28x28 32->160 scratch": conv(28, 32, 160, 1, "scratch"),
         "dense16 64x512->512": dense(64, 512, 512), "matmul_vnni 4x197x64x197": matmul(197, 64, 197)}
reps = int(sys.argv[2])
for name, (out, f) in CASES.items():
    f()
    digest = hashlib.sha256(out.tobytes()).hexdigest()[:16]
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(reps):
            f()
        best = min(best, (time.process_time() - t) / reps)
    print(f"{name}\t{best * 1e6:.1f}\t{digest}", flush=True)
'''


def side(src: str, reps: int) -> dict[str, tuple[float, str]]:
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD, src, str(reps)], capture_output=True,
                         text=True, check=True).stdout
    return {n: (float(t), h) for n, t, h in (line.split("\t") for line in out.splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(f"git -C {ROOT} archive {a.old} cvm | tar -x -C {tmp}", shell=True, check=True)
        rounds = [(side(tmp, a.reps), side(str(ROOT), a.reps)) for _ in range(a.rounds)]
    print(f"{'kernel':32s} {'old us':>9s} {'new us':>9s} {'new/old':>8s}  same bytes")
    for name in rounds[0][0]:
        old, new = (min(r[k][name][0] for r in rounds) for k in (0, 1))
        same = all(r[0][name][1] == r[1][name][1] for r in rounds)
        print(f"{name:32s} {old:9.1f} {new:9.1f} {new / old:7.2f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
