"""Writing fuzz cases back to bytes: canonically (`pack`, `encode`), so that a mutated graph gets
past the loader's canonical-encoding check to the structure checks, the verifier and the backends;
and loosely (`pack_loose`), so that the canonical-encoding check itself is exercised.

`pack_loose` is a small msgpack writer of its own, because msgpack-python always picks the shortest
form and cannot be asked for a wider one. Its writers are looked up by type in `_WRITERS`, one short
function per msgpack family; each draws from the case's rng in a fixed order, so the same rng state
gives the same bytes.
"""
from __future__ import annotations

import struct

import msgpack
import numpy as np

WIDE = 0.15  # chance that a value which fits a short form is written in a wider one
REVERSED_MAP = 0.3  # chance that a map's keys are written in reverse order
# (marker, struct format, the first value that does not fit), narrowest first
_UINTS = ((0xCC, "B", 1 << 8), (0xCD, "H", 1 << 16), (0xCE, "I", 1 << 32), (0xCF, "Q", 1 << 64))
_SINTS = ((0xD0, "b", 1 << 7), (0xD1, "h", 1 << 15), (0xD2, "i", 1 << 31), (0xD3, "q", 1 << 63))


def _sorted(v):
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    if isinstance(v, dict):
        try:
            keys = sorted(v)
        except TypeError:  # mixed key types (a mutation put one there): keep their order
            keys = list(v)
        return {k: _sorted(v[k]) for k in keys}
    return v


def pack(obj) -> bytes:
    """Canonical msgpack (sorted keys, shortest forms), as cvm.format writes it."""
    return msgpack.packb(_sorted(obj), use_bin_type=True)


class _Writer:
    """The output buffer and the rng that decides, value by value, whether to go wide."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.out = bytearray()

    def wide(self) -> bool:
        return self.rng.random() < WIDE

    def value(self, v) -> None:
        # By the type's MRO, so that dispatch matches isinstance checks in order bool, int, float, ...
        # (bool before int; a subclass such as numpy.float64 is written as its base).
        for cls in type(v).__mro__:
            write = _WRITERS.get(cls)
            if write is not None:
                write(self, v)
                return
        raise TypeError(type(v))


def _write_nil(w: _Writer, v) -> None:
    w.out.append(0xC0)


def _write_bool(w: _Writer, v: bool) -> None:
    w.out.append(0xC3 if v else 0xC2)


def _write_int(w: _Writer, v: int) -> None:
    """fixint when it fits (and not drawn wide), else the narrowest fixed width, each wider one drawn
    in turn; past 64 bits struct raises, which the caller counts as an unencodable case."""
    if 0 <= v < 128 and not w.wide():
        w.out.append(v)
    elif -32 <= v < 0 and not w.wide():
        w.out.append(v & 0xFF)
    elif v >= 0:
        fmt = next((f for f in _UINTS if v < f[2] and not (w.wide() and f[0] != 0xCF)), None)
        fmt = fmt or (0xCF, "Q", 0)
        w.out.append(fmt[0])
        w.out += struct.pack(">" + fmt[1], v)
    else:
        fmt = next((f for f in _SINTS if -v <= f[2] and not (w.wide() and f[0] != 0xD3)), None)
        fmt = fmt or (0xD3, "q", 0)
        w.out.append(fmt[0])
        w.out += struct.pack(">" + fmt[1], v)


def _write_float(w: _Writer, v: float) -> None:
    w.out.append(0xCB)
    w.out += struct.pack(">d", v)


def _write_str(w: _Writer, v: str) -> None:
    b = v.encode()
    if len(b) < 32 and not w.wide():
        w.out.append(0xA0 | len(b))
    elif len(b) < 256 and not w.wide():
        w.out += bytes([0xD9, len(b)])
    else:
        w.out.append(0xDB)
        w.out += struct.pack(">I", len(b))
    w.out += b


def _write_bytes(w: _Writer, v: bytes) -> None:
    if len(v) < 256 and not w.wide():
        w.out += bytes([0xC4, len(v)])
    else:
        w.out.append(0xC6)
        w.out += struct.pack(">I", len(v))
    w.out += v


def _write_list(w: _Writer, v: list) -> None:
    if len(v) < 16 and not w.wide():
        w.out.append(0x90 | len(v))
    else:
        w.out.append(0xDD)
        w.out += struct.pack(">I", len(v))
    for x in v:
        w.value(x)


def _write_map(w: _Writer, v: dict) -> None:
    keys = list(v)
    if w.rng.random() < REVERSED_MAP:
        keys = keys[::-1]
    if len(keys) < 16 and not w.wide():
        w.out.append(0x80 | len(keys))
    else:
        w.out.append(0xDF)
        w.out += struct.pack(">I", len(keys))
    for k in keys:
        w.value(k)
        w.value(v[k])


_WRITERS = {type(None): _write_nil, bool: _write_bool, int: _write_int, float: _write_float, str: _write_str,
            bytes: _write_bytes, list: _write_list, dict: _write_map}


def pack_loose(obj, rng: np.random.Generator) -> bytes:
    """A valid msgpack encoding of `obj` that is (usually) not the canonical one: some integers,
    strings, bytes, arrays and maps in a wider form than needed, some maps with keys out of order."""
    w = _Writer(rng)
    w.value(_sorted(obj))
    return bytes(w.out)


def encode(graph: dict, meta, rng: np.random.Generator, loose: str = "") -> bytes:
    """The file: `loose` = "graph" or "file" encodes that layer non-canonically."""
    gbytes = pack_loose(graph, rng) if loose == "graph" else pack(graph)
    top = {"format": "cvm", "graph": gbytes, "meta": meta}
    return pack_loose(top, rng) if loose == "file" else msgpack.packb(top, use_bin_type=True)
