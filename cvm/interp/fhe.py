"""FHE backend: the CVM integer graph compiled to a TFHE circuit with concrete-python (docs/fhe.md).

    runner = prepare(graph, analysis, inputset=calibration_ints)   # checks every node first
    y = runner({"x": x}, mode="simulate")                          # or "clear", "execute"
    model.run(x, backend="fhe", mode="execute", inputset=calib)    # the same through cvm.Model

Linear ops (dense, conv2d, add, sub, sum, layout) are leveled TFHE operations with clear weights;
requant, relu, clip, lut and div are table lookups built from the ops' own `reference` functions,
after an exact `round_bit_pattern` when the input is wider than the lookup budget. Every value is
compiled at its proven interval, so no input the model accepts can overflow the circuit.
Keys are generated once per model and circuit and cached on disk (CVM_FHE_KEY_DIR, default
~/.cache/cvm/fhe/<model hash>/<circuit digest>/keys).
"""
from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

try:
    from concrete import fhe
except ImportError as e:  # the optional extra lives in its own venv (it pins numpy<2)
    raise ImportError("the fhe backend needs concrete-python: run `bash scripts/setup_fhe.sh` and use "
                      ".venv-fhe/bin/python (pip extra `cvm-mrt[fhe]`)") from e

from ..errors import InputError
from ..format import encode_graph, model_hash
from ..ir import Graph
from ..values import storage_dtype
from ..verify import Analysis
from .fhe_inputset import calibration_samples, coverage, worst_case_samples
from .fhe_lookup import FHEUnsupported, int_bits
from .fhe_lower import PinBounds, make_function, plan_graph

DEFAULT_LOOKUP_BITS = 8  # input width of every table lookup (concrete's limit is 16)
MAX_CALIBRATION_SAMPLES = 256  # calibration samples used in the inputset (spread over the data)
MODES = ("clear", "simulate", "execute")
KEY_DIR_ENV = "CVM_FHE_KEY_DIR"

__all__ = ["DEFAULT_LOOKUP_BITS", "FHEOptions", "FHERunner", "FHEUnsupported", "MODES", "prepare"]


@dataclass(frozen=True)
class FHEOptions:
    lookup_bits: int = DEFAULT_LOOKUP_BITS
    global_p_error: float | None = None  # None: concrete's default (1/100000 per circuit run)
    p_error: float | None = None
    key_dir: str | None = None  # None: $CVM_FHE_KEY_DIR or ~/.cache/cvm/fhe
    max_calibration: int = MAX_CALIBRATION_SAMPLES

    def __post_init__(self):
        if not 1 <= self.lookup_bits <= 16:
            raise ValueError(f"lookup_bits must be in 1..16 (concrete's table limit), got {self.lookup_bits}")


def key_root(options: FHEOptions) -> Path:
    root = options.key_dir or os.environ.get(KEY_DIR_ENV)
    return Path(root) if root else Path.home() / ".cache" / "cvm" / "fhe"


class FHERunner:
    """A compiled model: checked at construction, compiled on first use, keys on first execute."""

    def __init__(self, graph: Graph, analysis: Analysis, options: FHEOptions = FHEOptions(), inputset=None):
        self.graph, self.analysis, self.options = graph, analysis, options
        self.model_hash = model_hash(encode_graph(graph)).hex()
        self.lookups = plan_graph(graph, analysis, options.lookup_bits)  # FHEUnsupported names the node
        self.circuit = None
        self.samples: list[dict] = []
        self._inputset, self._inputset_digest = inputset, _digest(inputset)

    # ------------------------------------------------------------ compile

    def configuration(self) -> fhe.Configuration:
        return fhe.Configuration(
            additional_pre_processors=[PinBounds()],
            rounding_exactness=fhe.Exactness.EXACT,
            optimize_tlu_based_on_original_bit_width=max(8, self.options.lookup_bits),
            p_error=self.options.p_error,
            global_p_error=self.options.global_p_error,
            detect_overflow_in_simulation=False,  # concrete's exact rounding overflows on purpose: false alarms
            fhe_simulation=False,
            fhe_execution=False,
        )

    def compile(self, inputset=None):
        """(Re)compile on calibration samples + worst-case vectors; returns the concrete circuit."""
        samples = calibration_samples(self.graph, inputset, self.options.max_calibration)
        samples += worst_case_samples(self.graph)
        function = make_function(self.graph, self.analysis, self.lookups)
        compiler = fhe.Compiler(function, {f"x{i}": "encrypted" for i in range(len(self.graph.inputs))})
        self.circuit = compiler.compile([self._args(s) for s in samples], self.configuration())
        self.samples = samples
        self._inputset, self._inputset_digest = inputset, _digest(inputset)
        return self.circuit

    def _ensure_compiled(self, inputset=None):
        if inputset is not None and _digest(inputset) != self._inputset_digest:
            self.compile(inputset)
        elif self.circuit is None:
            self.compile(self._inputset)
        return self.circuit

    def _args(self, sample: dict):
        args = tuple(np.asarray(sample[i.name], np.int64) for i in self.graph.inputs)
        return args if len(args) > 1 else args[0]

    # ------------------------------------------------------------ keys

    @property
    def key_path(self) -> Path:
        """Keys depend on the circuit's parameters too: one file per (model hash, client specs)."""
        circuit = self._ensure_compiled()
        digest = hashlib.sha256(circuit.client.specs.serialize()).hexdigest()[:16]
        return key_root(self.options) / self.model_hash / digest / "keys"

    def keygen(self, force: bool = False) -> Path:
        """Load the cached keys, or generate (fresh random seeds) and save them; returns the file."""
        circuit, path = self._ensure_compiled(), self.key_path
        if circuit.keys.are_generated and not force:
            return path
        if path.exists() and not force:
            circuit.keys.load(path)
            return path
        circuit.keys.generate(force=True, secret_seed=secrets.randbits(128), encryption_seed=secrets.randbits(128))
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="keys.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)  # concrete refuses to save over an existing file
        try:
            circuit.keys.save(tmp)
            os.chmod(tmp, 0o600)  # the secret key is saved in the clear
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return path

    # ------------------------------------------------------------ run

    def set_lookup_bits(self, lookup_bits: int) -> None:
        """Re-plan for another lookup budget (the circuit is recompiled on next use)."""
        if lookup_bits != self.options.lookup_bits:
            options = replace(self.options, lookup_bits=lookup_bits)
            self.lookups = plan_graph(self.graph, self.analysis, options.lookup_bits)
            self.options, self.circuit = options, None

    def __call__(self, inputs: dict[str, np.ndarray], mode: str = "simulate", inputset=None,
                 lookup_bits: int | None = None) -> dict[str, np.ndarray]:
        """Integers in (batch first), integers out; one circuit evaluation per sample."""
        if mode not in MODES:
            raise ValueError(f"unknown FHE mode {mode!r}; choose from {MODES}")
        if lookup_bits is not None:
            self.set_lookup_bits(lookup_bits)
        circuit = self._ensure_compiled(inputset)
        if mode == "simulate":
            circuit.enable_fhe_simulation()
            evaluate = circuit.simulate
        elif mode == "execute":
            circuit.enable_fhe_execution()
            self.keygen()
            evaluate = circuit.encrypt_run_decrypt
        else:
            evaluate = circuit.graph
        batch = len(next(iter(inputs.values())))
        results = []
        for b in range(batch):
            out = evaluate(*[np.asarray(inputs[i.name][b], np.int64) for i in self.graph.inputs])
            results.append(out if isinstance(out, tuple) else (out,))
        outputs = {}
        for k, name in enumerate(self.graph.outputs):
            dtype = storage_dtype(self.analysis.tensors[name].bits)
            outputs[name] = np.stack([np.asarray(r[k], np.int64).reshape(self.analysis.tensors[name].shape)
                                      for r in results]).astype(dtype)
        return outputs

    # ------------------------------------------------------------ facts

    def coverage(self) -> dict[str, dict]:
        """How much of each tensor's proven interval the compilation inputset reached."""
        self._ensure_compiled()
        return coverage(self.graph, self.analysis, self.samples)

    def lookup_report(self) -> dict[str, dict]:
        """Per lookup node: proven input interval, rounding (offset, shift) and table input bits."""
        return {name: {"interval": (lk.plan.lo, lk.plan.hi), "input_bits": int_bits(lk.plan.lo, lk.plan.hi),
                       "offset": lk.plan.offset, "shift": lk.plan.shift, "table_bits": lk.plan.tlu_bits}
                for name, lk in self.lookups.items()}


def _digest(inputset) -> str | None:
    if inputset is None:
        return None
    h = hashlib.sha256()
    items = sorted(inputset.items()) if isinstance(inputset, dict) else [("", inputset)]
    for k, v in items:
        a = np.ascontiguousarray(v)
        h.update(k.encode() + str(a.shape).encode() + str(a.dtype).encode() + a.tobytes())
    return h.hexdigest()


def prepare(graph: Graph, analysis: Analysis, *, inputset=None, lookup_bits: int = DEFAULT_LOOKUP_BITS,
            key_dir: str | None = None, global_p_error: float | None = None, p_error: float | None = None):
    """Backend protocol: check the graph now (FHEUnsupported names the node), compile on first run."""
    if isinstance(inputset, dict) and not inputset:
        raise InputError("inputset is empty")
    options = FHEOptions(lookup_bits=lookup_bits, key_dir=key_dir, global_p_error=global_p_error, p_error=p_error)
    return FHERunner(graph, analysis, options, inputset)
