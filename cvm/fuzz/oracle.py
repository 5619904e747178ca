"""The oracle: what must hold for every byte string, accepted or not.

A model file comes from anyone, so loading either raises a CVMError or returns a model; an accepted
model must reload from its own `to_bytes()`, and run on the reference and numba backends (and
numba's portable kernels, every op split over threads) to the same output hash, or fail on both with
the same CVMError class. Anything else is a crash or a disagreement: a bug in the decoder, the
verifier or a backend, never excused here.
"""
from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import CVMError, loads, output_hash
from .draws import pick

MAX_RUN_GAS = 500_000_000  # gas x batch above which an accepted model is not run ("too big")
MAX_RUN_ACTIVATIONS = 1 << 27  # bytes of activations x batch, likewise
MAX_BATCH = 3


@dataclass
class Outcome:
    """What one file did; `detail` is the key findings and rejection reasons are counted by."""
    kind: str  # rejected | ran | run_error | too_big | crash | disagreement
    detail: str  # error class and first words, or the output hash, or the traceback
    seconds: float = 0.0


def _reason(e: BaseException) -> str:
    """The error class and its message's first words, numbers and quoted names blanked (a key to count by)."""
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", str(e))
    msg = re.sub(r"-?\d+", "N", msg)
    return f"{type(e).__name__}: {' '.join(msg.split()[:6])}"


def _crash(where: str, e: BaseException) -> str:
    """The exception and its innermost four frames (file:line): enough to tell crashes apart and find
    the line, short enough to print with each finding."""
    tb = traceback.extract_tb(e.__traceback__)
    frames = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in tb[::-1][:4])
    return f"{where}: {type(e).__name__}: {str(e)[:300]} at {frames}"


def random_inputs(model, rng: np.random.Generator) -> dict:
    """A batch of 1..MAX_BATCH over each input's whole bit range, both ends and a zero present, 15 %
    saturated at one end: the values where integer kernels overflow first."""
    batch = int(rng.integers(1, MAX_BATCH + 1))
    xs = {}
    for spec in model.inputs:
        m = (1 << (spec.bits - 1)) - 1
        x = rng.integers(-m, m + 1, size=(batch, *spec.shape[1:]), dtype=np.int64)
        if x.size and rng.random() < 0.15:  # saturated: every value at one end of the range
            x[...] = pick(rng, [-m, m])
        elif x.size:
            flat = x.reshape(-1)
            flat[0], flat[-1] = -m, m
            if flat.size > 2:
                flat[int(rng.integers(flat.size))] = 0
        xs[spec.name] = x.astype(spec.dtype)
    return xs


def _run(model, xs, backend):
    """("ok", output hash), ("error", CVMError class) or ("crash", what): results that compare with ==,
    so that backends agree exactly when their tuples are equal."""
    try:
        if backend == "numba-portable":  # the other kernel path, every op split over 2 threads
            from ..interp import numba as nb
            out = nb.prepare(model.graph, model.analysis, isa="portable", threads=2, split="always")(xs)
            return "ok", output_hash(out if len(out) > 1 else next(iter(out.values())))
        return "ok", output_hash(model.run(xs, backend=backend))
    except CVMError as e:
        return "error", type(e).__name__
    except Exception as e:  # noqa: BLE001 - the finding
        return "crash", _crash(f"{backend} run", e)


def check(data: bytes, rng: np.random.Generator, max_gas: int = MAX_RUN_GAS,
          max_activations: int = MAX_RUN_ACTIVATIONS, portable: bool = True) -> Outcome:
    """The oracle for one file: rejected cleanly, or accepted and run to the same result by both backends."""
    t0 = time.perf_counter()

    def done(kind, detail):
        return Outcome(kind, detail, time.perf_counter() - t0)

    try:
        model = loads(data)
    except CVMError as e:
        return done("rejected", _reason(e))
    except Exception as e:  # noqa: BLE001
        return done("crash", _crash("load", e))
    try:  # an accepted model writes back to a file that loads to the same hash
        again = loads(model.to_bytes())
        if again.hash != model.hash:
            return done("crash", "load: to_bytes() reloads to another hash")
    except Exception as e:  # noqa: BLE001
        return done("crash", _crash("reload of to_bytes()", e))
    xs = random_inputs(model, rng)
    batch = next(iter(xs.values())).shape[0] if xs else 1
    if model.gas * batch > max_gas or model.analysis.activation_bytes * batch > max_activations:
        return done("too_big", f"gas {model.gas * batch}, activations {model.analysis.activation_bytes * batch}")
    ref = _run(model, xs, "reference")
    fast = _run(model, xs, "numba")
    for r in (ref, fast):
        if r[0] == "crash":
            return done("crash", r[1])
    if ref != fast:
        return done("disagreement", f"reference {ref[0]} {ref[1][:16] if isinstance(ref[1], bytes) else ref[1]}, "
                                    f"numba {fast[0]} {fast[1][:16] if isinstance(fast[1], bytes) else fast[1]}")
    if ref[0] == "error":
        return done("run_error", ref[1])
    if portable:  # the same inputs, the portable kernels with every op split across threads
        other = _run(model, xs, "numba-portable")
        if other[0] == "crash":
            return done("crash", other[1])
        if other != ref:
            return done("disagreement", f"reference 0x{ref[1].hex()[:16]}, numba-portable {other[0]} "
                                        f"{other[1].hex()[:16] if isinstance(other[1], bytes) else other[1]}")
    return done("ran", "0x" + ref[1].hex())
