"""Reading a model file from disk: a regular file only, and at most the limit plus one byte.

What stat() says of a path does not bound a read: a device reports 0 bytes and never ends
(/dev/zero), a FIFO blocks whoever opens it until a writer comes, a /proc file reports 0 bytes and
has more, and the path may be swapped for another between a check and the open. So a reader opens
without blocking, checks the descriptor it opened (not the path) and reads at most the limit plus
one byte, which is enough to refuse the file. The limit is `limits.MAX_FILE_BYTES`, the largest
of any opset, because the opset is not known before decoding; the decoded graph's opset then
applies its own (cvm.format.check_file_size).

Every reader of a model file (cvm.load, the `cvm` command, the chain's model store) reads through
here. A refusal is a FormatError naming the path; a failing open or read is the OSError itself
(the caller says whether that is bad input or a passing fault: the store retries it, load refuses).
"""
from __future__ import annotations

import os
import stat
from typing import BinaryIO

from . import limits
from .errors import FormatError

READ_CHUNK = 1 << 20  # bytes a read asks for beyond the size fstat saw
KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}


def _check_regular(path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = KINDS.get(stat.S_IFMT(mode), "not a file")
        raise FormatError(f"model file {path} is {kind}, not a regular file: refused before reading")


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """`path` opened for reading when it is a regular file: checked before the open (a device is not
    even opened) and on the opened descriptor (the path may have been swapped in between), which is
    opened without blocking (a FIFO does not wait for a writer) and without becoming a terminal's."""
    _check_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        _check_regular(path, os.fstat(fd).st_mode)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_model_file(path: str | os.PathLike) -> bytes:
    """The bytes of a model file, at most limits.MAX_FILE_BYTES of them (FormatError beyond)."""
    limit = limits.MAX_FILE_BYTES
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FormatError(f"model file {path} is {size} bytes > limit {limit}")
        data = _read_at_most(f, limit + 1, size + 1)
    if len(data) > limit:
        raise FormatError(f"model file {path} holds more than the limit of {limit} bytes")
    return data


def _read_at_most(f: BinaryIO, n: int, first: int) -> bytes:
    """Up to n bytes, to the end of the file: one read of `first` bytes (the size fstat saw and one
    more, to see whether it grew), then reads of READ_CHUNK while the file goes on (it grew, a /proc
    file reports no size, a read came back short)."""
    chunks, got, want = [], 0, first
    while got < n:
        chunk = f.read(min(want, n - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        want = READ_CHUNK
    return b"".join(chunks)
