"""The whole-plan runner: a bound plan's kernel calls run inside ONE compiled call.

A small model (an unrolled recurrent network: hundreds of steps of a few hundred bytes each) spends
much of a run in the per-call cost of a Python loop over prebuilt calls (argument unboxing: 0.14 us
for a requant, 0.42 us for a VNNI dense, measured against an empty kernel of the same arguments;
262 calls for the LSTM fixture). Here the buffers of one bound batch size move into one byte arena,
and the calls become a program (wholeplan_jit: opcodes and int64 arguments) that one compiled
interpreter call runs, each step a generated function per kernel signature (wholeplan_gen). The
kernels are the same compiled functions as the per-step path's, on the same bytes, so a run is bit
for bit the per-step path's.

Calls the program cannot hold (a numpy function other than those wholeplan_ops compiles, a
non-contiguous array) split it into segments run around them, with their arrays remapped into the
arena; a call of an unknown Python callable (its arrays could hide in a closure) refuses the whole
bound set (`bind` returns None): the caller keeps its per-step path.
"""
from __future__ import annotations

import bisect

import functools
import sys
from dataclasses import dataclass

import numpy as np
from numba.core.dispatcher import Dispatcher

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # (numpy < 2, the FHE environment: numpy.byte_bounds)
    from numpy import byte_bounds

from . import wholeplan_fuse, wholeplan_gen, wholeplan_jit, wholeplan_ops
from .calls import Call, Ufunc, call, is_record
from .tuning import DEFAULT_TUNING, Tuning

ALIGN = 64  # every block keeps its address modulo ALIGN in the arena (aligned loads stay aligned)
INT_TYPES = (int, np.int64)  # the int arguments the program carries (others go through Python)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass
class Bound:
    """A bound set run as a program: `calls` (calls.Call) as numba._Bound holds them, the inputs and
    outputs as arena views, and the arena's bytes."""
    calls: list
    inputs: list
    outputs: list
    nbytes: int  # bytes of the buffers (and constants) the arena holds, its alignment gaps not counted
    segments: int  # compiled calls in a run (1 when every call is a kernel the interpreter takes)
    funcs: list  # the step functions whose addresses the program's table holds (kept alive)


def bind(calls: list, inputs: list, outputs: list, steps: list | None = None,
         tuning: Tuning = DEFAULT_TUNING) -> Bound | None:
    """calls: [calls.Call] of one bound batch size, in order; inputs, outputs: [(name, array)];
    steps: per call, (its step's number, whether one step reads that step's value) (wholeplan_fuse);
    tuning: the twins the program picks (wholeplan_ops.translate). Returns the same run as a program
    over one arena, or None when a call cannot be remapped."""
    steps = steps or [(k, False) for k in range(len(calls))]
    calls = wholeplan_fuse.fuse([(t, steps[k]) for k, c in enumerate(calls)
                                 for t in wholeplan_ops.translate(c, tuning)], tuning.fuse_scan)
    arrays = []
    for fn, args in calls:
        if not isinstance(fn, Dispatcher) and not _python_ok(fn):
            return None
        if not _collect(args, arrays):
            return None
    arrays += [a for _, a in inputs] + [a for _, a in outputs]
    arrays = list({id(a): a for a in arrays}.values())  # each array once: a concat's call lists an input per listing
    arena, where, held = _arena(arrays)
    view = functools.partial(_remap, arena, where)
    ops, prog, runs = {}, [], []  # runs: ("k", lo, hi) program ranges | ("py", Call)
    for fn, args in calls:
        kind = _kind(fn, args)
        if kind is None:
            runs.append(("py", Call(fn, view(args))))
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
    try:
        funcs = [wholeplan_gen.step(kind) for kind in sorted(ops, key=ops.get)]
    except OSError:  # no writable cache folder for the generated steps: the per-step path
        return None
    steps = np.array([f.address for f in funcs], np.int64)
    out_calls = [call(wholeplan_jit.run, program, arena, steps, r[1], r[2]) if r[0] == "k" else r[1] for r in runs]
    return Bound(out_calls, [(n, view(a)) for n, a in inputs], [(n, view(a)) for n, a in outputs],
                 held, sum(r[0] == "k" for r in runs), funcs)


# ------------------------------------------------------------------ the arena

def _collect(obj, arrays: list) -> bool:
    """Every array inside obj (lists and tuples followed); False if obj holds something that could
    hide an array (a dict, an object of another kind)."""
    if isinstance(obj, np.ndarray):
        arrays.append(obj)
        return True
    if isinstance(obj, (list, tuple)):
        return all(_collect(o, arrays) for o in obj)
    return obj is None or isinstance(obj, (int, float, bool, np.generic, np.dtype, str, Dispatcher))


def _arena(arrays: list) -> tuple[np.ndarray, callable, int]:
    """One byte arena holding every array's bytes: the arrays' address ranges merged where they
    overlap (a view and its base, two views of one buffer) into blocks, each block copied once.
    Returns the arena, where(a): a's first byte in it, and the bytes of the blocks."""
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

    found: dict[int, int] = {}  # id(array) -> its offset (the arrays live as long as the calls that hold them)

    def where(a: np.ndarray) -> int:
        if (off := found.get(id(a))) is not None:
            return off
        if not a.nbytes:
            return 0
        lo = byte_bounds(a)[0]
        b = blocks[bisect.bisect_right(starts, lo) - 1]  # O(log n) on the list (np.searchsorted copies it: O(n))
        found[id(a)] = off = b[2] + a.__array_interface__["data"][0] - b[0]
        return off
    for a in arrays:
        if a.nbytes:
            np.copyto(_view_at(arena, a, where(a)), a)
    return arena, where, sum(b[1] - b[0] for b in blocks)


def _view_at(arena: np.ndarray, a: np.ndarray, offset: int) -> np.ndarray:
    if not a.nbytes:
        return np.empty(a.shape, a.dtype)
    return np.ndarray(a.shape, a.dtype, buffer=arena, offset=offset, strides=a.strides)


def _remap(arena, where, obj):
    if isinstance(obj, np.ndarray):
        return _view_at(arena, obj, where(obj))
    if isinstance(obj, list):
        return [_remap(arena, where, o) for o in obj]
    if isinstance(obj, tuple):  # (a call's record stays its record)
        items = [_remap(arena, where, o) for o in obj]
        return type(obj)(*items) if is_record(obj) else tuple(items)
    return obj


# ------------------------------------------------------------------ what runs where

def _python_ok(fn) -> bool:
    """A Python callable whose every array is in its arguments (so remapping them is enough)."""
    from . import lower_ops
    from .threads import Pool
    if isinstance(fn, Ufunc):
        return True
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
