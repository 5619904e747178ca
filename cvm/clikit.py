"""What the `cvm` and `mrt` commands share: every failure is one line on stderr and a non-zero exit.

Exit codes: 0 success, 1 the command ran and found a problem it reports (e.g. a fuzz crash, a
conformance mismatch), 2 bad usage or bad input (a model file, data, arguments: the user's to fix),
3 an internal error (a bug: the message says how to get the traceback), 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
import zipfile
import zlib
from typing import Callable

import numpy as np

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
DEBUG_VARIABLE = "CVM_DEBUG"  # set to 1: internal errors also print their traceback
MAX_MESSAGE = 400  # characters of an error message on its one line


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, so `--help` answers "what happens if I leave it out";
    an unset default (None, a flag's False) says nothing: the help text says what leaving it out means."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.required:
            return action.help
        return super()._get_help_string(action)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage stays one `-h` away)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {one_line(message)} (see {self.prog} -h)\n")


def one_line(message: str) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def read_arrays(path, error: type[Exception] = ValueError) -> dict[str, np.ndarray] | np.ndarray:
    """The arrays of an .npz ({name: array}) or an .npy (one array), read whole now, so that a truncated
    or corrupt file is `error` (bad input: exit 2) here, not a BadZipFile raised by a later lazy read (which
    the command line would report as an internal error). A missing file stays an OSError (exit 2 too)."""
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {k: data[k] for k in data.files}
        return data
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise error(f"cannot read {path} as .npy or .npz (truncated or not written by numpy?): {e}") from None


def run_guarded(func: Callable[[], int | None], expected: tuple[type[BaseException], ...], prog: str) -> int:
    """Run a command: `expected` errors (and OSError: a file that cannot be read or written) are
    the user's to fix; anything else is a bug, reported as such on one line."""
    try:
        return func() or 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (*expected, OSError, zipfile.BadZipFile) as e:
        print(f"{prog}: error: {one_line(_describe(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the last line of defence of a command line
        if os.environ.get(DEBUG_VARIABLE):
            traceback.print_exc()
        hint = "" if os.environ.get(DEBUG_VARIABLE) else f" (a bug; {DEBUG_VARIABLE}=1 prints the traceback)"
        print(f"{prog}: internal error: {one_line(f'{type(e).__name__}: {e}')}{hint}", file=sys.stderr)
        return EXIT_INTERNAL


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or type(e).__name__
