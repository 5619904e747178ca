"""A local content-addressed store of CVM models.

Each model is one file, ``<hash hex>.cvm``, named by the model's hash (keccak256 of its
consensus part). ``get`` loads and verifies the file and rejects it when the hash it computes
differs from the name: a store directory is untrusted input like any model file.

Failures are contained: ``get`` raises ``StoreError`` and nothing else for a missing, unreadable,
oversized, malformed or mislabelled file (whatever the loader raised); a file that failed to load
is remembered as bad (by hash, until the file changes) so it is not parsed again on every call.
Loaded models are kept in an LRU cache bounded both in models and in bytes of their files.
``put`` writes through a temporary file and an atomic rename, and removes the temporary file
when the write fails.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

import cvm
from cvm import limits
from cvm.model_file import read_model_file

SUFFIX = ".cvm"
HASH_BYTES = 32
CACHE_MAX_MODELS = 32  # loaded models kept in memory (least recently used dropped first)
CACHE_MAX_BYTES = limits.MAX_FILE_BYTES  # their files' bytes together: room for the largest valid model
BAD_MAX_MODELS = 1024  # hashes remembered as failing to load (oldest forgotten first)


class StoreError(Exception):
    """A model the store does not hold, or a file whose content does not match its name."""


class BadModelFile(StoreError):
    """A file is there under the model's name, but it cannot be read or is not that model."""


def normalize_hash(model_hash: bytes | str) -> bytes:
    """Accepts 32 raw bytes or 64 hex digits (with or without 0x)."""
    if isinstance(model_hash, str):
        text = model_hash[2:] if model_hash.startswith(("0x", "0X")) else model_hash
        try:
            model_hash = bytes.fromhex(text)
        except ValueError:
            raise StoreError(f"not a model hash: {text!r}") from None
    if not isinstance(model_hash, (bytes, bytearray, memoryview)):
        raise StoreError(f"not a model hash: a {type(model_hash).__name__}")
    model_hash = bytes(model_hash)
    if len(model_hash) != HASH_BYTES:
        raise StoreError(f"a model hash has {HASH_BYTES} bytes, got {len(model_hash)}")
    return model_hash


def _describe(e: BaseException) -> str:
    return str(e) if isinstance(e, cvm.CVMError) else f"{type(e).__name__}: {e}"


class ModelStore:
    def __init__(self, directory: str | os.PathLike, cache_models: int = CACHE_MAX_MODELS,
                 cache_bytes: int = CACHE_MAX_BYTES, bad_models: int = BAD_MAX_MODELS):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cache_models, self.cache_bytes, self.bad_models = cache_models, cache_bytes, bad_models
        self._cache: OrderedDict[bytes, tuple[cvm.Model, int]] = OrderedDict()  # hash -> (model, file bytes)
        self._cached_bytes = 0
        self._bad: OrderedDict[bytes, tuple[tuple, str]] = OrderedDict()  # hash -> (file signature, reason)
        self._lock = threading.Lock()

    def path(self, model_hash: bytes | str) -> Path:
        return self.directory / (normalize_hash(model_hash).hex() + SUFFIX)

    # ------------------------------------------------------------ the caches

    def _remember(self, model_hash: bytes, model: cvm.Model, size: int) -> None:
        with self._lock:
            old = self._cache.pop(model_hash, None)
            if old is not None:
                self._cached_bytes -= old[1]
            self._bad.pop(model_hash, None)
            if size > self.cache_bytes or self.cache_models <= 0:
                return  # larger than the whole cache: loaded on every call instead
            self._cache[model_hash] = (model, size)
            self._cached_bytes += size
            while len(self._cache) > self.cache_models or self._cached_bytes > self.cache_bytes:
                _, (_, dropped) = self._cache.popitem(last=False)
                self._cached_bytes -= dropped

    def _cached(self, model_hash: bytes) -> cvm.Model | None:
        with self._lock:
            entry = self._cache.get(model_hash)
            if entry is None:
                return None
            self._cache.move_to_end(model_hash)
            return entry[0]

    def _mark_bad(self, model_hash: bytes, signature: tuple, reason: str) -> None:
        with self._lock:
            self._bad.pop(model_hash, None)
            self._bad[model_hash] = (signature, reason)
            while len(self._bad) > self.bad_models:
                self._bad.popitem(last=False)

    def cache_info(self) -> dict:
        """How full the caches are: loaded models, their files' bytes, hashes remembered as bad."""
        with self._lock:
            return {"models": len(self._cache), "bytes": self._cached_bytes, "bad": len(self._bad)}

    # ------------------------------------------------------------ reading and writing

    def put(self, model: cvm.Model | str | os.PathLike | bytes) -> bytes:
        """Adds a model (a Model, a .cvm path, or the file's bytes); returns its hash. A model that
        does not load raises its CVMError (StoreError for any other failure)."""
        if isinstance(model, cvm.Model):
            data = model.to_bytes()
        elif isinstance(model, (bytes, bytearray)):
            data = bytes(model)
        else:
            try:
                data = read_model_file(model)  # (a FormatError, as any model that does not load)
            except OSError as e:
                raise StoreError(f"cannot read {model}: {e}") from None
        try:
            loaded = cvm.loads(data)  # verifies the model before it is named by its hash
        except cvm.CVMError:
            raise
        except Exception as e:
            raise StoreError(f"not a valid model: {_describe(e)}") from None
        target = self.path(loaded.hash)
        held = self._held(target, loaded, data)
        if held is None:
            self._write(target, data)
        else:  # a good file of this model is there already (its metadata may differ): it stays
            loaded, data = held
        self._remember(loaded.hash, loaded, len(data))
        return loaded.hash

    def _held(self, target: Path, loaded: cvm.Model, data: bytes) -> tuple[cvm.Model, bytes] | None:
        """The model and bytes of `target` when it is a good file of this model; None when it is
        missing or bad (then `put` replaces it)."""
        try:
            existing = read_model_file(target)
            model = loaded if existing == data else cvm.loads(existing)
        except Exception:
            return None
        return (model, existing) if model.hash == loaded.hash else None

    def _write(self, target: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix="." + target.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, model_hash: bytes | str) -> cvm.Model:
        """The verified model of this hash; StoreError (only) when it cannot be had."""
        model_hash = normalize_hash(model_hash)
        model = self._cached(model_hash)
        if model is not None:
            return model
        target = self.path(model_hash)
        try:
            st = target.stat()
        except FileNotFoundError:
            raise StoreError(f"no model {model_hash.hex()} in {self.directory}") from None
        except Exception as e:
            raise BadModelFile(f"{target.name}: cannot read: {_describe(e)}") from None
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            bad = self._bad.get(model_hash)
        if bad is not None and bad[0] == signature:
            raise BadModelFile(bad[1])
        try:
            data = read_model_file(target)
        except cvm.FormatError as e:  # not a regular file, or over the limit: remembered
            self._mark_bad(model_hash, signature, str(e))
            raise BadModelFile(str(e)) from None
        except Exception as e:  # an I/O failure may pass: not remembered
            raise BadModelFile(f"{target.name}: cannot read: {_describe(e)}") from None
        try:
            model = cvm.loads(data)
            if model.hash != model_hash:
                raise BadModelFile(f"{target.name}: content hashes to {model.hash.hex()}, not its name")
        except BadModelFile as e:
            self._mark_bad(model_hash, signature, str(e))
            raise
        except Exception as e:  # whatever a malformed file makes the loader raise
            reason = f"{target.name}: not a valid model: {_describe(e)}"
            self._mark_bad(model_hash, signature, reason)
            raise BadModelFile(reason) from None
        self._remember(model_hash, model, len(data))
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
