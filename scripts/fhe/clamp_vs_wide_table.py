"""A 16-element 16-bit accumulator clipped to 6 bits after rounding by r, then a ReLU: (A) the split
(cvm.interp.fhe_clamp, 6-bit tables) against (B) concrete's own np.clip on the rounded value, which
fuses into one table over the rounded width. Compile only: bootstraps and key sizes as concrete
reports them (docs/fhe.md, "Saturating roundings").

    .venv-fhe/bin/python scripts/fhe/clamp_vs_wide_table.py
"""
import json

import numpy as np
from concrete import fhe

import cvm
from cvm.interp import fhe as F

RNG = np.random.default_rng(0)
W = RNG.integers(-31, 32, (16, 32))


def _sizes(circuit) -> dict:
    return dict(pbs=circuit.programmable_bootstrap_count, bsk_MB=round(circuit.size_of_bootstrap_keys / 1e6),
                ksk_MB=round(circuit.size_of_keyswitch_keys / 1e6), width=circuit.graph.maximum_integer_bit_width())


def split(r: int) -> dict:
    """(A): the CVM graph (dense, the rounding requant that clamps to 6 bits, relu) through the FHE backend."""
    b = cvm.GraphBuilder()
    x = b.input("x", (32,), bits=6)
    h = b.op("dense", x, b.const(W), name="fc")
    h = b.op("requant", h, b.const([1]), shift=r, bits=6, name="fc.round")
    m = b.build(b.op("relu", h, name="relu"))
    runner = F.prepare(m.graph, m.analysis, lookup_bits=6)
    acc = m.analysis.tensors["fc"]
    return {**_sizes(runner._ensure_compiled()), "acc": [acc.lo, acc.hi]}


def concrete_clip(r: int) -> dict:
    """(B): concrete's round_bit_pattern, np.clip and the ReLU table on the same accumulator."""
    def f(v):
        y = v @ W.T
        rounded = fhe.round_bit_pattern(y, r, exactness=fhe.Exactness.EXACT)
        z = np.clip(rounded, -31 << r, 31 << r)
        return fhe.univariate(lambda t: np.maximum(t >> r, 0))(z)
    inputset = ([RNG.integers(-31, 32, 32) for _ in range(64)] + [np.sign(W[i]) * 31 for i in range(16)]
                + [-np.sign(W[i]) * 31 for i in range(16)])
    c = fhe.Compiler(f, {"v": "encrypted"}).compile(inputset, fhe.Configuration(rounding_exactness=fhe.Exactness.EXACT))
    tlu_in = sorted({n.inputs[0].dtype.bit_width for n in c.graph.graph.nodes if n.converted_to_table_lookup})
    return {**_sizes(c), "tlu_in": tlu_in}


if __name__ == "__main__":
    for shift in (7, 8, 9):
        print(json.dumps({f"split r={shift}": split(shift), f"np.clip r={shift}": concrete_clip(shift)}, default=int),
              flush=True)
