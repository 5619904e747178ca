"""The output commitment: keccak256 of the canonical encoding of a run's integer outputs.

Encoding = msgpack array, one [dtype, shape, little-endian bytes] per output in model order
(names are not included: they are part of the model hash). Same bytes on every platform.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import msgpack
import numpy as np
from eth_hash.auto import keccak

from .values import dtype_name


def encode_outputs(outputs: np.ndarray | Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> bytes:
    if isinstance(outputs, np.ndarray):
        arrays = [outputs]
    elif isinstance(outputs, Mapping):
        arrays = list(outputs.values())
    else:
        arrays = list(outputs)
    items = []
    for a in arrays:
        a = np.asarray(a)
        le = a.dtype.newbyteorder("<")
        items.append([dtype_name(a.dtype), list(a.shape), np.ascontiguousarray(a, le).tobytes()])
    return msgpack.packb(items, use_bin_type=True)


def output_hash(outputs) -> bytes:
    """keccak256 commitment of integer outputs (an array, a dict in model order, or a list)."""
    return keccak(encode_outputs(outputs))
