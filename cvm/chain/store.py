"""A local content-addressed store of CVM models.

Each model is one file, ``<hash hex>.cvm``, named by the model's hash (keccak256 of its
consensus part). ``get`` loads and verifies the file and rejects it when the hash it computes
differs from the name: a store directory is untrusted input like any model file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import cvm

SUFFIX = ".cvm"
HASH_BYTES = 32


class StoreError(Exception):
    """A model the store does not hold, or a file whose content does not match its name."""


def normalize_hash(model_hash: bytes | str) -> bytes:
    """Accepts 32 raw bytes or 64 hex digits (with or without 0x)."""
    if isinstance(model_hash, str):
        text = model_hash[2:] if model_hash.startswith(("0x", "0X")) else model_hash
        try:
            model_hash = bytes.fromhex(text)
        except ValueError:
            raise StoreError(f"not a model hash: {text!r}") from None
    model_hash = bytes(model_hash)
    if len(model_hash) != HASH_BYTES:
        raise StoreError(f"a model hash has {HASH_BYTES} bytes, got {len(model_hash)}")
    return model_hash


class ModelStore:
    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache: dict[bytes, cvm.Model] = {}

    def path(self, model_hash: bytes | str) -> Path:
        return self.directory / (normalize_hash(model_hash).hex() + SUFFIX)

    def put(self, model: cvm.Model | str | os.PathLike | bytes) -> bytes:
        """Adds a model (a Model, a .cvm path, or the file's bytes); returns its hash."""
        if isinstance(model, cvm.Model):
            data = model.to_bytes()
        elif isinstance(model, (bytes, bytearray)):
            data = bytes(model)
        else:
            data = Path(model).read_bytes()
        loaded = cvm.loads(data)  # verifies the model before it is named by its hash
        target = self.path(loaded.hash)
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        self._cache[loaded.hash] = loaded
        return loaded.hash

    def get(self, model_hash: bytes | str) -> cvm.Model:
        model_hash = normalize_hash(model_hash)
        if model_hash in self._cache:
            return self._cache[model_hash]
        target = self.path(model_hash)
        if not target.exists():
            raise StoreError(f"no model {model_hash.hex()} in {self.directory}")
        try:
            model = cvm.loads(target.read_bytes())
        except cvm.CVMError as e:
            raise StoreError(f"{target.name}: not a valid model: {e}") from e
        if model.hash != model_hash:
            raise StoreError(f"{target.name}: content hashes to {model.hash.hex()}, not its name")
        self._cache[model_hash] = model
        return model

    def __contains__(self, model_hash: bytes | str) -> bool:
        try:
            return self.path(model_hash).exists()
        except StoreError:
            return False

    def hashes(self) -> list[bytes]:
        """Hashes of the files named like models (their content is checked by `get`)."""
        found = []
        for p in self.directory.glob("*" + SUFFIX):
            try:
                found.append(normalize_hash(p.stem))
            except StoreError:
                continue
        return sorted(found)
