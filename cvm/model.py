"""Model: a verified integer graph with its hash, gas, I/O specs, float metadata and backends."""
from __future__ import annotations

import importlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from . import limits, meta as meta_schema, threshold_codes
from .errors import FormatError, GasLimitExceeded, InputError
from .gas import Schedule, call_gas as schedule_call_gas
from .format import check_file_size, decode_file, decode_graph, encode_file, encode_graph, model_hash
from .ir import Graph
from .model_file import read_model_file
from .ops import SCHEDULES
from .arith import bits_max
from .values import storage_dtype
from .verify import Analysis, verify

BACKENDS = {"reference": "cvm.interp.reference", "numba": "cvm.interp.numba", "fhe": "cvm.interp.fhe"}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple  # (None, *per_sample_shape): the batch axis first
    bits: int
    dtype: np.dtype
    scale: float | list | None  # float value = integer * scale, per tensor or per feature (unhashed metadata)


class Model:
    """Construct with `Model(graph, meta)`, `cvm.load(path)` or `cvm.loads(bytes)`; always verified."""

    def __init__(self, graph: Graph, meta: Mapping | None = None, *, consensus: bytes | None = None):
        """`consensus`: the graph's consensus bytes when the caller has them (a decoded file, whose
        decoding checked that they re-encode from `graph`); otherwise they are encoded here."""
        self.graph = graph
        self.analysis: Analysis = verify(graph)
        self.consensus_bytes = encode_graph(graph) if consensus is None else consensus
        self.hash: bytes = model_hash(self.consensus_bytes)
        self.meta: dict = dict(meta or {})
        meta_schema.validate(self.meta, graph, {name: self.analysis.tensors[name].shape for name in graph.outputs})
        self._runners: dict = {}
        in_scales, out_scales = self.meta.get("input_scales", {}), self.meta.get("output_scales", {})
        self.inputs = [TensorSpec(i.name, (None, *i.shape), i.bits, storage_dtype(i.bits), in_scales.get(i.name))
                       for i in graph.inputs]
        self.outputs = []
        for name in graph.outputs:
            info = self.analysis.tensors[name]
            self.outputs.append(TensorSpec(name, (None, *info.shape), info.bits, storage_dtype(info.bits),
                                           out_scales.get(name)))

    # ------------------------------------------------------------ files

    @classmethod
    def from_bytes(cls, data: bytes) -> "Model":
        consensus, meta = decode_file(data)
        graph = decode_graph(consensus)
        check_file_size(len(data), graph.opset)
        return cls(graph, meta, consensus=consensus)

    def to_bytes(self) -> bytes:
        return encode_file(self.consensus_bytes, self.meta)

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically: a crash leaves either the old file or the new one, never half of one."""
        path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=path.name, suffix=".tmp")
        umask = os.umask(0)
        os.umask(umask)
        try:
            os.fchmod(fd, 0o666 & ~umask)
            with os.fdopen(fd, "wb") as f:
                f.write(self.to_bytes())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @property
    def hash_hex(self) -> str:
        return "0x" + self.hash.hex()

    @property
    def gas(self) -> int:
        """Static cost of one sample; a run of batch B costs gas * B."""
        return self.analysis.gas

    @property
    def schedule(self) -> Schedule:
        """The gas schedule of the model's opset (cvm.ops.SCHEDULES): what a node, an edge, a call, a byte
        of input and output and a byte of constants cost beyond the ops' own formulas."""
        return SCHEDULES[self.graph.opset]

    # ------------------------------------------------------------ running

    def _normalize_inputs(self, inputs) -> tuple[dict[str, np.ndarray], int]:
        if isinstance(inputs, dict) or isinstance(inputs, Mapping):  # dict first: the ABC check costs microseconds
            missing = [s.name for s in self.inputs if s.name not in inputs]
            extra = [k for k in inputs if k not in {s.name for s in self.inputs}]
            if missing or extra:
                raise InputError(f"inputs must be exactly {[s.name for s in self.inputs]}; "
                                 f"missing {missing}, unexpected {extra}")
            named = dict(inputs)
        else:
            if len(self.inputs) != 1:
                raise InputError(f"this model has {len(self.inputs)} inputs: pass a dict of {[s.name for s in self.inputs]}")
            named = {self.inputs[0].name: inputs}
        batch = None
        out = {}
        for spec in self.inputs:
            x = numeric(_as_array(named[spec.name], spec.name))  # int4, uint2 ...: int8
            if x.dtype.kind not in "iu":
                raise InputError(f"input {spec.name!r} must hold integers, got dtype {x.dtype} "
                                 "(use Model.quantize_input for float data)")
            if x.ndim != len(spec.shape) or x.shape[1:] != spec.shape[1:]:
                raise InputError(f"input {spec.name!r} must have shape (batch, {', '.join(map(str, spec.shape[1:]))}), "
                                 f"got {x.shape}")
            if not 1 <= x.shape[0] <= limits.MAX_BATCH:
                raise InputError(f"batch size {x.shape[0]} must be in 1..{limits.MAX_BATCH}")
            if batch is not None and x.shape[0] != batch:
                raise InputError(f"inputs disagree on the batch size ({batch} vs {x.shape[0]})")
            batch = x.shape[0]
            m = bits_max(spec.bits)
            lo, hi = int(x.min()), int(x.max())
            if lo < -m or hi > m:
                raise InputError(f"input {spec.name!r} holds values in [{lo}, {hi}], outside its {spec.bits}-bit "
                                 f"range [{-m}, {m}]")
            out[spec.name] = x.astype(spec.dtype, copy=False)
        return out, batch

    def cost(self, batch: int = 1) -> int:
        return self.gas * batch

    def call_gas(self, batch: int = 1) -> int:
        """What a call through the chain pays (docs/chain.md; docs/spec.md 16.2), under the gas schedule of
        the model's opset (cvm.gas.call_gas): the model's gas for `batch` samples, a charge per byte of input
        read and output written, and a fixed charge once. The model's gas prices its nodes; the inputs (a
        2^24-element input may feed one output) and the fixed cost of a call (a one-node model costs ~100
        gas for a call of microseconds) are priced here."""
        return schedule_call_gas(self, batch)

    def run(self, inputs, backend: str = "numba", gas_limit: int | None = None, **options):
        """Integers in, integers out. Inputs: an array (one input) or a dict; outputs likewise."""
        named, batch = self._normalize_inputs(inputs)
        needed = self.cost(batch)
        if gas_limit is not None and needed > gas_limit:
            raise GasLimitExceeded(needed, gas_limit)
        run_bytes = limits.of(self.graph.opset).run_bytes
        if batch * self.analysis.activation_bytes > run_bytes:
            raise InputError(f"batch {batch} needs {batch * self.analysis.activation_bytes} bytes of activations "
                             f"> limit {run_bytes}; run smaller batches")
        outputs = self.runner(backend)(named, **options)
        return outputs if len(outputs) > 1 else next(iter(outputs.values()))

    def runner(self, backend: str):
        """The prepared runner of a backend (compiled once per model and backend)."""
        if backend not in self._runners:
            if backend not in BACKENDS:
                raise ValueError(f"unknown backend {backend!r}; choose from {sorted(BACKENDS)}")
            module = importlib.import_module(BACKENDS[backend])
            self._runners[backend] = module.prepare(self.graph, self.analysis)
        return self._runners[backend]

    # ------------------------------------------------------------ float boundary (off-chain helpers)

    def _spec(self, specs: list[TensorSpec], name: str | None) -> TensorSpec:
        if name is None:
            if len(specs) != 1:
                raise InputError("name the tensor: the model has several")
            return specs[0]
        for s in specs:
            if s.name == name:
                return s
        raise InputError(f"no tensor named {name!r}")

    def quantize_input(self, x, name: str | None = None) -> np.ndarray:
        """round(x / scale) clipped to the input's bits (round half to even, as numpy.rint); for an input with
        threshold codes in the metadata, the codes (cvm.threshold_codes)."""
        spec = self._spec(self.inputs, name)
        if spec.name in self.meta.get("input_thresholds", {}):  # a tree ensemble's input (cvm/threshold_codes.py)
            return threshold_codes.encode(x, self.meta["input_thresholds"][spec.name], spec.dtype, spec.name)
        if spec.scale is None:
            raise InputError(f"input {spec.name!r} has no scale in the model metadata")
        m = bits_max(spec.bits)
        scale = np.asarray(spec.scale, np.float64)  # per tensor, or per feature (last axis)
        x = numeric(_as_array(x, spec.name))
        if x.dtype.kind not in "iufb":
            raise InputError(f"input {spec.name!r} must hold numbers or booleans, got dtype {x.dtype}")
        if x.dtype.kind in "iu" and x.size and scale.size == 1 and float(scale) == 1.0:
            lo, hi = int(x.min()), int(x.max())  # exact for uint64 too, where float64 is not
            if lo < -m or hi > m:  # an integer input (a token id, a count): clipping would change its meaning
                raise InputError(f"input {spec.name!r} holds integers in [{lo}, {hi}], outside the [{-m}, {m}] "
                                 f"of its {spec.bits} bits (the range it was calibrated to)")
        x = x.astype(np.float64, copy=False)  # a boolean (a mask, a flag) is 0 or 1
        if x.size and not np.isfinite(x).all():
            bad = np.argwhere(~np.isfinite(x))[0]
            raise InputError(f"input {spec.name!r} holds {x[tuple(bad)]} at index {tuple(int(i) for i in bad)}: "
                             "NaN and infinity have no integer value")
        if scale.size > 1 and (x.ndim == 0 or x.shape[-1] != scale.size):
            raise InputError(f"input {spec.name!r} has {scale.size} per-feature scales; its last axis must have "
                             f"{scale.size} elements, got shape {x.shape}")
        return np.clip(np.rint(x / scale), -m, m).astype(spec.dtype)

    def dequantize_output(self, y, name: str | None = None) -> np.ndarray:
        spec = self._spec(self.outputs, name)
        if spec.scale is None:
            raise InputError(f"output {spec.name!r} has no scale in the model metadata")
        return np.asarray(y, np.float64) * np.asarray(spec.scale, np.float64)

    # ------------------------------------------------------------ wire format (precompile, oracle)

    def _encode(self, spec: TensorSpec, array) -> bytes:
        a = np.asarray(array)
        if a.shape[1:] != spec.shape[1:] or a.ndim != len(spec.shape):
            raise InputError(f"{spec.name!r} must have shape (batch, {', '.join(map(str, spec.shape[1:]))}), got {a.shape}")
        m = bits_max(spec.bits)
        if a.dtype.kind not in "iu" or (a.size and (int(a.min()) < -m or int(a.max()) > m)):
            raise InputError(f"{spec.name!r} must hold integers within {spec.bits} bits")
        return np.ascontiguousarray(a, spec.dtype.newbyteorder("<")).tobytes()

    def _decode(self, spec: TensorSpec, data: bytes) -> np.ndarray:
        per_sample = _sample_bytes(spec)
        if len(data) == 0 or len(data) % per_sample:
            raise InputError(f"{len(data)} bytes is not a whole number of {spec.name!r} samples ({per_sample} bytes each)")
        arr = np.frombuffer(data, spec.dtype.newbyteorder("<")).astype(spec.dtype)
        return arr.reshape((-1, *spec.shape[1:]))

    def encode_input(self, inputs) -> bytes:
        """Input bytes (spec section 11): an array for a one-input model, else a dict by input name; each
        input's array in model input order, concatenated, all with one batch size."""
        if len(self.inputs) == 1 and not isinstance(inputs, Mapping):
            return self._encode(self.inputs[0], inputs)
        if not isinstance(inputs, Mapping) or set(inputs) != {s.name for s in self.inputs}:
            raise InputError(f"pass a dict of exactly the inputs {[s.name for s in self.inputs]}")
        batches = {np.shape(inputs[s.name])[0] if np.ndim(inputs[s.name]) else 0 for s in self.inputs}
        if len(batches) != 1:
            raise InputError(f"inputs disagree on the batch size ({sorted(batches)})")
        return b"".join(self._encode(s, inputs[s.name]) for s in self.inputs)

    def decode_input(self, data: bytes):
        """What Model.run takes from input bytes: the array of a one-input model, else a dict by input
        name, B = length / (the inputs' per-sample bytes summed) samples each (spec section 11)."""
        if len(self.inputs) == 1:
            return self._decode(self.inputs[0], data)
        sizes = [_sample_bytes(s) for s in self.inputs]
        if len(data) == 0 or len(data) % sum(sizes):
            raise InputError(f"{len(data)} bytes is not a whole number of samples of {sum(sizes)} bytes "
                             f"({', '.join(f'{s.name} {n}' for s, n in zip(self.inputs, sizes))})")
        batch, out, start = len(data) // sum(sizes), {}, 0
        for spec, size in zip(self.inputs, sizes):
            out[spec.name] = self._decode(spec, data[start:start + batch * size])
            start += batch * size
        return out

    def encode_output(self, array) -> bytes:
        return self._encode(self._spec(self.outputs, None), array)

    def decode_output(self, data: bytes) -> np.ndarray:
        return self._decode(self._spec(self.outputs, None), data)

    def __repr__(self) -> str:
        return f"<cvm.Model {self.hash_hex[:18]}… {len(self.graph.nodes)} nodes, gas {self.gas}>"


def _sample_bytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape[1:], dtype=np.int64)) * spec.dtype.itemsize


# The numpy dtypes ml_dtypes adds for ONNX's narrow types (numpy kind "V"): every value of the floats is exactly a
# float32 value (bfloat16, float8, float6, float4), every value of the integers an int8 (int4, uint4, int2, uint2).
NARROW_FLOATS = frozenset({"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                           "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float6_e2m3fn",
                           "float6_e3m2fn", "float4_e2m1fn"})
NARROW_INTEGERS = frozenset({"int4", "uint4", "int2", "uint2"})


def numeric(x: np.ndarray) -> np.ndarray:
    """An array of a narrow ml_dtypes type as the numpy type that holds its values exactly (float32, int8);
    any other array as it is. The conversion is a registered cast: cvm does not import ml_dtypes."""
    if x.dtype.name in NARROW_FLOATS:
        return x.astype(np.float32)
    if x.dtype.name in NARROW_INTEGERS:
        return x.astype(np.int8)
    return x


def _as_array(x, name: str) -> np.ndarray:
    """An array from user data; a ragged nest of lists (numpy's ValueError) is an InputError."""
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise InputError(f"input {name!r} is not a rectangular array of numbers ({e})") from None


def load(path: str | os.PathLike) -> Model:
    """The verified model of a .cvm file, read within the limit (cvm.model_file)."""
    try:
        data = read_model_file(path)
    except OSError as e:
        raise FormatError(f"cannot read model file {path}: {e.strerror}") from None
    return Model.from_bytes(data)


def loads(data: bytes) -> Model:
    return Model.from_bytes(data)
