"""The machine's int8 multiply-accumulate peak, measured: vpdpbusd on registers only (12 independent
accumulators, no memory traffic), which no GEMM can beat. Used by cvm.tools.bench."""
from __future__ import annotations

import time

import numpy as np
from numba import njit

from .simd import dpbusd, vload, vstore
from .threads import Pool

_CHAINS = 12


@njit(cache=True, nogil=True)
def _dpbusd_loop(seed, iterations, outs, lo, hi):
    out = outs[lo]
    a, b = vload(seed, 0), vload(seed, 64)
    c0, c1, c2, c3 = vload(seed, 128), vload(seed, 192), vload(seed, 256), vload(seed, 320)
    c4, c5, c6, c7 = vload(seed, 384), vload(seed, 448), vload(seed, 512), vload(seed, 576)
    c8, c9, c10, c11 = vload(seed, 640), vload(seed, 704), vload(seed, 768), vload(seed, 832)
    for _ in range(lo, hi):
        for _ in range(iterations):
            c0, c1, c2, c3 = dpbusd(c0, a, b), dpbusd(c1, a, b), dpbusd(c2, a, b), dpbusd(c3, a, b)
            c4, c5, c6, c7 = dpbusd(c4, a, b), dpbusd(c5, a, b), dpbusd(c6, a, b), dpbusd(c7, a, b)
            c8, c9, c10, c11 = dpbusd(c8, a, b), dpbusd(c9, a, b), dpbusd(c10, a, b), dpbusd(c11, a, b)
    vstore(out, 0, c0)  # every chain is stored (to its own place, so none is dead code)
    vstore(out, 16, c1)
    vstore(out, 32, c2)
    vstore(out, 48, c3)
    vstore(out, 64, c4)
    vstore(out, 80, c5)
    vstore(out, 96, c6)
    vstore(out, 112, c7)
    vstore(out, 128, c8)
    vstore(out, 144, c9)
    vstore(out, 160, c10)
    vstore(out, 176, c11)


def vnni_peak_gops(threads: int, seconds: float = 0.3, clock=time.perf_counter) -> float:
    """Best of a few runs of `threads` threads each running the register-only loop: int8 ops/s / 1e9
    (one multiply-add = 2 ops, 64 per vpdpbusd). clock=time.process_time with threads=1 gives the
    per-core figure independent of other processes' load."""
    seed = np.arange(1024, dtype=np.int64).astype(np.uint8)
    out = np.zeros((threads, 16 * _CHAINS), np.int32)
    pool = Pool(threads, eager=True)
    _dpbusd_loop(seed, 10, out, 0, 1)
    iterations = 1 << 16
    best = 0.0
    for _ in range(3):
        t = clock()
        fn, args = pool.call(_dpbusd_loop, (seed, iterations, out), threads)
        fn(*args)
        dt = clock() - t
        best = max(best, threads * iterations * _CHAINS * 128 / dt / 1e9)
        if dt < seconds / 3:
            iterations *= 2
    return best
