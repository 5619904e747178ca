"""A 16-element 16-bit accumulator clipped to 6 bits after rounding by r, then a ReLU: (A) the split
(cvm.interp.fhe_clamp, 6-bit tables) against (B) concrete's own np.clip on the rounded value, which
fuses into one table over the rounded width. Compile only: bootstraps and key sizes as concrete
reports them (docs/fhe.md, "Saturating roundings").

    .venv-fhe/bin/python scripts/fhe_clamp_vs_wide_table.py
"""
import numpy as np, cvm, json
from concrete import fhe
from cvm.interp import fhe as F
rng = np.random.default_rng(0)
W = rng.integers(-31, 32, (16, 32))
out = {}
for r in (7, 8, 9):
    b = cvm.GraphBuilder()
    x = b.input("x", (32,), bits=6)
    h = b.op("dense", x, b.const(W), name="fc")
    h = b.op("requant", h, b.const([1]), shift=r, bits=6, name="fc.round")
    m = b.build(b.op("relu", h, name="relu"))
    lo, hi = m.analysis.tensors["fc"].lo, m.analysis.tensors["fc"].hi
    runner = F.prepare(m.graph, m.analysis, lookup_bits=6)
    c = runner._ensure_compiled()
    out[f"split r={r}"] = dict(pbs=c.programmable_bootstrap_count, bsk_MB=round(c.size_of_bootstrap_keys/1e6), ksk_MB=round(c.size_of_keyswitch_keys/1e6), width=c.graph.maximum_integer_bit_width(), acc=[lo, hi])
    def f(v):
        y = v @ W.T
        R = fhe.round_bit_pattern(y, r, exactness=fhe.Exactness.EXACT)
        z = np.clip(R, -31 << r, 31 << r)
        return fhe.univariate(lambda t: np.maximum(t >> r, 0))(z)
    comp = fhe.Compiler(f, {"v": "encrypted"})
    inputset = [rng.integers(-31, 32, 32) for _ in range(64)] + [np.sign(W[i]) * 31 for i in range(16)] + [-np.sign(W[i]) * 31 for i in range(16)]
    c2 = comp.compile(inputset, fhe.Configuration(rounding_exactness=fhe.Exactness.EXACT))
    out[f"np.clip r={r}"] = dict(pbs=c2.programmable_bootstrap_count, bsk_MB=round(c2.size_of_bootstrap_keys/1e6), ksk_MB=round(c2.size_of_keyswitch_keys/1e6), width=c2.graph.maximum_integer_bit_width(),
                                 tlu_in=sorted({n.inputs[0].dtype.bit_width for n in c2.graph.graph.nodes if n.converted_to_table_lookup}))
    print(json.dumps({k: v for k, v in out.items() if k.endswith(f"r={r}")}, default=int), flush=True)
