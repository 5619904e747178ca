"""The numba backend's cache key (cvm/interp/numba_kernels/cache_key.py, issue 29 item 1): a kernel is
cached under one key of every kernel source, the numba, llvmlite and numpy versions and the target CPU,
so a change to a helper in another file that a cached kernel inlines recompiles the kernel (numba's
own cache, stamped with the kernel's file only, returns the old arithmetic)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cvm
from cvm.interp.numba_kernels import cache_key, div_round

PACKAGE = Path(cvm.__file__).resolve().parent

HELPER = "from numba import njit\n\n\n@njit(cache=True, inline='always')\ndef step(x):\n    return x + {k}\n"
KERNEL = ("from numba import njit\n\nfrom .t_helper import step\n\n\n"
          "@njit(cache=True)\ndef kernel(x):\n    return step(x) * 2\n")
# One fresh process: each kernel's value at 1, whether it came from the cache, where its cache lies.
PROBE = """import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    m = importlib.import_module(name)
    value = m.kernel(1)
    st = m.kernel.stats
    out[name] = [m.__file__, value, sum(st.cache_hits.values()), st.cache_path]
print(json.dumps(out))
"""
KERNELS = "cvm.interp.numba_kernels.t_kernel"  # the copied backend's folder: cached under cache_key
PLAIN = "plain.t_kernel"  # the same two files in a plain package: numba's own per-file cache


def _write_helpers(src: Path, k: int) -> None:
    for folder in (src / "cvm" / "interp" / "numba_kernels", src / "plain"):
        (folder / "t_helper.py").write_text(HELPER.format(k=k))


def _probe(src: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, KERNELS, PLAIN], capture_output=True, text=True,
                          cwd=src, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(Path(f).is_relative_to(src) for f, *_ in out.values()), out  # (the copies, not this checkout)
    return {name: tuple(v[1:]) for name, v in out.items()}


def test_a_changed_inlined_helper_recompiles_the_kernel(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    shutil.copytree(PACKAGE, src / "cvm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (src / "plain").mkdir()
    (src / "plain" / "__init__.py").write_text("")
    for folder in (src / "cvm" / "interp" / "numba_kernels", src / "plain"):
        (folder / "t_kernel.py").write_text(KERNEL)
    _write_helpers(src, 1)
    first = _probe(src, cache)
    assert first[KERNELS][:2] == (4, 0) and first[PLAIN][:2] == (4, 0)  # (1 + 1) * 2, compiled
    again = _probe(src, cache)
    assert again[KERNELS][:2] == (4, 1) and again[PLAIN][:2] == (4, 1)  # loaded from the cache
    old_dir = Path(first[KERNELS][2])
    assert old_dir.parent == cache and old_dir.name.startswith(cache_key.DIR_PREFIX)

    _write_helpers(src, 2)  # the helper's constant changes; the kernel's file does not
    after = _probe(src, cache)
    assert after[KERNELS][:2] == (6, 0)  # (1 + 2) * 2: recompiled, under a new key
    assert Path(after[KERNELS][2]) != old_dir and old_dir.is_dir()  # (the old key's dir kept a week)
    assert after[PLAIN][:2] == (4, 1)  # numba's own cache: the stale inlined helper


def test_the_key_changes_with_every_input():
    base = cache_key.host_inputs(cache_key.FOLDER)
    assert cache_key.key(base) == cache_key.host_key() == cache_key.key(dataclasses.replace(base))
    name, digest = base.sources[0]
    changed = [
        dataclasses.replace(base, numba=base.numba + ".post1"),
        dataclasses.replace(base, llvmlite=base.llvmlite + ".post1"),
        dataclasses.replace(base, numpy="1.26.4" if base.numpy != "1.26.4" else "2.4.6"),
        dataclasses.replace(base, cpu_name=base.cpu_name + "x"),
        dataclasses.replace(base, cpu_features=base.cpu_features.replace("+", "-", 1) or "-avx2"),
        dataclasses.replace(base, sources=((name, "0" * 64), *base.sources[1:])),
        dataclasses.replace(base, sources=base.sources[1:]),
    ]
    keys = {cache_key.key(i) for i in changed}
    assert len(keys) == len(changed) and cache_key.key(base) not in keys


def test_the_sources_are_every_kernel_file_and_arith():
    names = [n for n, _ in cache_key.host_inputs(cache_key.FOLDER).sources]
    folder = sorted(f"interp/numba_kernels/{f.name}" for f in cache_key.FOLDER.glob("*.py"))
    assert names == [*folder, "arith.py"]
    assert "interp/numba_kernels/conv.py" in names and "interp/numba_kernels/simd_step.py" in names


def test_the_locator_claims_the_kernels_only():
    locator = next(c for c in _locator_classes() if issubclass(c, cache_key.KernelLocator))
    assert _locator_classes()[0] is locator and locator.key == cache_key.host_key()
    loc = locator.from_function(div_round.div_round4.py_func, div_round.__file__)
    assert loc.get_source_stamp() == cache_key.host_key()
    assert Path(loc.get_cache_path()).name == cache_key.DIR_PREFIX + cache_key.host_key()[:cache_key.DIR_DIGITS]
    assert locator.from_function(test_the_locator_claims_the_kernels_only, __file__) is None
    assert div_round.div_round4.stats.cache_path == loc.get_cache_path()


def _locator_classes() -> list:
    from numba.core import caching
    return (getattr(caching, "CacheImpl", None) or caching._CacheImpl)._locator_classes


@pytest.mark.parametrize("age_days, kept", [(8, False), (6, True)])
def test_prune_removes_other_keys_unused_for_a_week(tmp_path, age_days, kept):
    now = time.time()
    other, mine = tmp_path / f"{cache_key.DIR_PREFIX}other", tmp_path / f"{cache_key.DIR_PREFIX}mine"
    for d in (other, mine):
        d.mkdir()
        (d / "k.nbi").write_text("")
        for p in (d / "k.nbi", d):
            os.utime(p, (now - age_days * 86400, now - age_days * 86400))
    cache_key.prune(tmp_path, mine.name, now)
    assert other.is_dir() is kept and mine.is_dir()
