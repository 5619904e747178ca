"""The key numba's cache files this folder's kernels under: one hash of every kernel source, the numba,
llvmlite and numpy versions and the target CPU.

numba stamps a cached function with its own file's contents only, but a kernel inlines helpers from
other files (step.out_rows, simd_step, tiles, vnni, fused): after a change to a helper, a cached caller kept
the old arithmetic, and a node that pulled a change to the output step could commit another output
hash than honest nodes. Here every function defined in this folder is cached in a directory named by
one key, and that key is also its source stamp (numba drops an index whose stamp differs): a change to
any source (every .py of this folder and EXTRA_SOURCES), to the numba, llvmlite or numpy version, or to
the target CPU's name or features selects a fresh directory, so every kernel compiles anew.

The package's __init__ calls install() before any kernel is decorated. The directory lies where
numba's own would (NUMBA_CACHE_DIR, else this folder's __pycache__, else numba's user-wide cache);
directories of other keys unused for PRUNE_AFTER_S are removed when a new one is made.
wholeplan_gen names its generated steps by the same key.
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from numba.core import caching, config

FOLDER = Path(__file__).resolve().parent
# (relative to the cvm package) what kernel modules import from outside this folder (div_round, vnni_direct:
# arith); the planner's other imports (ir, ops, values, verify) reach no compiled code
EXTRA_SOURCES = ("arith.py",)
DIR_PREFIX = "cvm_kernels_"
DIR_DIGITS = 16  # hex digits of the key in a directory's name
PRUNE_AFTER_S = 7 * 24 * 3600


@dataclass(frozen=True)
class KeyInputs:
    """What a compiled kernel depends on: (path within the cvm package, sha256 hex) of every source,
    the numba, llvmlite and numpy versions (numba's cache is shared by every environment that runs
    these sources: .venv, numpy 2, and .venv-fhe, numpy 1), and the CPU name and feature string numba
    compiles for."""
    sources: tuple[tuple[str, str], ...]
    numba: str
    llvmlite: str
    numpy: str
    cpu_name: str
    cpu_features: str


def key(inputs: KeyInputs) -> str:
    """The sha256 hex of the inputs (their repr: every field, quoted and in order)."""
    return hashlib.sha256(repr(inputs).encode()).hexdigest()


def source_files(folder: Path) -> list[Path]:
    """Every .py of the kernel folder, then EXTRA_SOURCES (folder is <cvm>/interp/numba_kernels)."""
    return [*sorted(folder.glob("*.py")), *(folder.parent.parent / name for name in EXTRA_SOURCES)]


def host_inputs(folder: Path) -> KeyInputs:
    """KeyInputs of the sources in `folder` as they are on disk, this numba, llvmlite and numpy, the CPU
    numba targets (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES where set, as numba's codegen reads them)."""
    import llvmlite
    import llvmlite.binding as ll
    import numba
    import numpy
    from numba.core.codegen import get_host_cpu_features

    package = folder.parent.parent
    sources = tuple((f.relative_to(package).as_posix(), hashlib.sha256(f.read_bytes()).hexdigest())
                    for f in source_files(folder))
    name = config.CPU_NAME if config.CPU_NAME not in (None, "host") else ll.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return KeyInputs(sources, numba.__version__, llvmlite.__version__, numpy.__version__, name, features)


@functools.lru_cache(maxsize=None)
def host_key(folder: Path = FOLDER) -> str:
    """key(host_inputs(folder)), computed once a process."""
    return key(host_inputs(folder))


def cache_bases(folder: Path) -> list[Path]:
    """Where a key's directory may go, in numba's own order of preference."""
    from numba.misc.appdirs import AppDirs
    user_wide = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)
    return [*([Path(config.CACHE_DIR)] if config.CACHE_DIR else []), folder / "__pycache__", user_wide]


def prune(base: Path, keep: str, now: float) -> None:
    """Removes base's key directories other than `keep` in which no file was read or written for
    PRUNE_AFTER_S (another checkout may still use one; a directory's own atime is not looked at:
    listing it here sets it)."""
    for d in base.glob(f"{DIR_PREFIX}*"):
        if d.name == keep:
            continue
        try:
            times = [d.stat().st_mtime, *(t for f in d.iterdir() for t in (f.stat().st_atime, f.stat().st_mtime))]
        except OSError:
            continue
        if max(times) < now - PRUNE_AFTER_S:
            shutil.rmtree(d, ignore_errors=True)


class KernelLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Claims the functions defined in `folder` (a subclass per install() sets it and `key`) and caches
    them in <base>/<DIR_PREFIX><key>, stamped with the whole key."""
    folder: Path
    key: str

    def __init__(self, py_func, py_file, path: Path):
        self._py_file, self._lineno, self._cache_path = py_file, py_func.__code__.co_firstlineno, path

    def get_cache_path(self):
        return str(self._cache_path)

    def get_source_stamp(self):
        return self.key

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve().parent != cls.folder:
            return None  # (not a kernel: numba's own locators)
        name = DIR_PREFIX + cls.key[:DIR_DIGITS]
        for base in cache_bases(cls.folder):
            made = not (base / name).is_dir()
            self = cls(py_func, py_file, base / name)
            try:
                self.ensure_cache_path()
            except OSError:
                continue  # (not writable: the next base, as numba does)
            if made:
                prune(base, name, time.time())
            return self
        return None


def install(folder: Path = FOLDER) -> type[KernelLocator]:
    """Puts a KernelLocator for `folder`, keyed by host_key(folder), first in numba's locator list
    (replacing one installed before for the same folder)."""
    if getattr(config, "CACHE_LOCATOR_CLASSES", None):
        raise RuntimeError("NUMBA_CACHE_LOCATOR_CLASSES is set: numba would cache cvm's kernels keyed by "
                           "their own files only (stale inlined helpers); unset it")
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # (older numba: _CacheImpl)
    classes = impl._locator_classes
    classes[:] = [c for c in classes if getattr(c, "folder", None) != folder]
    locator = type("KernelLocator", (KernelLocator,), {"folder": folder, "key": host_key(folder), "__module__": __name__})
    classes.insert(0, locator)
    return locator
