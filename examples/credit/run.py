"""The credit example end to end on the embedded chain (see README.md):

1. the committed XGBoost default-risk model (fixtures/models/credit_xgb.onnx) converted by MRT, and its
   decisions against the float model's on the whole test split, off chain;
2. oracle (2 of 3) and CreditLine deployed, the model registered, three operators staked;
3. borrowers from the test split (applicants the model never saw) apply with their encoded features;
   the operators run the model, commit, reveal, and the oracle calls CreditLine back;
4. each on-chain decision printed next to the float model's, with the gas and the fee.

    .venv/bin/python examples/credit/run.py [--borrowers 6] [--backend numba] [--window 0]

Exits 1 if any on-chain decision differs from the float model's or a callback failed.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from credit_chain import CONFIG, apply, callback_ok, deploy_example, gas_by_request, line, run_until_decided  # noqa: E402
from credit_model import (  # noqa: E402
    MAX_LINE, PD_BOUNDS, convert_model, float_margin, float_pd, line_of_tier, near_bound, split, tiers_of_margin,
)

from cvm.report import table  # noqa: E402


def pick_borrowers(margins: np.ndarray, count: int) -> list[int]:
    """Test-split rows covering every tier first (the first row of each), then the next rows in order."""
    tiers = tiers_of_margin(margins)
    picked = [int(np.flatnonzero(tiers == t)[0]) for t in sorted(set(tiers.tolist()), reverse=True)]
    picked += [i for i in range(len(margins)) if i not in picked]
    return picked[:count]


def off_chain_agreement(model, xte: np.ndarray) -> dict:
    """The integer model against the float model on every test applicant: argmax and limit tier."""
    out = model.dequantize_output(model.run(model.quantize_input(xte)))
    fm, step = float_margin(xte), float(np.max(model.outputs[0].scale))
    return {"applicants": len(xte), "class_agree": int(((out[:, 1] > 0) == (fm > 0)).sum()),
            "tier_agree": int((tiers_of_margin(out[:, 1]) == tiers_of_margin(fm)).sum()),
            "near_bound": int(near_bound(fm, step).sum()), "max_margin_error": float(np.abs(out[:, 1] - fm).max())}


def tokens(wei: int) -> str:
    return f"{wei / 10**18:,.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the credit example on the embedded chain")
    ap.add_argument("--borrowers", type=int, default=6)
    ap.add_argument("--backend", default="numba", choices=["numba", "reference"])
    ap.add_argument("--window", type=int, default=0, help="challenge window in seconds (0: k-of-n fast path)")
    args = ap.parse_args(argv)

    model = convert_model()
    _, xte, _, yte = split()
    step = float(np.max(model.outputs[0].scale))
    print(f"model   fixtures/models/credit_xgb.onnx -> CVM {model.hash_hex}")
    print(f"        {model.gas} CVM gas per applicant, input {len(model.encode_input(model.quantize_input(xte[:1])))} "
          f"bytes (one threshold code per feature), output step {step:.3g} log-odds")
    agree = off_chain_agreement(model, xte)
    print(f"off-chain, all {agree['applicants']} test applicants: good/bad as float {agree['class_agree']}, "
          f"limit tier as float {agree['tier_agree']}, within 2 steps of a bound {agree['near_bound']}, "
          f"max |margin - float| {agree['max_margin_error']:.2g}")
    print(f"policy  PD < {', '.join(f'{p:.0%}' for p in PD_BOUNDS)} -> 25% / 50% / 100% of {tokens(MAX_LINE)} "
          f"tokens; PD >= {PD_BOUNDS[0]:.0%} denied")
    print()

    workdir = Path(tempfile.mkdtemp(prefix="cvm-credit-"))
    d = deploy_example(model, workdir, backend=args.backend, window=args.window, borrowers=args.borrowers)
    fm = float_margin(xte)
    rows_ix = pick_borrowers(fm, args.borrowers)
    start = d.w3.eth.block_number + 1
    requests = []
    for borrower, i in zip(d.borrowers, rows_ix):
        features = model.encode_input(model.quantize_input(xte[i:i + 1]))
        requests.append(apply(d, borrower, features))
    run_until_decided(d, [r for r, _ in requests])

    rows, failed = [], []
    p_float = float_pd(xte[rows_ix])
    for n, (borrower, i, (request_id, _)) in enumerate(zip(d.borrowers, rows_ix, requests)):
        got = line(d, borrower)
        want_tier = int(tiers_of_margin(fm[i:i + 1])[0])
        ok = callback_ok(d, request_id) and got["tier"] == want_tier and got["limit"] == line_of_tier(want_tier)
        if not ok:
            failed.append(n + 1)
        chain_pd = 1 / (1 + math.exp(-got["score"] * step))
        rows.append([f"#{n + 1} (test row {i})", "bad" if yte[i] else "good", f"{p_float[n]:.4f}",
                     "deny" if want_tier == 0 else tokens(line_of_tier(want_tier)), got["score"], f"{chain_pd:.4f}",
                     got["state"], tokens(got["limit"]), "yes" if ok else "NO"])
    print(table(["borrower", "outcome", "float PD", "float line", "chain score", "chain PD", "chain", "chain line",
                 "same"], rows, "lllrrrlrl"))

    gas = gas_by_request(d, start)
    first, fee = requests[0]
    round_rows = gas[first]
    print()
    print(table(["transaction (request %d)" % first, "gas", "note"], round_rows + [["round total", sum(
        r[1] for r in round_rows), ""]], "lrl"))
    print(f"fee     {fee} wei = {fee / 1e18:.6f} ETH per application (oracle.feeFor: min fee "
          f"{CONFIG.min_fee} + {model.gas} CVM gas x {CONFIG.fee_per_gas} + the operators' chain gas)")
    print()
    print(table(["setup", "gas", "note"], d.gas, "lrl"))
    print()
    if failed:
        print(f"credit example: FAILED for borrowers {failed}")
        return 1
    print(f"credit example: all {len(rows)} on-chain decisions equal the float model's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
