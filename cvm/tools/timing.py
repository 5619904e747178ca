"""How the benchmarks time a call and describe the machine they ran on (cvm bench, cvm bench --adversarial,
the measurement scripts under scripts/)."""
from __future__ import annotations

import os
import time
from pathlib import Path


def time_calls(fn, min_seconds: float = 1.0, min_reps: int = 5, max_reps: int = 2000) -> list[float]:
    """Per-call seconds: two warm-up calls, then calls until both min_seconds and min_reps are met."""
    fn()
    fn()
    times, start = [], time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < min_seconds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def machine() -> dict:
    import platform
    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    keep = sorted(f for f in flags if f in ("avx2", "fma", "avx_vnni") or f.startswith(("avx512", "amx")))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cpus": os.cpu_count(), "flags": keep, "python": platform.python_version(), "loadavg": load}
