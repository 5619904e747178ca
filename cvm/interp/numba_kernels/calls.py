"""Kernel calls as named records: what a plan step binds and the whole-plan program translates.

A step binds `Call(fn, args)` (still a 2-tuple: `for fn, args in calls` works), `args` an instance of
the kernel's own record type, a namedtuple whose fields are the kernel's Python parameter names (of
`fn.py_func` for a numba dispatcher), made once per kernel and per number of arguments. A reader of
another kernel's call reads its arguments by name (`c.args.out`, `c.args.b0`), and a twin is bound by
name from the call it replaces (`twin(...)`), so no code relies on a kernel's argument order but the
kernel's own binding. A run passes plain tuples (numba._direct: a tuple subclass costs a copy at
every `fn(*args)`).
"""
from __future__ import annotations

import functools
import inspect
import types
from collections import namedtuple
from typing import Callable, NamedTuple

import numpy as np


class Call(NamedTuple):
    fn: Callable
    args: tuple  # fn's record (record_type(fn, len(args)))


@functools.lru_cache(maxsize=None)
def _params(key) -> tuple[str, ...]:
    if isinstance(key, types.CodeType):  # a Python function's (a closure is keyed by its code: not kept alive)
        return key.co_varnames[:key.co_argcount]
    if isinstance(key, tuple):  # (a method's function,): its parameters after self
        return _params(key[0])[1:]
    fn = getattr(key, "py_func", key)
    if (names := getattr(fn, "PARAMS", None) or _BUILTINS.get(fn)) is not None:
        return names
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a text signature (numpy 1.x's): read by position only
        return tuple(f"arg{i}" for i in range(_MAX_UNNAMED))


_BUILTINS = {np.copyto: ("dst", "src", "casting", "where")}  # numpy < 2 gives its builtins no signature
_MAX_UNNAMED = 32


@functools.lru_cache(maxsize=None)
def _record(key, n: int) -> type:
    names = _params(key)
    if n > len(names):
        raise TypeError(f"{_name(key)} takes {len(names)} arguments, {n} given")
    return namedtuple(f"{_name(key)}_args", names[:n])


def _name(key) -> str:
    if isinstance(key, tuple):
        return _name(key[0])
    if isinstance(key, types.CodeType):
        return key.co_name
    return getattr(getattr(key, "py_func", key), "__name__", type(key).__name__)


def _key(fn):
    """The cache key of fn's parameters: a kernel itself, a Python function by its code, a bound method
    by its function (its self is not a parameter), a named numpy call (Ufunc) by its type."""
    if isinstance(fn, types.FunctionType):
        return fn.__code__
    if isinstance(fn, types.MethodType):
        return (_key(fn.__func__),)
    return type(fn) if isinstance(fn, Ufunc) else fn


def record_type(fn, n: int) -> type:
    """The record of fn's first n parameters (a kernel's named arguments)."""
    return _record(_key(fn), n)


def params(fn) -> tuple[str, ...]:
    """fn's parameter names, in order."""
    return _params(_key(fn))


def call(fn, *args, **named) -> Call:
    """Call(fn, fn's record of args then named): the named ones fill the parameters after the positional
    ones, in any order, and together they are a prefix of fn's parameters."""
    names = params(fn)
    n = len(args) + len(named)
    rest = names[len(args):n]
    if set(rest) != set(named):
        raise TypeError(f"{_name(_key(fn))}: {sorted(named)} are not its parameters {rest}")
    return Call(fn, _record(_key(fn), n)(*args, *(named[k] for k in rest)))


def twin(fn, record, **extra) -> Call:
    """A call of fn with its parameters taken by name from `record` (another kernel's record; the fields
    fn does not take are left out) and from extra, which overrides the record's."""
    values = {**record._asdict(), **extra}
    names = params(fn)
    missing = [k for k in names if k not in values]
    if missing and len(missing) != len(names) - names.index(missing[0]):
        raise TypeError(f"{_name(_key(fn))}: no {missing} in {type(record).__name__}")
    return call(fn, **{k: values[k] for k in names if k in values})


def as_call(c) -> Call:
    """A step's call as a Call: ours bind Calls; an op added from outside (docs/architecture.md, "Adding an
    op") may bind a plain (fn, args) pair, whose arguments nobody reads by name (no variant replaces fn)."""
    return c if isinstance(c, Call) else Call(*c)


def is_record(args) -> bool:
    return isinstance(args, tuple) and hasattr(args, "_fields")


class Ufunc(functools.partial):
    """np.<op>(a, b, out, dtype=dtype, casting="unsafe"): lower_ops' add / sub / mul as a named callable
    (a functools.partial, so a run calls it at C speed) that the whole-plan translation recognises by
    its type and reads by its fields."""
    PARAMS = ("a", "b", "out")

    def __new__(cls, op: np.ufunc, dtype=None):  # (None: unpickling, which sets the keywords after)
        return super().__new__(cls, op, dtype=dtype, casting="unsafe")

    @property
    def op(self) -> np.ufunc:
        return self.func

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.keywords["dtype"])
