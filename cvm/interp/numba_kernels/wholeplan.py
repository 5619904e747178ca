"""The whole-plan runner: a bound plan's kernel calls run inside ONE compiled call.

A small model (an unrolled recurrent network: hundreds of steps of a few hundred bytes each) spends
most of a run in the per-call cost of a Python loop over prebuilt calls (argument unboxing, about
0.6 us a call, 262 calls for the LSTM fixture). Here the buffers of one bound batch size move into
one byte arena, and the calls become a program: an int64 array of (opcode, arguments), an array
argument being (byte offset, dims) and an int argument its value. A generated
interpreter (one `if opcode == k` branch per kernel signature, each calling the kernel with arena
views) runs the program with one Python-level call; the kernels are the same compiled functions as
the per-step path, so results are bit for bit those of the per-step path.

Calls the interpreter cannot take (a numpy function, a non-contiguous array) split the program into
segments run around them, with their arrays remapped into the arena; a call of an unknown Python
callable (its arrays could hide in a closure) refuses the whole bound set (`bind` returns None):
the caller keeps its per-step path.

The interpreter's source depends only on the set of kernel signatures; it is written once per set
(and per version of the kernel package) into a cache folder, where numba's own cache keeps the
compiled code. numba keys its cache by the interpreter's file only, so the file name carries a
hash of every kernel source (a changed kernel gets a new interpreter, never a stale inlined one).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array
from numpy.lib.array_utils import byte_bounds

from . import wholeplan_ops

ALIGN = 64  # every block keeps its address modulo ALIGN in the arena (aligned loads stay aligned)
GENERATOR_VERSION = 1
INT_TYPES = (int, np.int64)  # the int arguments the program carries (others go through Python)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass
class Bound:
    """A bound set run as a program: `calls` (fn, args) as numba._Bound holds them, the inputs and
    outputs as arena views, and the arena's bytes."""
    calls: list
    inputs: list
    outputs: list
    nbytes: int
    segments: int  # compiled calls in a run (1 when every call is a kernel the interpreter takes)


def bind(calls: list, inputs: list, outputs: list) -> Bound | None:
    """calls: [(fn, args)] of one bound batch size, in order; inputs, outputs: [(name, array)].
    Returns the same run as a program over one arena, or None when a call cannot be remapped."""
    calls = [c for fn, args in calls for c in wholeplan_ops.translate(fn, args)]
    arrays = []
    for fn, args in calls:
        if not isinstance(fn, Dispatcher) and not _python_ok(fn):
            return None
        if not _collect(args, arrays):
            return None
    arrays += [a for _, a in inputs] + [a for _, a in outputs]
    arena, where = _arena(arrays)
    view = functools.partial(_remap, arena, where)
    ops, prog, runs = {}, [], []  # runs: ("k", lo, hi) program ranges | ("py", fn, args)
    for fn, args in calls:
        kind = _kind(fn, args)
        if kind is None:
            runs.append(("py", fn, view(args)))
            continue
        lo = len(prog)
        prog.append(ops.setdefault(kind, len(ops)))
        for a in args:
            if isinstance(a, np.ndarray):
                prog += [where(a), *a.shape]
            else:
                prog.append(int(a))
        if runs and runs[-1][0] == "k":
            runs[-1] = ("k", runs[-1][1], len(prog))
        else:
            runs.append(("k", lo, len(prog)))
    program = np.array(prog, np.int64)
    interp = interpreter(tuple(sorted(ops, key=ops.get))) if ops else None
    out_calls = [(interp, (program, arena, r[1], r[2])) if r[0] == "k" else (r[1], r[2]) for r in runs]
    return Bound(out_calls, [(n, view(a)) for n, a in inputs], [(n, view(a)) for n, a in outputs],
                 arena.nbytes + program.nbytes, sum(r[0] == "k" for r in runs))


# ------------------------------------------------------------------ the arena

def _collect(obj, arrays: list) -> bool:
    """Every array inside obj (lists and tuples followed); False if obj holds something that could
    hide an array (a dict, an object of another kind)."""
    if isinstance(obj, np.ndarray):
        arrays.append(obj)
        return True
    if isinstance(obj, (list, tuple)):
        return all(_collect(o, arrays) for o in obj)
    return obj is None or isinstance(obj, (int, float, bool, np.generic, np.dtype, str, Dispatcher)) or callable(obj)


def _arena(arrays: list) -> tuple[np.ndarray, callable]:
    """One byte arena holding every array's bytes: the arrays' address ranges merged where they
    overlap (a view and its base, two views of one buffer) into blocks, each block copied once.
    Returns the arena and where(a): a's first byte in it."""
    spans = sorted({byte_bounds(a) for a in arrays if a.nbytes})
    blocks = []  # [lo, hi, arena offset]
    for lo, hi in spans:
        if blocks and lo < blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], hi)
        else:
            blocks.append([lo, hi, 0])
    size = 0
    for b in blocks:
        size += (b[0] - size) % ALIGN
        b[2], size = size, size + b[1] - b[0]
    raw = np.zeros(size + 2 * ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    arena = raw[start:start + max(size, 1)]
    starts = [b[0] for b in blocks]

    def where(a: np.ndarray) -> int:
        lo = byte_bounds(a)[0]
        if not a.nbytes:
            return 0
        b = blocks[int(np.searchsorted(starts, lo, side="right")) - 1]
        return b[2] + a.__array_interface__["data"][0] - b[0]
    for a in arrays:
        if a.nbytes:
            np.copyto(_view_at(arena, a, where(a)), a)
    return arena, where


def _view_at(arena: np.ndarray, a: np.ndarray, offset: int) -> np.ndarray:
    if not a.nbytes:
        return np.empty(a.shape, a.dtype)
    return np.ndarray(a.shape, a.dtype, buffer=arena, offset=offset, strides=a.strides)


def _remap(arena, where, obj):
    if isinstance(obj, np.ndarray):
        return _view_at(arena, obj, where(obj))
    if isinstance(obj, list):
        return [_remap(arena, where, o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_remap(arena, where, o) for o in obj)
    return obj


# ------------------------------------------------------------------ what runs where

def _python_ok(fn) -> bool:
    """A Python callable whose every array is in its arguments (so remapping them is enough)."""
    from . import lower_ops
    from .threads import Pool
    if isinstance(fn, functools.partial):
        return isinstance(fn.func, np.ufunc) and not fn.args and all(
            isinstance(v, (str, np.dtype, type)) for v in fn.keywords.values())
    return fn in (np.copyto, lower_ops._concat, lower_ops._take) or getattr(fn, "__func__", None) is Pool._run


def _kind(fn, args) -> tuple | None:
    """The interpreter signature of a call: (module, name, argument kinds), or None when it stays in
    Python (not a kernel importable by name, or an argument the program cannot carry)."""
    if not isinstance(fn, Dispatcher):
        return None
    module, name = fn.py_func.__module__, fn.py_func.__name__
    if getattr(sys.modules.get(module), name, None) is not fn:
        return None
    kinds = []
    for a in args:
        if isinstance(a, np.ndarray):
            if a.ndim == 0 or not a.flags.c_contiguous or a.dtype.kind not in "iu":
                return None
            kinds.append((a.dtype.name, a.ndim))
        elif type(a) in INT_TYPES and INT64_MIN <= a <= INT64_MAX:
            kinds.append(("int",))
        else:
            return None
    return module, name, tuple(kinds)


# ------------------------------------------------------------------ the interpreter

@intrinsic
def at(typingctx, arena, offset, shape, dtype):
    """at(arena, offset, (d0, ...), np.<dtype>): the C-contiguous array of that shape whose first
    byte is arena[offset], built in place (no checks, no owner: the arena, an argument of the
    interpreter, outlives it). numpy-style view + reshape cost about 30 ns an array (measured),
    more than a small kernel's work."""
    nd = len(shape)
    ret = types.Array(dtype.instance_type, nd, "C")

    def codegen(context, builder, sig, args):
        arena_v, off, shp, _ = args
        src = make_array(sig.args[0])(context, builder, arena_v)
        out = make_array(ret)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(ret.dtype)))
        dims = cgutils.unpack_tuple(builder, shp, nd)
        strides, step = [], itemsize
        for d in reversed(dims):
            strides.insert(0, step)
            step = builder.mul(step, d)
        data = builder.bitcast(builder.gep(src.data, [off]), out.data.type)
        populate_array(out, data=data, shape=dims, strides=strides, itemsize=itemsize,
                       meminfo=cgutils.get_null_value(out.meminfo.type))
        return out._getvalue()
    return ret(arena, offset, shape, dtype), codegen


def source(kinds: tuple) -> str:
    """The interpreter's module source for these call signatures (opcode = index in kinds)."""
    imports = sorted({(m, n) for m, n, _ in kinds})
    alias = {mn: f"k{i}" for i, mn in enumerate(imports)}
    lines = ['"""Generated by cvm.interp.numba_kernels.wholeplan: do not edit."""', "import numpy as np",
             "from numba import njit", "from cvm.interp.numba_kernels.wholeplan import at"]
    lines += [f"from {m} import {n} as {alias[(m, n)]}" for m, n in imports]
    lines += ["", "", "@njit(cache=True, nogil=True)", "def run(prog, arena, pc, end):",
              "    while pc < end:", "        op = prog[pc]"]
    for op, (m, n, args) in enumerate(kinds):
        exprs, p = [], 1
        for k in args:
            if k == ("int",):
                exprs.append(f"prog[pc + {p}]")
                p += 1
                continue
            dtype, ndim = k
            dims = ", ".join(f"prog[pc + {p + 1 + d}]" for d in range(ndim))
            exprs.append(f"at(arena, prog[pc + {p}], ({dims},), np.{dtype})")
            p += 1 + ndim
        lines += [f"        {'if' if op == 0 else 'elif'} op == {op}:",
                  f"            {alias[(m, n)]}({', '.join(exprs)})", f"            pc += {p}"]
    lines += ["        else:", "            raise ValueError('whole-plan program: unknown opcode')", ""]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _package_hash() -> str:
    """A hash of every kernel source (this folder): part of each interpreter's file name."""
    h = hashlib.sha256(f"{GENERATOR_VERSION}".encode())
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """Where generated interpreters live: CVM_WHOLEPLAN_DIR, else under NUMBA_CACHE_DIR, else
    ~/.cache/cvm/wholeplan."""
    from numba.core import config
    if d := os.environ.get("CVM_WHOLEPLAN_DIR"):
        return Path(d)
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR) / "cvm_wholeplan"
    return Path.home() / ".cache" / "cvm" / "wholeplan"


@functools.lru_cache(maxsize=64)
def interpreter(kinds: tuple) -> Dispatcher:
    """The compiled interpreter for these signatures (written and imported once per process)."""
    text = source(kinds)
    digest = hashlib.sha256((_package_hash() + text).encode()).hexdigest()[:20]
    name = f"cvm_wholeplan_{digest}"
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)  # (atomic: another process may import it at the same time)
    if name not in sys.modules:  # (numba's cache re-imports the module by name when it loads)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].run
