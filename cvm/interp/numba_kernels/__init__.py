"""Compiled kernels of the numba backend (cvm.interp.numba), one small module per kind of op.

Every kernel is `@njit(cache=True)`, takes preallocated C-contiguous arrays and writes its output in
place; shapes and attributes arrive as plain ints or int64 arrays, so one compiled kernel serves
every shape. Integer widths are chosen by the planner from what the verifier proved; the kernels
never depend on wrap-around (docs/performance.md, "Exactness").

Compiled kernels are cached under one key of every kernel source, the numba, llvmlite and numpy
versions and the target CPU (cache_key.py), installed here before any kernel module is imported.
"""
from .cache_key import install

install()
