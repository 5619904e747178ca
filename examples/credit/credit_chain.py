"""The credit example on the embedded chain: deploy the oracle and CreditLine, register the default-risk
model, stake three operators (in-process `cvm.chain.node.Operator`s, as `cvm demo` runs them), let
borrowers apply, step the operators until every application is decided, and read back the decisions and
the gas each transaction used. Used by run.py and tests/chain/test_credit_example.py."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import OracleConfig, call_struct, deploy, deploy_oracle, register_model, send
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.node import Operator, Status
from cvm.chain.store import ModelStore

from credit_model import LINE_SHARES_PCT, MAX_LINE, int_cutoffs

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "examples" / "artifacts"  # written by contracts/compile.js from contracts/src/examples
CONFIG = OracleConfig(quorum=2, committee_size=3)
NUM_OPERATORS = 3
MAX_ROUNDS = 10  # operator passes before giving up on a decision
STATES = ("none", "pending", "approved", "denied")  # CreditLine.State


@dataclass
class Deployed:
    chain: EmbeddedChain
    model: cvm.Model
    oracle: object
    credit: object
    operators: list
    borrowers: list
    window: int  # CreditLine's challenge window in seconds
    gas: list = field(default_factory=list)  # [step, gas, note] rows of the setup

    @property
    def w3(self):
        return self.chain.w3


def deploy_example(model: cvm.Model, workdir: Path, backend: str = "numba", window: int = 0,
                   borrowers: int = 6) -> Deployed:
    """Chain, oracle (2 of 3), model registered by commit-reveal, CreditLine with the model's cutoffs,
    three staked operators; `borrowers` funded accounts to apply from."""
    store = ModelStore(workdir / "models")
    store.put(model)
    chain = EmbeddedChain(store, backend=backend, num_accounts=1 + NUM_OPERATORS + borrowers)
    w3, (deployer, *accounts) = chain.w3, chain.keys
    dep = deploy_oracle(w3, deployer, CONFIG)
    gas = [["deploy ModelRegistry", dep.receipts["ModelRegistry"]["gasUsed"], ""],
           ["deploy InferenceOracle", dep.receipts["InferenceOracle"]["gasUsed"],
            f"k={CONFIG.quorum} of n={CONFIG.committee_size}, with its DisputeGame"]]
    committed, r = register_model(dep.registry, deployer, model, uri="file:credit_xgb.cvm")
    gas += [["register model: commit", committed["gasUsed"], ""], ["register model: register", r["gasUsed"], ""]]
    step = float(np.max(model.outputs[0].scale))
    credit, r = deploy(w3, deployer, "CreditLine", dep.oracle.address, model.hash, int_cutoffs(step),
                       list(LINE_SHARES_PCT), MAX_LINE, window, directory=ARTIFACTS)
    gas.append(["deploy CreditLine", r["gasUsed"], f"cutoffs {int_cutoffs(step)} (output units)"])
    keys, operators = accounts[:NUM_OPERATORS], []
    # an operator locks a bond (slash_amount) per request it commits to, until the request closes: with a
    # challenge window that is minutes later, so each stakes enough to bond every application at once
    stake = CONFIG.min_stake + borrowers * CONFIG.slash_amount
    for i, key in enumerate(keys):
        r = send(w3, key, dep.oracle.functions.stake(), value=stake)
        gas.append([f"stake (operator {i + 1})", r["gasUsed"], ""])
        operators.append(Operator(w3, key, dep.oracle.address, store, workdir / f"node{i + 1}.sqlite", backend=backend))
    return Deployed(chain, model, dep.oracle, credit, operators, accounts[NUM_OPERATORS:], window, gas)


def apply(d: Deployed, borrower, features: bytes) -> tuple[int, int]:
    """CreditLine.applyForCredit paying the oracle's fee; returns (request id, fee)."""
    fee = d.oracle.functions.feeFor(d.model.hash).call()
    r = send(d.w3, borrower, d.credit.functions.applyForCredit(features), value=fee)
    return d.credit.events.Applied().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"], fee


def run_until_decided(d: Deployed, request_ids: list[int]) -> None:
    """Steps every operator until no request is pending (at most MAX_ROUNDS passes). With a challenge
    window, once the quorum has revealed, the embedded chain's clock is moved past the reveal deadline plus
    the window, so that an operator calls finalize."""
    for _ in range(MAX_ROUNDS):
        for op in d.operators:
            op.step()
        pending = [r for r in (call_struct(d.oracle.functions.getRequest(i)) for i in request_ids)
                   if r["status"] == Status.PENDING]
        if not pending:
            return
        if d.window and all(r["reveals"] >= CONFIG.quorum for r in pending):  # revealed: let the window pass
            d.chain.advance_time(max(r["revealDeadline"] for r in pending) + d.window + 10 - d.chain.timestamp())
    raise RuntimeError(f"requests {request_ids} still pending after {MAX_ROUNDS} operator rounds")


def line(d: Deployed, borrower) -> dict:
    """CreditLine.lines(borrower) as a dict, with the state named."""
    state, tier, score, limit, features_hash, request_id = d.credit.functions.lines(borrower.address).call()
    return {"state": STATES[state], "tier": tier, "score": score, "limit": limit,
            "features_hash": bytes(features_hash), "request_id": request_id}


def callback_ok(d: Deployed, request_id: int) -> bool | None:
    """Whether the oracle's callback into CreditLine succeeded (None: no callback yet)."""
    logs = d.oracle.events.CallbackResult().get_logs(from_block=0, argument_filters={"requestId": request_id})
    return bool(logs[-1]["args"]["success"]) if logs else None


def gas_by_request(d: Deployed, from_block: int) -> dict[int, list[list]]:
    """request id -> [[transaction, gas, note]] for every transaction from `from_block` on that named the
    request: CreditLine.applyForCredit (from its Applied event) and the oracle's calls (their requestId)."""
    rows: dict[int, list[list]] = defaultdict(list)
    oracle, credit = d.oracle.address.lower(), d.credit.address.lower()
    for n in range(from_block, d.w3.eth.block_number + 1):
        for tx in d.w3.eth.get_block(n, full_transactions=True)["transactions"]:
            to = (tx["to"] or "").lower()
            if to not in (oracle, credit):
                continue
            receipt = d.w3.eth.get_transaction_receipt(tx["hash"])
            if to == credit:
                applied = d.credit.events.Applied().process_receipt(receipt, errors=DISCARD)
                if applied:
                    rows[applied[0]["args"]["requestId"]].append(["CreditLine.applyForCredit", receipt["gasUsed"],
                                                                  "request, fee paid"])
                continue
            fn, args = d.oracle.decode_function_input(tx.get("input", tx.get("data")))
            if "requestId" not in args:
                continue
            finalized = d.oracle.events.Finalized().process_receipt(receipt, errors=DISCARD)
            rows[args["requestId"]].append([f"oracle.{fn.fn_name}", receipt["gasUsed"],
                                            "finalises + CreditLine callback" if finalized else ""])
    return dict(rows)
