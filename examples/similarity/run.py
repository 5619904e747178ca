"""The similarity example end to end on the embedded chain (see README.md):

1. a sentence encoder converted by MRT with the encoder's wide tensors: all-MiniLM-L6-v2 when
   scripts/models/minilm_export.py has exported it into .cache/models/minilm (--model minilm, the default
   when present), else the committed two-layer fixture (--model fixture);
2. oracle (2 of 3) and PolicyMatcher deployed, the encoder registered with its two inputs, three operators;
3. the owner adds policy clauses (held-out sentences): the operators embed them and the oracle's callback
   stores the embeddings;
4. claimants submit claims (other held-out sentences); the callback picks the clause with the largest
   cosine and matches it when the cosine is at least the threshold, in exact integer arithmetic;
5. each on-chain decision printed next to the float model's (onnxruntime) and the integer rule computed
   here, with the gas of a claim's round.

    .venv/bin/python examples/similarity/run.py [--model minilm|fixture] [--clauses 4] [--claims 6]

Exits 1 if an on-chain decision differs from the integer rule computed off chain, or from the float
model's where the float cosine is more than 0.01 from the threshold.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from similarity_chain import (  # noqa: E402
    CONFIG, MINILM, THRESHOLD, add_policies, claim, convert_source, decide, decide_float, deploy_example,
    gas_by_request, load_source, rows, stored_policies, submit_claims,
)

from cvm.report import table  # noqa: E402

MARGIN = 0.01  # float cosines this close to the threshold may fall either side after quantization


def pick(source, clauses: int, claims: int) -> tuple[list[int], list[int]]:
    """Clauses: held-out rows spread over the set; claims: the first clause itself (a certain match), then
    for each clause the row whose float embedding is nearest to it (likely matches), then the rows
    least similar to every clause (likely no match)."""
    import onnxruntime as ort
    sess = ort.InferenceSession(str(source.onnx), providers=["CPUExecutionProvider"])
    n = len(source.held["input_ids"])
    emb = np.concatenate([sess.run(None, rows(source, slice(i, i + 32)))[0] for i in range(0, n, 32)])
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    policy = [int(i) for i in np.linspace(0, n - 1, clauses, dtype=int)]
    sim = emb @ emb[policy].T
    sim[policy] = -2
    near = [int(np.argmax(sim[:, j])) for j in range(clauses)]
    far = [int(i) for i in np.argsort(sim.max(axis=1)) if i not in policy][: max(0, claims - 1 - clauses)]
    return policy, ([policy[0]] + near + far)[:claims]


def text(source, i: int, width: int = 60) -> str:
    s = source.sentences[i] if i < len(source.sentences) else f"held-out row {i}"
    return s if len(s) <= width else s[:width - 1] + "…"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the similarity example on the embedded chain")
    ap.add_argument("--model", choices=["minilm", "fixture"],
                    default="minilm" if (MINILM / "minilm_L64.onnx").exists() else "fixture")
    ap.add_argument("--clauses", type=int, default=4)
    ap.add_argument("--claims", type=int, default=6)
    ap.add_argument("--backend", default="numba", choices=["numba", "reference"])
    args = ap.parse_args(argv)

    source = load_source(args.model)
    model = convert_source(source)
    print(f"model   {source.onnx.relative_to(source.onnx.parents[2])} -> CVM {model.hash_hex}")
    print(f"        {model.gas:,} CVM gas per sentence, opset {model.graph.opset}, input "
          f"{len(model.encode_input(rows(source, [0])))} bytes (ids, then mask), embedding of "
          f"{model.outputs[0].shape[1]} x {model.outputs[0].dtype}")
    policy_rows, claim_rows = pick(source, args.clauses, args.claims)
    d = deploy_example(model, Path(tempfile.mkdtemp(prefix="cvm-similarity-")), backend=args.backend,
                       claimants=len(claim_rows))
    add_policies(d, [model.encode_input(rows(source, [i])) for i in policy_rows])
    policies = stored_policies(d)
    print(f"clauses (threshold cos >= {THRESHOLD}):")
    for j, i in enumerate(policy_rows):
        print(f"  [{j}] {text(source, i)}")
    start = d.w3.eth.block_number + 1
    ids = submit_claims(d, [model.encode_input(rows(source, [i])) for i in claim_rows])

    import onnxruntime as ort
    sess = ort.InferenceSession(str(source.onnx), providers=["CPUExecutionProvider"])
    fp, fc = sess.run(None, rows(source, policy_rows))[0], sess.run(None, rows(source, claim_rows))[0]
    out, failed = [], []
    for n, (rid, i, f) in enumerate(zip(ids, claim_rows, fc)):
        got = claim(d, rid)
        int_rule = decide(policies, model.run(rows(source, [i]), backend="reference")[0])
        f_match, f_best, f_cos = decide_float(fp, f)
        chain = (got["matched"], got["policy"], got["dot"])
        same_float = got["matched"] == f_match and (not f_match or got["policy"] == f_best)
        ok = chain == int_rule and (same_float or abs(f_cos - float(THRESHOLD)) <= MARGIN)
        if not ok:
            failed.append(n + 1)
        cos = got["dot"] / np.sqrt(float(got["claim_norm2"]) * float(np.dot(policies[got["policy"]].astype(float),
                                                                            policies[got["policy"]])))
        out.append([f"#{n + 1} {text(source, i, 48)}", f"[{f_best}] {f_cos:.4f}", "match" if f_match else "none",
                    f"[{got['policy']}] {cos:.4f}", "match" if got["matched"] else "none", "yes" if ok else "NO"])
    print(table(["claim", "float best, cos", "float", "chain best, cos", "chain", "same"], out, "llllll"))
    gas = gas_by_request(d, start)[ids[0]]
    print()
    print(table([f"transaction (claim request {ids[0]})", "gas", "note"],
                gas + [["round total", sum(g for _, g, _ in gas), ""]], "lrl"))
    print(f"fee     {d.oracle.functions.feeFor(model.hash).call()} wei per sentence (oracle.feeFor: min fee "
          f"{CONFIG.min_fee} + {model.gas} CVM gas x {CONFIG.fee_per_gas} + the operators' chain gas)")
    print()
    print(table(["setup", "gas", "note"], d.gas, "lrl"))
    if failed:
        print(f"similarity example: FAILED for claims {failed}")
        return 1
    print(f"similarity example: all {len(out)} on-chain decisions equal the integer rule and the float model's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
